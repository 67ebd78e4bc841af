/*
 * serve — flywheel checkpoints behind an OpenAI-compatible HTTP API
 * (libmicrohttpd).  See serve(1).
 *
 * libmicrohttpd is loaded at run time (dlopen), so that the other tools,
 * which all link the same libraries, do not depend on it.
 *
 * Each checkpoint has one decoding thread (its engine) and one decoding
 * state of --max-seqs sequences.  Connection threads turn requests into
 * jobs and queue them; the engine admits queued jobs while sequences are
 * free, prefills each, and then draws one token for every live sequence
 * and runs one batched step for all of them, so concurrent requests decode
 * together.  A finished sequence's place is taken by the last live one,
 * which keeps the live sequences at the front of the state.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "fw_cli.h"
#include "fw_policy.h"
#include "fw_rollout.h"
#include "fw_toolcall.h"
#include "kernels_dev.h"

#if !__has_include(<microhttpd.h>)
/* Built where libmicrohttpd-dev is missing: the tool says so. */
int main(void)
{
	fw_cli_init("serve");
	fw_warn("built without libmicrohttpd (install libmicrohttpd-dev and rebuild)");
	return FW_EXIT_DATA;
}
#else
#include <microhttpd.h>

static const char usage_text[] =
	"usage: serve --ckpt NAME=DIR ... [--host ADDR] [--port P] [--max-body BYTES]\n"
	"             [--api-key KEY] [--max-seqs N] [--device cpu|cuda[:N]]\n"
	"       serve -h | --help | --version\n";

static const struct fw_opt_doc options[] = {
	{ "--ckpt NAME=DIR", "a checkpoint and its model name (repeat for more)" },
	{ "--host ADDR", "the IPv4 address to listen on (default 127.0.0.1)" },
	{ "--port P", "the port" },
	{ "--max-body BYTES", "the largest request body accepted" },
	{ "--api-key KEY", "answer /v1/* and /tokenize only with this bearer key" },
	{ "--max-seqs N", "sequences each checkpoint decodes at once (default 16, 1 to 1024)" },
	{ "--device cpu|cuda[:N]", "where the checkpoints run (default FW_DEVICE, else a GPU when there is one)" },
	{ "-h, --help", "print this help and exit" },
	{ "--version", "print the version and exit" },
	{ NULL, NULL },
};

#define MAX_TOP 20   /* top_logprobs at most, as OpenAI allows */
#define MAX_STOPS 16 /* stop strings at most */
#define NBUCKET 12   /* latency histogram buckets */
#define MIN_SHARE 32 /* prompt tokens worth taking from another sequence */
static const double buckets[NBUCKET] = { 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
					 1, 2.5, 5, 10, 30, 60 };

/* One choice of a job as the engine writes it (under the arm's lock). */
struct choice {
	int32_t *tok;      /* ids drawn, the stopping one included */
	float *lp;         /* their log-probs */
	size_t *tend;      /* bytes of text through each token */
	int32_t *top_id;   /* (cap, ntop) alternatives of each position */
	float *top_lp;
	int n, cap;
	struct fw_buf text;/* bytes of the non-special tokens drawn */
	size_t len;        /* bytes of text that are the answer (a stop
			    * string and what follows it cut off) */
	int done;
	int stop_tok;      /* the last token is an end or stop token */
	const char *finish;/* "stop", "length" */
};

/* One request to one checkpoint.  Two owners: the connection that made it
 * and the engine; the last to let go frees it. */
struct job {
	int score;               /* a scoring job (echo with max_tokens 0) */
	int32_t *ids;            /* the prompt */
	size_t nids;
	int n, max_tokens, ntop;
	struct fw_sampler s;
	uint64_t *rng;           /* (n) each choice's random stream */
	char *stops[MAX_STOPS];
	size_t stoplen[MAX_STOPS];
	int nstops;
	int32_t *stop_ids;
	int nstop_ids;
	int ignore_eos;          /* the model's end tokens do not end it */
	const char *hold;        /* text from which a streamed answer is held
				  * back until the end (a tool call), or NULL */
	int hold_json;           /* hold back an answer that starts with '{' */
	struct choice *ch;       /* (n) */
	float *plp;              /* score: (nids + 1) log-probs */
	int stream;              /* woken at each token, not only at the end */
	pthread_cond_t cv;       /* the connection waits on it (arm's lock) */
	int admitted, finished, cancelled, failed;
	int live;                /* sequences in the engine's batch */
	char err[256];
	int refs;
	double t0, t_first;
};

/* One checkpoint by name, with its engine. */
struct arm {
	const char *name, *dir;
	struct fw_builtin *b;
	struct fw_gen *g;
	int S;                   /* sequences of g */
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t work;     /* the engine waits for jobs */
	struct job **queue;      /* waiting jobs, FIFO */
	int nq, capq;
	int nrun;                /* jobs being decoded */
	int tmpl;                /* chat template, or -1 */
	/* metrics (under mu) */
	unsigned long long prompt_tokens, gen_tokens, ok;
	unsigned long long hist[NBUCKET + 1];
	double lat_sum;
	unsigned long long steps, step_seqs;
	unsigned long long shared;  /* prompt tokens taken from another sequence */
};

/* The libmicrohttpd calls serve makes, found by dlopen. */
static struct {
	struct MHD_Daemon *(*start_daemon)(unsigned int, uint16_t, MHD_AcceptPolicyCallback, void *,
					   MHD_AccessHandlerCallback, void *, ...);
	void (*stop_daemon)(struct MHD_Daemon *);
	const union MHD_DaemonInfo *(*get_daemon_info)(struct MHD_Daemon *,
							enum MHD_DaemonInfoType, ...);
	struct MHD_Response *(*create_response_from_buffer)(size_t, void *,
							     enum MHD_ResponseMemoryMode);
	struct MHD_Response *(*create_response_from_callback)(uint64_t, size_t,
							      MHD_ContentReaderCallback, void *,
							      MHD_ContentReaderFreeCallback);
	enum MHD_Result (*add_response_header)(struct MHD_Response *, const char *, const char *);
	enum MHD_Result (*queue_response)(struct MHD_Connection *, unsigned int,
					  struct MHD_Response *);
	void (*destroy_response)(struct MHD_Response *);
	const char *(*lookup_connection_value)(struct MHD_Connection *, enum MHD_ValueKind,
					       const char *);
} mhd;

static int load_mhd(void)
{
	static const char *const names[] = { "libmicrohttpd.so.12", "libmicrohttpd.so" };
	void *h = NULL;

	for (size_t i = 0; !h && i < sizeof names / sizeof names[0]; i++)
		h = dlopen(names[i], RTLD_NOW);
	if (!h) {
		fw_warn("cannot load libmicrohttpd: %s", dlerror());
		return -1;
	}
	*(void **)&mhd.start_daemon = dlsym(h, "MHD_start_daemon");
	*(void **)&mhd.stop_daemon = dlsym(h, "MHD_stop_daemon");
	*(void **)&mhd.get_daemon_info = dlsym(h, "MHD_get_daemon_info");
	*(void **)&mhd.create_response_from_buffer = dlsym(h, "MHD_create_response_from_buffer");
	*(void **)&mhd.create_response_from_callback =
		dlsym(h, "MHD_create_response_from_callback");
	*(void **)&mhd.add_response_header = dlsym(h, "MHD_add_response_header");
	*(void **)&mhd.queue_response = dlsym(h, "MHD_queue_response");
	*(void **)&mhd.destroy_response = dlsym(h, "MHD_destroy_response");
	*(void **)&mhd.lookup_connection_value = dlsym(h, "MHD_lookup_connection_value");
	if (!mhd.start_daemon || !mhd.stop_daemon || !mhd.get_daemon_info ||
	    !mhd.create_response_from_buffer || !mhd.create_response_from_callback ||
	    !mhd.add_response_header || !mhd.queue_response || !mhd.destroy_response ||
	    !mhd.lookup_connection_value) {
		fw_warn("libmicrohttpd lacks a function serve needs");
		return -1;
	}
	return 0;
}

static struct arm *arms;
static int narms;
static size_t max_body = 8u << 20;
static const char *api_key;
static volatile sig_atomic_t stop;

/* HTTP answers by status, for /metrics. */
static pthread_mutex_t stat_mu = PTHREAD_MUTEX_INITIALIZER;
static const unsigned codes[] = { 200, 400, 401, 404, 405, 413, 500 };
static unsigned long long by_code[sizeof codes / sizeof codes[0] + 1];

static void count_code(unsigned status)
{
	size_t i = 0;

	while (i < sizeof codes / sizeof codes[0] && codes[i] != status)
		i++;
	pthread_mutex_lock(&stat_mu);
	by_code[i]++;
	pthread_mutex_unlock(&stat_mu);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t fresh_base, fresh_ctr;

/* A fresh 64-bit number: response ids and the seeds of requests that name
 * none.  main sets fresh_base first.  Cannot fail. */
static uint64_t fresh(void)
{
	return mix(fresh_base + __atomic_add_fetch(&fresh_ctr, 1, __ATOMIC_RELAXED));
}

/* ---- replies ------------------------------------------------------------- */

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT);
	struct MHD_Response *r;
	enum MHD_Result rc;

	json_decref(j);
	if (!s)
		return MHD_NO;
	r = mhd.create_response_from_buffer(strlen(s), s, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(s);
		return MHD_NO;
	}
	mhd.add_response_header(r, "Content-Type", "application/json");
	count_code(status);
	rc = mhd.queue_response(c, status, r);
	mhd.destroy_response(r);
	return rc;
}

static enum MHD_Result fail(struct MHD_Connection *c, unsigned status, const char *type,
			    const char *msg)
{
	return reply(c, status, json_pack("{s:{s:s,s:s}}", "error", "message", msg, "type", type));
}

/* vLLM's answer to a request it refuses: HTTP 400 and this error object;
 * param names the field at fault, or NULL. */
static enum MHD_Result refuse_param(struct MHD_Connection *c, const char *msg, const char *param)
{
	return reply(c, MHD_HTTP_BAD_REQUEST,
		     json_pack("{s:{s:s,s:s,s:s?,s:i}}", "error", "message", msg, "type",
			       "BadRequestError", "param", param, "code", 400));
}

static enum MHD_Result refuse(struct MHD_Connection *c, const char *msg)
{
	return refuse_param(c, msg, NULL);
}

static struct arm *find_arm(json_t *req)
{
	const char *m = json_string_value(json_object_get(req, "model"));

	if (!m)
		return narms == 1 ? &arms[0] : NULL;
	for (int i = 0; i < narms; i++)
		if (!strcmp(arms[i].name, m))
			return &arms[i];
	return NULL;
}

/* ---- jobs and the engine ------------------------------------------------- */

static void job_free(struct job *j)
{
	for (int k = 0; j->ch && k < j->n; k++) {
		struct choice *c = &j->ch[k];
		free(c->tok);
		free(c->lp);
		free(c->tend);
		free(c->top_id);
		free(c->top_lp);
		fw_buf_free(&c->text);
	}
	for (int i = 0; i < j->nstops; i++)
		free(j->stops[i]);
	free(j->ch);
	free(j->rng);
	free(j->ids);
	free(j->stop_ids);
	free(j->plp);
	pthread_cond_destroy(&j->cv);
	free(j);
}

/* Lets go of one reference to j (under a->mu when locked is set). */
static void job_drop(struct arm *a, struct job *j, int locked)
{
	int last;

	if (!locked)
		pthread_mutex_lock(&a->mu);
	last = --j->refs == 0;
	if (!locked)
		pthread_mutex_unlock(&a->mu);
	if (last)
		job_free(j);
}

/* Queues j on a; the engine holds one reference.  Returns 0, or -1 when
 * out of memory. */
static int submit(struct arm *a, struct job *j)
{
	pthread_mutex_lock(&a->mu);
	if (a->nq == a->capq) {
		int cap = a->capq ? 2 * a->capq : 16;
		struct job **q = realloc(a->queue, sizeof *q * (size_t)cap);
		if (!q) {
			pthread_mutex_unlock(&a->mu);
			return -1;
		}
		a->queue = q;
		a->capq = cap;
	}
	j->refs = 2;
	j->t0 = now();
	a->queue[a->nq++] = j;
	pthread_cond_signal(&a->work);
	pthread_mutex_unlock(&a->mu);
	return 0;
}

/* Waits (under a->mu) until j is finished. */
static void wait_done(struct arm *a, struct job *j)
{
	pthread_mutex_lock(&a->mu);
	while (!j->finished)
		pthread_cond_wait(&j->cv, &a->mu);
	pthread_mutex_unlock(&a->mu);
}

static int is_stop_id(const struct arm *a, const struct job *j, int32_t id)
{
	for (int i = 0; !j->ignore_eos && i < a->b->nstop; i++)
		if (a->b->stop[i] == id)
			return 1;
	for (int i = 0; i < j->nstop_ids; i++)
		if (j->stop_ids[i] == id)
			return 1;
	return 0;
}

/* The ntop most likely ids of logits (V) with their log-probs, best first.
 * Cannot fail. */
static void top_logprobs(const float *logits, int V, int ntop, int32_t *id, float *lp)
{
	double mx = -INFINITY, z = 0;
	int n = 0;

	for (int v = 0; v < V; v++)
		if (logits[v] > mx)
			mx = logits[v];
	for (int v = 0; v < V; v++)
		z += exp((double)logits[v] - mx);
	double lse = mx + log(z);
	for (int v = 0; v < V; v++) {
		float x = logits[v];
		int i;
		if (n == ntop && x <= lp[n - 1])
			continue;
		i = n < ntop ? n++ : n - 1;
		while (i > 0 && lp[i - 1] < x) {
			lp[i] = lp[i - 1];
			id[i] = id[i - 1];
			i--;
		}
		lp[i] = x;
		id[i] = v;
	}
	for (int i = 0; i < n; i++)
		lp[i] = (float)(lp[i] - lse);
}

/* Appends token id (log-prob lp) to choice c of j under a's lock, and ends
 * it at an end token, a stop string or max_tokens.  Returns 0, or -1 when
 * out of memory. */
static int take(struct arm *a, struct job *j, struct choice *c, int32_t id, float lp,
		const int32_t *tid, const float *tlp)
{
	if (c->n == c->cap)
		return -1; /* cap is max_tokens: the engine ends before */
	c->tok[c->n] = id;
	c->lp[c->n] = lp;
	if (j->ntop) {
		memcpy(c->top_id + (size_t)c->n * j->ntop, tid, sizeof(int32_t) * j->ntop);
		memcpy(c->top_lp + (size_t)c->n * j->ntop, tlp, sizeof(float) * j->ntop);
	}
	if (is_stop_id(a, j, id)) {
		c->tend[c->n++] = c->text.n;
		c->finish = "stop";
		c->stop_tok = c->done = 1;
		return 0;
	}
	size_t before = c->text.n;
	if (!fw_tok_is_special(a->b->t, id)) {
		size_t pn;
		const char *pc = fw_tok_piece(a->b->t, id, &pn);
		if (pc && fw_buf_append(&c->text, pc, pn))
			return -1;
	}
	c->tend[c->n++] = c->text.n;
	c->len = c->text.n;
	/* a stop string that ends in the new bytes: the answer ends before it */
	for (int i = 0; i < j->nstops && c->text.n > before; i++) {
		size_t L = j->stoplen[i], from = before >= L - 1 ? before - (L - 1) : 0;
		const char *t = (const char *)c->text.p;
		const char *hit = c->text.n >= L && c->text.n - from >= L
					  ? memmem(t + from, c->text.n - from, j->stops[i], L)
					  : NULL;
		if (hit && (size_t)(hit - t) < c->len) {
			c->len = (size_t)(hit - t);
			c->finish = "stop";
			c->done = 1;
		}
	}
	if (!c->done && c->n == j->max_tokens) {
		c->finish = "length";
		c->done = 1;
	}
	return 0;
}

/* A sequence of the engine's state: choice k of job j. */
struct seq {
	struct job *j;
	int k;
};

static void finish_job(struct arm *a, struct job *j)
{
	double t = now() - j->t0;
	int b = 0;

	j->finished = 1;
	pthread_cond_broadcast(&j->cv);
	a->nrun--;
	if (!j->failed) {
		a->ok++;
		a->prompt_tokens += j->nids;
		for (int k = 0; k < j->n; k++)
			a->gen_tokens += (unsigned long long)j->ch[k].n;
		while (b < NBUCKET && t > buckets[b])
			b++;
		a->hist[b]++;
		a->lat_sum += t;
	}
}

/* Runs a scoring job: the log-prob of each prompt id given the ones before
 * it, through the decoding state's last sequence (free while the engine
 * runs it).  Cannot fail but for the model's own errors, kept in j. */
static void run_score(struct arm *a, struct job *j, int slot)
{
	int32_t *tg = malloc(sizeof(int32_t) * j->nids);

	j->plp = calloc(j->nids + 1, sizeof *j->plp);
	if (!tg || !j->plp) {
		snprintf(j->err, sizeof j->err, "out of memory");
		j->failed = 1;
		free(tg);
		return;
	}
	for (size_t i = 0; i + 1 < j->nids; i++)
		tg[i] = j->ids[i + 1];
	tg[j->nids - 1] = -1;
	if (fw_gen_truncate(a->g, slot, 0, j->err, sizeof j->err) ||
	    fw_gen_score(a->g, slot, j->ids, tg, (int)j->nids, j->plp + 1, j->err,
			 sizeof j->err))
		j->failed = 1;
	/* plp[i] is the log-prob of ids[i]; plp[0] is not defined */
	j->plp[0] = 0;
	free(tg);
}

static void *engine(void *arg)
{
	struct arm *a = arg;
	int V = a->b->m->cfg.vocab, S = a->S, nact = 0;
	struct seq *seqs = calloc((size_t)S, sizeof *seqs);
	int32_t *next = calloc((size_t)S, sizeof *next);
	float *lps = calloc((size_t)S, sizeof *lps);
	int32_t *tid = calloc((size_t)S * MAX_TOP, sizeof *tid);
	float *tlp = calloc((size_t)S * MAX_TOP, sizeof *tlp);
	float *scratch = malloc(sizeof(float) * 2 * (size_t)V);
	char err[256];

	if (!seqs || !next || !lps || !tid || !tlp || !scratch) {
		fw_warn("%s: out of memory for the engine", a->name);
		exit(FW_EXIT_DATA);
	}
	pthread_mutex_lock(&a->mu);
	for (;;) {
		while (!stop && nact == 0 && a->nq == 0)
			pthread_cond_wait(&a->work, &a->mu);
		if (stop)
			break;
		/* admit from the head of the queue while its choices fit */
		struct job *adm[64];
		int nadm = 0, room = S - nact;
		while (a->nq && nadm < 64) {
			struct job *j = a->queue[0];
			int need = j->score ? 1 : j->n;
			if (!j->cancelled && need > room)
				break;
			memmove(a->queue, a->queue + 1, sizeof *a->queue * (size_t)--a->nq);
			j->admitted = 1;
			a->nrun++;
			if (j->cancelled) {
				j->failed = 1;
				finish_job(a, j);
				job_drop(a, j, 1);
				continue;
			}
			room -= j->score ? 0 : need;
			adm[nadm++] = j;
			if (j->score)
				break; /* runs alone in the free sequence */
		}
		pthread_mutex_unlock(&a->mu);
		unsigned long long shared = 0;
		for (int i = 0; i < nadm; i++) {
			struct job *j = adm[i];
			if (j->score) {
				run_score(a, j, nact);
				continue;
			}
			j->t_first = 0;
			/* the longest prompt prefix a live sequence holds (the
			 * last prompt id is run anew: its logits are wanted) */
			int from = -1;
			size_t L = 0;
			for (int s = 0; s < nact; s++) {
				const struct job *o = seqs[s].j;
				size_t l = 0, lim = o->nids < j->nids - 1 ? o->nids : j->nids - 1;
				if (o->failed || seqs[s].k)
					continue;
				while (l < lim && o->ids[l] == j->ids[l])
					l++;
				if (l > L) {
					L = l;
					from = s;
				}
			}
			if (L < MIN_SHARE)
				L = 0;
			if ((L ? fw_gen_copy(a->g, from, nact, j->err, sizeof j->err)
			       : 0) ||
			    fw_gen_truncate(a->g, nact, (int)L, j->err, sizeof j->err) ||
			    fw_gen_score(a->g, nact, j->ids + L, NULL, (int)(j->nids - L), NULL,
					 j->err, sizeof j->err)) {
				j->failed = 1;
				continue;
			}
			shared += L;
			for (int k = 0; k < j->n; k++) {
				if (k)
					fw_gen_copy(a->g, nact - k, nact, err, sizeof err);
				seqs[nact].j = j;
				seqs[nact++].k = k;
			}
			j->live = j->n;
		}
		/* one token for every live sequence */
		const float *logits = fw_gen_logits(a->g);
		for (int s = 0; s < nact; s++) {
			struct job *j = seqs[s].j;
			next[s] = fw_sample(logits + (size_t)s * V, V, &j->s, &j->rng[seqs[s].k],
					    scratch, &lps[s]);
			if (j->ntop)
				top_logprobs(logits + (size_t)s * V, V, j->ntop,
					     tid + (size_t)s * MAX_TOP, tlp + (size_t)s * MAX_TOP);
		}
		pthread_mutex_lock(&a->mu);
		a->shared += shared;
		for (int i = 0; i < nadm; i++)
			if (adm[i]->score || adm[i]->failed) {
				finish_job(a, adm[i]);
				job_drop(a, adm[i], 1);
			}
		for (int s = 0; s < nact; s++) {
			struct job *j = seqs[s].j;
			if (take(a, j, &j->ch[seqs[s].k], next[s], lps[s], tid + (size_t)s * MAX_TOP,
				 tlp + (size_t)s * MAX_TOP)) {
				snprintf(j->err, sizeof j->err, "out of memory");
				j->failed = 1;
			}
			if (!j->t_first)
				j->t_first = now();
		}
		/* retire what ended, the last live sequence taking its place */
		for (int s = 0; s < nact;) {
			struct job *j = seqs[s].j;
			struct choice *c = &j->ch[seqs[s].k];
			if (!(c->done || j->cancelled || j->failed)) {
				s++;
				continue;
			}
			c->done = 1;
			if (!c->finish)
				c->finish = "length";
			if (--j->live == 0) {
				finish_job(a, j);
				job_drop(a, j, 1);
			}
			if (--nact > s) {
				fw_gen_copy(a->g, nact, s, err, sizeof err);
				seqs[s] = seqs[nact];
				next[s] = next[nact];
			}
		}
		/* each connection wakes for its own job only: streams at every
		 * token, the others when theirs ends (finish_job) */
		for (int s = 0; s < nact; s++)
			if (seqs[s].j->stream)
				pthread_cond_signal(&seqs[s].j->cv);
		if (nact) {
			a->steps++;
			a->step_seqs += (unsigned long long)nact;
		}
		pthread_mutex_unlock(&a->mu);
		if (nact && fw_gen_step_first(a->g, nact, next, err, sizeof err)) {
			pthread_mutex_lock(&a->mu);
			for (int s = 0; s < nact; s++) {
				struct job *j = seqs[s].j;
				if (!j->failed) {
					snprintf(j->err, sizeof j->err, "%s", err);
					j->failed = 1;
				}
			}
			pthread_mutex_unlock(&a->mu);
			/* the next round retires them */
		}
		pthread_mutex_lock(&a->mu);
	}
	pthread_mutex_unlock(&a->mu);
	free(seqs);
	free(next);
	free(lps);
	free(tid);
	free(tlp);
	free(scratch);
	return NULL;
}

/* ---- requests ------------------------------------------------------------ */

/* Fields each endpoint reads; any other is refused by name. */
static const char *const completion_fields[] = {
	"model", "prompt", "max_tokens", "max_completion_tokens", "temperature", "top_p",
	"top_k", "n", "seed", "stop", "stop_token_ids", "stream", "stream_options", "logprobs",
	"echo", "user", "prompt_logprobs", "frequency_penalty", "presence_penalty", "logit_bias",
	"best_of", "suffix", "ignore_eos", NULL
};
static const char *const chat_fields[] = {
	"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p",
	"top_k", "n", "seed", "stop", "stop_token_ids", "stream", "stream_options", "logprobs",
	"top_logprobs", "user", "frequency_penalty", "presence_penalty", "logit_bias", "tools",
	"tool_choice", "parallel_tool_calls", "response_format", "store", "ignore_eos", NULL
};

/* A request field serve does not act on, or acts on only at its neutral
 * value; msg says which (buf holds it).  Returns 0 when rq can be served
 * as asked, else -1 with *field the name at fault. */
static int unsupported(json_t *rq, int chat, const char **field, char *buf, size_t len)
{
	const char *const *known = chat ? chat_fields : completion_fields;
	const char *k;
	json_t *v;

	json_object_foreach(rq, k, v) {
		int i = 0;
		while (known[i] && strcmp(known[i], k))
			i++;
		if (!known[i]) {
			snprintf(buf, len, "'%s' is not supported", k);
			return *field = k, -1;
		}
		if (json_is_null(v))
			continue;
		int neutral = 1;
		if (!strcmp(k, "frequency_penalty") || !strcmp(k, "presence_penalty"))
			neutral = json_is_number(v) && json_number_value(v) == 0;
		else if (!strcmp(k, "logit_bias"))
			neutral = json_is_object(v) && json_object_size(v) == 0;
		else if (!strcmp(k, "best_of"))
			neutral = json_is_integer(v) && json_integer_value(v) == 1;
		else if (!strcmp(k, "suffix"))
			neutral = json_is_string(v) && json_string_length(v) == 0;
		else if (!strcmp(k, "store"))
			neutral = json_is_false(v);
		else if (!strcmp(k, "response_format"))
			neutral = json_is_object(v) &&
				  json_is_string(json_object_get(v, "type")) &&
				  !strcmp(json_string_value(json_object_get(v, "type")), "text");
		if (!neutral) {
			snprintf(buf, len, "'%s' is not supported (only its default)", k);
			return *field = k, -1;
		}
	}
	return 0;
}

/* The sampling fields of a request; -1 with msg on a bad value.  *given
 * (may be NULL) is set when the request names max_tokens, *seeded when it
 * names a seed. */
static int sampling(json_t *rq, struct fw_sampler *s, int *max_tokens, uint64_t *seed, int *n,
		    int *given, int *seeded, const char **msg)
{
	json_t *v;

	if (given)
		*given = 0;
	*seeded = 0;
	s->temp = 1;
	s->top_p = 1;
	s->top_k = 0;
	*max_tokens = 16;
	*seed = 0;
	*n = 1;
	if ((v = json_object_get(rq, "temperature")) && !json_is_null(v)) {
		if (!json_is_number(v) || json_number_value(v) < 0)
			return *msg = "'temperature' must be a number >= 0", -1;
		s->temp = (float)json_number_value(v);
	}
	if ((v = json_object_get(rq, "top_p")) && !json_is_null(v)) {
		if (!json_is_number(v) || !(json_number_value(v) > 0 && json_number_value(v) <= 1))
			return *msg = "'top_p' must be in (0, 1]", -1;
		s->top_p = (float)json_number_value(v);
	}
	if ((v = json_object_get(rq, "top_k")) && !json_is_null(v)) {
		/* vLLM's -1 is no truncation, as 0 is */
		if (!json_is_integer(v) || json_integer_value(v) < -1)
			return *msg = "'top_k' must be an integer >= -1", -1;
		s->top_k = json_integer_value(v) < 0 ? 0 : (int)json_integer_value(v);
	}
	if (((v = json_object_get(rq, "max_tokens")) && !json_is_null(v)) ||
	    ((v = json_object_get(rq, "max_completion_tokens")) && !json_is_null(v))) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > 1 << 20)
			return *msg = "'max_tokens' must be an integer >= 0", -1;
		*max_tokens = (int)json_integer_value(v);
		if (given)
			*given = 1;
	}
	if ((v = json_object_get(rq, "seed")) && !json_is_null(v)) {
		if (!json_is_integer(v))
			return *msg = "'seed' must be an integer", -1;
		*seed = (uint64_t)json_integer_value(v);
		*seeded = 1;
	}
	if ((v = json_object_get(rq, "n")) && !json_is_null(v)) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 64)
			return *msg = "'n' must be an integer in 1..64", -1;
		*n = (int)json_integer_value(v);
	}
	return 0;
}

/* The text of id as a JSON string (valid UTF-8 whatever the bytes). */
static json_t *piece(const struct fw_tok *t, int32_t id)
{
	size_t n, fn;
	const char *p = fw_tok_piece(t, id, &n);
	char *f = fw_utf8_fix(p ? p : "", p ? n : 0, &fn);
	json_t *j = json_stringn(f ? f : "", f ? fn : 0);

	free(f);
	return j;
}

/* The bytes of id as a JSON array of integers (the API's "bytes"). */
static json_t *piece_bytes(const struct fw_tok *t, int32_t id)
{
	size_t n;
	const unsigned char *p = (const unsigned char *)fw_tok_piece(t, id, &n);
	json_t *a = json_array();

	for (size_t i = 0; p && i < n; i++)
		json_array_append_new(a, json_integer(p[i]));
	return a;
}

/* s[0..n) as a JSON string, bytes that are not UTF-8 replaced. */
static json_t *text_json(const char *s, size_t n)
{
	size_t fn;
	char *f = fw_utf8_fix(s ? s : "", s ? n : 0, &fn);
	json_t *j = json_stringn(f ? f : "", f ? fn : 0);

	free(f);
	return j;
}

/*
 * Checks that a prompt of P tokens and the completion asked for fit the
 * model's context (max_position_embeddings, W), as vLLM does: a prompt that
 * leaves no room (P > W, or P = W with tokens to generate) and a max_tokens
 * beyond W - P are refused with HTTP 400 and vLLM's words; a request that
 * names no max_tokens gets 16, or W - P when less.  The count to decode is
 * written back into rq.  Returns 0, or -1 with the refusal queued and its
 * result in *queued.
 */
static int fit(struct MHD_Connection *con, struct arm *a, json_t *rq, size_t P,
	       enum MHD_Result *queued)
{
	struct fw_sampler s;
	int M, n, given, seeded;
	uint64_t seed;
	const char *msg;
	long W = a->b->m->cfg.max_pos;
	char buf[512];

	if (sampling(rq, &s, &M, &seed, &n, &given, &seeded, &msg))
		return 0; /* the caller reports it */
	if ((long)P > W || ((long)P == W && M > 0)) {
		snprintf(buf, sizeof buf,
			 "This model's maximum context length is %ld tokens. However, your request "
			 "has %zu input tokens. Please reduce the length of the input messages.",
			 W, P);
		*queued = refuse(con, buf);
		return -1;
	}
	if ((long)P + M > W) {
		if (given) {
			snprintf(buf, sizeof buf,
				 "'max_tokens' or 'max_completion_tokens' is too large: %d. This "
				 "model's maximum context length is %ld tokens and your request has "
				 "%zu input tokens (%d > %ld - %zu).",
				 M, W, P, M, W, P);
			*queued = refuse(con, buf);
			return -1;
		}
		M = (int)(W - (long)P);
	}
	json_object_del(rq, "max_completion_tokens");
	json_object_set_new(rq, "max_tokens", json_integer(M));
	return 0;
}

/* The text of a message's content: a string, null, or an array of parts
 * of which only {"type": "text"} ones are read.  Returns a buffer (free)
 * with *len, or NULL with msg (buf) saying why. */
static char *content_text(json_t *content, size_t *len, char *buf, size_t blen)
{
	struct fw_buf b = { 0 };
	json_t *p;
	size_t i;

	if (json_is_string(content) || json_is_null(content) || !content) {
		const char *s = json_is_string(content) ? json_string_value(content) : "";
		size_t n = json_is_string(content) ? json_string_length(content) : 0;
		if (fw_buf_append(&b, s, n) || fw_buf_append(&b, "", 1))
			goto oom;
		*len = n;
		return (char *)b.p;
	}
	if (!json_is_array(content)) {
		snprintf(buf, blen, "a message's 'content' must be a string or an array of parts");
		return NULL;
	}
	json_array_foreach(content, i, p) {
		const char *type = json_string_value(json_object_get(p, "type"));
		json_t *t = json_object_get(p, "text");
		if (!type || strcmp(type, "text") || !json_is_string(t)) {
			snprintf(buf, blen, "content parts of type '%s' are not supported (only "
				 "'text')", type ? type : "(none)");
			fw_buf_free(&b);
			return NULL;
		}
		if (fw_buf_append(&b, json_string_value(t), json_string_length(t)))
			goto oom;
	}
	if (fw_buf_append(&b, "", 1))
		goto oom;
	*len = b.n - 1;
	return (char *)b.p;
oom:
	fw_buf_free(&b);
	snprintf(buf, blen, "out of memory");
	return NULL;
}

/* What a chat request asks of tools: FW_TOOLS_NONE (no tools, or
 * tool_choice "none"), _AUTO, _REQUIRED or _NAMED (*name). */
enum { TOOLS_NONE, TOOLS_AUTO, TOOLS_REQUIRED, TOOLS_NAMED };

static int tool_mode(json_t *rq, const char **name, const char **msg)
{
	json_t *tools = json_object_get(rq, "tools"), *tc = json_object_get(rq, "tool_choice"), *t;
	size_t i;

	*name = NULL;
	if (!tools || json_is_null(tools)) {
		if (tc && !json_is_null(tc) &&
		    !(json_is_string(tc) && !strcmp(json_string_value(tc), "none")))
			return *msg = "'tool_choice' needs 'tools'", -1;
		return TOOLS_NONE;
	}
	if (!json_is_array(tools))
		return *msg = "'tools' must be an array", -1;
	json_array_foreach(tools, i, t) {
		const char *type = json_string_value(json_object_get(t, "type"));
		json_t *f = json_object_get(t, "function");
		if (!type || strcmp(type, "function") || !json_is_object(f) ||
		    !json_is_string(json_object_get(f, "name")))
			return *msg = "each of 'tools' must be {\"type\": \"function\", "
				      "\"function\": {\"name\", ...}}", -1;
	}
	if (!json_array_size(tools))
		return TOOLS_NONE;
	if (!tc || json_is_null(tc))
		return TOOLS_AUTO;
	if (json_is_string(tc)) {
		const char *s = json_string_value(tc);
		if (!strcmp(s, "none"))
			return TOOLS_NONE;
		if (!strcmp(s, "auto"))
			return TOOLS_AUTO;
		if (!strcmp(s, "required"))
			return TOOLS_REQUIRED;
		return *msg = "'tool_choice' must be \"none\", \"auto\", \"required\" or a "
			      "function", -1;
	}
	*name = json_string_value(json_object_get(json_object_get(tc, "function"), "name"));
	if (!*name)
		return *msg = "'tool_choice' must be \"none\", \"auto\", \"required\" or "
			      "{\"type\": \"function\", \"function\": {\"name\"}}", -1;
	json_array_foreach(tools, i, t)
		if (!strcmp(json_string_value(json_object_get(json_object_get(t, "function"),
							      "name")), *name))
			return TOOLS_NAMED;
	return *msg = "'tool_choice' names a function that is not in 'tools'", -1;
}

/*
 * The prompt of a request as token ids: the rendered chat of "messages"
 * (chat; with its tools when mode is not TOOLS_NONE, and the start of a
 * call, *prefix, for a required or named one), or "prompt" as ids or text
 * (a BOS first when the tokenizer has one and special is set).  Returns 0,
 * or -1 with the error queued and its result in *queued.
 */
static int prompt_ids(struct MHD_Connection *con, struct arm *a, json_t *rq, int chat,
		      int special, int mode, const char *tool, char **prefix,
		      struct fw_tok_ids *ids, enum MHD_Result *queued)
{
	char err[512];

	if (prefix)
		*prefix = NULL;
	if (chat) {
		json_t *msgs = json_object_get(rq, "messages"), *m;
		size_t i, nm = json_array_size(msgs);
		struct fw_chat_turn *t = calloc(nm ? nm : 1, sizeof *t);
		char **texts = calloc(nm ? nm : 1, sizeof *texts);
		struct fw_chat_call **calls = calloc(nm ? nm : 1, sizeof *calls);
		int tmpl = a->tmpl, rc = -1;
		const char *msg = NULL;
		if (!json_is_array(msgs) || nm == 0 || !t || !texts || !calls) {
			msg = "'messages' must be a non-empty array";
			goto chat_out;
		}
		if (tmpl < 0) {
			msg = "the model's tokenizer has no chat template";
			goto chat_out;
		}
		json_array_foreach(msgs, i, m) {
			json_t *tc = json_object_get(m, "tool_calls"), *c;
			size_t j;
			t[i].role = json_string_value(json_object_get(m, "role"));
			if (!t[i].role) {
				msg = "a message has no 'role'";
				goto chat_out;
			}
			if (!strcmp(t[i].role, "developer"))
				t[i].role = "system";
			if (!(texts[i] = content_text(json_object_get(m, "content"), &t[i].len, err,
						      sizeof err))) {
				msg = err;
				goto chat_out;
			}
			t[i].text = texts[i];
			if (json_array_size(tc)) {
				if (!(calls[i] = calloc(json_array_size(tc), sizeof **calls))) {
					msg = "out of memory";
					goto chat_out;
				}
				json_array_foreach(tc, j, c) {
					json_t *f = json_object_get(c, "function");
					calls[i][j].name = json_string_value(json_object_get(f, "name"));
					calls[i][j].args =
						json_string_value(json_object_get(f, "arguments"));
					if (!calls[i][j].name) {
						msg = "a tool call has no 'function.name'";
						goto chat_out;
					}
				}
				t[i].calls = calls[i];
				t[i].ncalls = json_array_size(tc);
			}
		}
		if (mode == TOOLS_NONE) {
			rc = fw_chat_render(a->b->t, (enum fw_chat_template)tmpl, t, nm, 1, ids, err,
					    sizeof err);
		} else {
			char *tj = json_dumps(json_object_get(rq, "tools"), JSON_COMPACT);
			rc = tj ? fw_tools_render(a->b->t, (enum fw_chat_template)tmpl, tj,
						  strlen(tj), t, nm, ids, err, sizeof err)
				: -1;
			free(tj);
			if (!rc && mode != TOOLS_AUTO) {
				*prefix = fw_toolcall_prefix((enum fw_chat_template)tmpl,
							     mode == TOOLS_NAMED ? tool : NULL);
				if (!*prefix || fw_tok_encode(a->b->t, *prefix, strlen(*prefix), 0,
							      0, ids))
					rc = -1;
			}
		}
		if (rc)
			msg = err;
chat_out:
		for (i = 0; i < nm; i++) {
			if (texts)
				free(texts[i]);
			if (calls)
				free(calls[i]);
		}
		free(texts);
		free(calls);
		free(t);
		if (msg) {
			*queued = refuse_param(con, msg, "messages");
			if (prefix) {
				free(*prefix);
				*prefix = NULL;
			}
			return -1;
		}
		return 0;
	}
	json_t *p = json_object_get(rq, "prompt"), *x;
	int32_t bos = special ? fw_tok_bos(a->b->t) : -1;
	size_t i;
	/* token ids, the API's other form of a prompt: used as they are */
	if (json_is_array(p) && json_array_size(p) > 0) {
		json_array_foreach(p, i, x) {
			json_int_t id = json_integer_value(x);
			if (!json_is_integer(x) || id < 0 || id >= a->b->m->cfg.vocab) {
				*queued = refuse_param(con, "'prompt' ids must be integers below "
							    "the vocabulary size", "prompt");
				return -1;
			}
			if (fw_tok_ids_push(ids, (int32_t)id, 0))
				goto oom;
		}
	} else if (!json_is_string(p)) {
		*queued = refuse_param(con, "'prompt' must be a string or an array of token ids",
				       "prompt");
		return -1;
	}
	if (json_is_string(p) &&
	    ((bos >= 0 && fw_tok_ids_push(ids, bos, 0)) ||
	     fw_tok_encode(a->b->t, json_string_value(p), json_string_length(p), 0, 0, ids)))
		goto oom;
	return 0;
oom:
	*queued = fail(con, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", "out of memory");
	return -1;
}

/* What a completion request wants back, besides the job. */
struct want {
	int chat, stream, usage, echo, lp, prompt_lp;
	int tools;            /* TOOLS_* */
	int single_call;      /* parallel_tool_calls: false */
	char *prefix;         /* the start of a tool call put after the prompt */
	char id[40];
	long created;
};

/* Builds the job of a request from its fields.  Returns it, or NULL with
 * msg (buf) and *field set. */
static struct job *make_job(struct arm *a, json_t *rq, const struct want *w,
			    struct fw_tok_ids *ids, const char **field, char *buf, size_t blen)
{
	struct job *j = calloc(1, sizeof *j);
	uint64_t seed;
	int seeded;
	const char *msg;
	json_t *v, *x;
	size_t i;

	if (!j)
		goto oom;
	pthread_cond_init(&j->cv, NULL);
	j->stream = w->stream;
	if (sampling(rq, &j->s, &j->max_tokens, &seed, &j->n, NULL, &seeded, &msg)) {
		snprintf(buf, blen, "%s", msg);
		goto bad;
	}
	if (j->n > a->S) {
		snprintf(buf, blen, "'n' is %d; this server decodes %d sequences at most", j->n,
			 a->S);
		*field = "n";
		goto bad;
	}
	v = json_object_get(rq, w->chat ? "top_logprobs" : "logprobs");
	if (v && !json_is_null(v) && !(w->chat ? 0 : json_is_boolean(v))) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > MAX_TOP) {
			snprintf(buf, blen, "'%s' must be an integer in 0..%d",
				 w->chat ? "top_logprobs" : "logprobs", MAX_TOP);
			*field = w->chat ? "top_logprobs" : "logprobs";
			goto bad;
		}
		j->ntop = (int)json_integer_value(v);
		if (w->chat && j->ntop && !w->lp) {
			snprintf(buf, blen, "'top_logprobs' needs 'logprobs': true");
			*field = "top_logprobs";
			goto bad;
		}
	}
	v = json_object_get(rq, "stop");
	if (json_is_string(v) || json_is_array(v)) {
		size_t nv = json_is_string(v) ? 1 : json_array_size(v);
		for (i = 0; i < nv; i++) {
			x = json_is_string(v) ? v : json_array_get(v, i);
			if (!json_is_string(x) || !json_string_length(x) || i >= MAX_STOPS) {
				snprintf(buf, blen, "'stop' must be a string or up to %d non-empty "
					 "strings", MAX_STOPS);
				*field = "stop";
				goto bad;
			}
			j->stoplen[j->nstops] = json_string_length(x);
			if (!(j->stops[j->nstops++] = strdup(json_string_value(x))))
				goto oom;
		}
	} else if (v && !json_is_null(v)) {
		snprintf(buf, blen, "'stop' must be a string or an array of strings");
		*field = "stop";
		goto bad;
	}
	v = json_object_get(rq, "ignore_eos");
	if (v && !json_is_null(v) && !json_is_boolean(v)) {
		snprintf(buf, blen, "'ignore_eos' must be a boolean");
		*field = "ignore_eos";
		goto bad;
	}
	j->ignore_eos = json_is_true(v);
	v = json_object_get(rq, "stop_token_ids");
	if (json_is_array(v) && json_array_size(v)) {
		if (!(j->stop_ids = malloc(sizeof(int32_t) * json_array_size(v))))
			goto oom;
		json_array_foreach(v, i, x) {
			if (!json_is_integer(x) || json_integer_value(x) < 0 ||
			    json_integer_value(x) >= a->b->m->cfg.vocab) {
				snprintf(buf, blen, "'stop_token_ids' must be ids below the "
					 "vocabulary size");
				*field = "stop_token_ids";
				goto bad;
			}
			j->stop_ids[j->nstop_ids++] = (int32_t)json_integer_value(x);
		}
	} else if (v && !json_is_null(v) && !json_is_array(v)) {
		snprintf(buf, blen, "'stop_token_ids' must be an array of ids");
		*field = "stop_token_ids";
		goto bad;
	}
	if (w->tools != TOOLS_NONE) {
		j->hold = fw_toolcall_marker((enum fw_chat_template)a->tmpl);
		j->hold_json = !j->hold;
	}
	if (!(j->ch = calloc((size_t)j->n, sizeof *j->ch)) ||
	    !(j->rng = calloc((size_t)j->n, sizeof *j->rng)))
		goto oom;
	if (!seeded)
		seed = fresh();
	/* choice k draws from seed k of the request: the first from the
	 * seed itself, so that a client that derives per-sample seeds gets
	 * exactly its stream */
	for (int k = 0; k < j->n; k++) {
		uint64_t sk = k == 0 ? seed : fw_rollout_seed(seed, "", 0, k);
		j->rng[k] = sk ? sk : 1;
	}
	int cap = j->max_tokens > 0 ? j->max_tokens : 1;
	for (int k = 0; k < j->n; k++) {
		struct choice *c = &j->ch[k];
		c->cap = cap;
		if (!(c->tok = malloc(sizeof(int32_t) * (size_t)cap)) ||
		    !(c->lp = malloc(sizeof(float) * (size_t)cap)) ||
		    !(c->tend = malloc(sizeof(size_t) * (size_t)cap)) ||
		    (j->ntop && (!(c->top_id = malloc(sizeof(int32_t) * (size_t)cap * j->ntop)) ||
				 !(c->top_lp = malloc(sizeof(float) * (size_t)cap * j->ntop)))))
			goto oom;
		if (w->prefix && fw_buf_append(&c->text, w->prefix, strlen(w->prefix)))
			goto oom;
		c->len = c->text.n;
	}
	j->ids = ids->ids;
	j->nids = ids->n;
	memset(ids, 0, sizeof *ids);
	return j;
oom:
	snprintf(buf, blen, "out of memory");
	*field = NULL;
bad:
	if (j)
		job_free(j);
	return NULL;
}

/* The end of the tokens of choice c, from index from on, that an answer
 * lists (log-probs, text offsets): those whose bytes lie within the first
 * upto bytes, the end token left out. */
static int listed(const struct choice *c, size_t upto, int from)
{
	int i = from, n = c->n - c->stop_tok;

	while (i < n && c->tend[i] <= upto)
		i++;
	return i;
}

/* Log-probs of tokens [from, to) of choice c in the shape of the answer:
 * chat: appended to content[] as {token, logprob, bytes, top_logprobs};
 * completions: to lp's tokens, token_logprobs, top_logprobs, text_offset
 * (offsets from base). */
static void add_logprobs(const struct arm *a, const struct job *j, const struct choice *c,
			 int from, int to, int chat, json_t *lp, size_t base)
{
	const struct fw_tok *t = a->b->t;

	for (int i = from; i < to; i++) {
		json_t *top = chat ? json_array() : j->ntop ? json_object() : NULL;
		for (int r = 0; r < j->ntop; r++) {
			int32_t id = c->top_id[(size_t)i * j->ntop + r];
			double l = c->top_lp[(size_t)i * j->ntop + r];
			if (chat) {
				json_array_append_new(top, json_pack("{s:o,s:f,s:o}", "token",
					piece(t, id), "logprob", l, "bytes", piece_bytes(t, id)));
			} else {
				json_t *k = piece(t, id);
				/* two ids may spell the same text: the likelier stays */
				if (!json_object_get(top, json_string_value(k)))
					json_object_set_new(top, json_string_value(k), json_real(l));
				json_decref(k);
			}
		}
		if (chat) {
			json_array_append_new(json_object_get(lp, "content"),
				json_pack("{s:o,s:f,s:o,s:o}", "token", piece(t, c->tok[i]),
					  "logprob", (double)c->lp[i], "bytes",
					  piece_bytes(t, c->tok[i]), "top_logprobs", top));
		} else {
			json_array_append_new(json_object_get(lp, "tokens"), piece(t, c->tok[i]));
			json_array_append_new(json_object_get(lp, "token_logprobs"),
					      json_real(c->lp[i]));
			json_array_append_new(json_object_get(lp, "top_logprobs"),
					      top ? top : json_null());
			json_array_append_new(json_object_get(lp, "text_offset"),
				json_integer((json_int_t)(base + (i ? c->tend[i - 1] : 0))));
		}
	}
}

static json_t *new_logprobs(int chat)
{
	return chat ? json_pack("{s:[]}", "content")
		    : json_pack("{s:[],s:[],s:[],s:[]}", "tokens", "token_logprobs",
				"top_logprobs", "text_offset");
}

/* The tool calls of a finished choice as the API's tool_calls[] (index
 * fields when stream), or NULL when it made none; *content_len gets the
 * bytes of text before them. */
static json_t *tool_calls(const struct arm *a, const struct want *w, const struct choice *c,
			  size_t *content_len, int stream)
{
	struct fw_toolcalls tc = { 0 };
	json_t *arr;

	*content_len = c->len;
	if (w->tools == TOOLS_NONE ||
	    fw_toolcall_parse((enum fw_chat_template)a->tmpl, (const char *)c->text.p, c->len,
			      &tc) <= 0) {
		fw_toolcalls_clear(&tc);
		return NULL;
	}
	arr = json_array();
	for (size_t i = 0; i < tc.n && !(w->single_call && i); i++) {
		char id[32];
		snprintf(id, sizeof id, "call_%016llx", (unsigned long long)fresh());
		json_t *call = json_pack("{s:s,s:s,s:{s:s,s:s}}", "id", id, "type", "function",
					 "function", "name", tc.v[i].name, "arguments",
					 tc.v[i].args);
		if (stream)
			json_object_set_new(call, "index", json_integer((json_int_t)i));
		json_array_append_new(arr, call);
	}
	*content_len = tc.content_len;
	fw_toolcalls_clear(&tc);
	return arr;
}

static json_t *usage_json(const struct job *j)
{
	int ct = 0;

	for (int k = 0; k < j->n; k++)
		ct += j->ch[k].n;
	return json_pack("{s:i,s:i,s:i}", "prompt_tokens", (int)j->nids, "completion_tokens", ct,
			 "total_tokens", (int)j->nids + ct);
}

/* The answer to a finished job that is not streamed. */
static json_t *answer(const struct arm *a, const struct job *j, const struct want *w)
{
	json_t *choices = json_array();

	for (int k = 0; k < j->n; k++) {
		const struct choice *c = &j->ch[k];
		size_t clen;
		json_t *calls = tool_calls(a, w, c, &clen, 0);
		json_t *lp = json_null(), *ids = json_array(), *all = json_array();
		if (w->lp) {
			lp = new_logprobs(w->chat);
			add_logprobs(a, j, c, 0, listed(c, clen, 0), w->chat, lp, 0);
		}
		for (int i = 0; i < c->n; i++) {
			json_array_append_new(ids, json_integer(c->tok[i]));
			json_array_append_new(all, json_real(c->lp[i]));
		}
		const char *fin = calls ? "tool_calls" : c->finish;
		json_t *ch;
		if (w->chat) {
			json_t *m = json_pack("{s:s,s:o}", "role", "assistant", "content",
					      calls && !clen ? json_null()
							     : text_json((const char *)c->text.p,
									 clen));
			if (calls)
				json_object_set_new(m, "tool_calls", calls);
			ch = json_pack("{s:i,s:o,s:o,s:s}", "index", k, "message", m, "logprobs", lp,
				       "finish_reason", fin);
		} else {
			ch = json_pack("{s:i,s:o,s:o,s:s}", "index", k, "text",
				       text_json((const char *)c->text.p, clen), "logprobs", lp,
				       "finish_reason", fin);
		}
		/* token_ids and token_logprobs_all carry every id drawn, end
		 * token included, for clients that train on them */
		json_object_set_new(ch, "token_ids", ids);
		json_object_set_new(ch, "token_logprobs_all", all);
		json_array_append_new(choices, ch);
	}
	return json_pack("{s:s,s:s,s:I,s:s,s:o,s:o}", "id", w->id, "object",
			 w->chat ? "chat.completion" : "text_completion", "created",
			 (json_int_t)w->created, "model", a->name, "choices", choices, "usage",
			 usage_json(j));
}

/* The answer to echo with max_tokens 0: the prompt scored. */
static json_t *score_answer(const struct arm *a, const struct job *j, const struct want *w)
{
	json_t *toks = json_array(), *lps = json_array(), *all = json_array(), *off = json_array();
	json_t *plp = w->prompt_lp ? json_array() : NULL, *choices = json_array();
	struct fw_buf txt = { 0 };

	for (size_t i = 0; i < j->nids; i++) {
		size_t pn;
		const char *pc = fw_tok_piece(a->b->t, j->ids[i], &pn);
		json_array_append_new(off, json_integer((json_int_t)txt.n));
		if (pc && !fw_tok_is_special(a->b->t, j->ids[i]))
			fw_buf_append(&txt, pc, pn);
		json_array_append_new(toks, piece(a->b->t, j->ids[i]));
		json_array_append_new(lps, i ? json_real(j->plp[i]) : json_null());
		json_array_append_new(all, json_integer(j->ids[i]));
		if (plp) {
			char key[16];
			snprintf(key, sizeof key, "%d", (int)j->ids[i]);
			json_array_append_new(plp, i ? json_pack("{s:{s:f,s:o}}", key, "logprob",
					(double)j->plp[i], "decoded_token", piece(a->b->t, j->ids[i]))
						     : json_null());
		}
	}
	for (int k = 0; k < j->n; k++) {
		json_t *ch = json_pack("{s:i,s:o,s:{s:O,s:O,s:n,s:O},s:s,s:O}", "index", k, "text",
			text_json((const char *)txt.p, txt.n), "logprobs", "tokens", toks,
			"token_logprobs", lps, "top_logprobs", "text_offset", off, "finish_reason",
			"length", "token_ids", all);
		if (plp)
			json_object_set(ch, "prompt_logprobs", plp);
		json_array_append_new(choices, ch);
	}
	fw_buf_free(&txt);
	json_decref(toks);
	json_decref(lps);
	json_decref(all);
	json_decref(off);
	json_decref(plp);
	return json_pack("{s:s,s:s,s:I,s:s,s:o,s:{s:i,s:i,s:i}}", "id", w->id, "object",
			 "text_completion", "created", (json_int_t)w->created, "model", a->name,
			 "choices", choices, "usage", "prompt_tokens", (int)j->nids,
			 "completion_tokens", 0, "total_tokens", (int)j->nids);
}

/* ---- streaming ----------------------------------------------------------- */

struct stream {
	struct arm *a;
	struct job *j;
	struct want w;
	size_t *sent;     /* (n) bytes of text sent */
	int *sent_tok;    /* (n) tokens whose log-probs went */
	int *over;        /* (n) the choice's last chunk went */
	int started, ended;
	struct fw_buf out;
	size_t off;
};

/* The longest k < L such that text ends with the first k bytes of s. */
static size_t partial(const char *text, size_t n, const char *s, size_t L)
{
	for (size_t k = L - 1 < n ? L - 1 : n; k > 0; k--)
		if (!memcmp(text + n - k, s, k))
			return k;
	return 0;
}

/* Bytes of a live choice's text that can go out: none that a stop string
 * or a tool call may still claim, and no half of a UTF-8 character. */
static size_t safe_len(const struct job *j, const struct choice *c)
{
	const char *t = (const char *)c->text.p;
	size_t n = c->len, safe = n, k;

	if (c->done)
		return n;
	for (int i = 0; i < j->nstops; i++)
		if ((k = partial(t, n, j->stops[i], j->stoplen[i])) && n - k < safe)
			safe = n - k;
	if (j->hold) {
		size_t L = strlen(j->hold);
		const char *h = n ? memmem(t, n, j->hold, L) : NULL;
		if (h && (size_t)(h - t) < safe)
			safe = (size_t)(h - t);
		else if ((k = partial(t, n, j->hold, L)) && n - k < safe)
			safe = n - k;
	}
	if (j->hold_json) {
		size_t i = 0;
		while (i < n && (t[i] == ' ' || t[i] == '\n' || t[i] == '\t' || t[i] == '\r'))
			i++;
		if (i == n || t[i] == '{')
			safe = 0;
	}
	/* back to the start of a character that is not whole */
	for (size_t b = safe, back = 0; b > 0 && back < 4; back++) {
		unsigned char ch = (unsigned char)t[--b];
		if ((ch & 0xc0) == 0x80)
			continue;
		size_t need = ch < 0x80 ? 1 : (ch & 0xe0) == 0xc0 ? 2 : (ch & 0xf0) == 0xe0 ? 3 : 4;
		if (b + need > safe)
			safe = b;
		break;
	}
	return safe;
}

static void emit(struct stream *st, json_t *chunk)
{
	char *s = json_dumps(chunk, JSON_COMPACT);

	json_decref(chunk);
	if (s) {
		fw_buf_append(&st->out, "data: ", 6);
		fw_buf_append(&st->out, s, strlen(s));
		fw_buf_append(&st->out, "\n\n", 2);
		free(s);
	}
}

static json_t *chunk_of(struct stream *st, json_t *choices)
{
	json_t *c = json_pack("{s:s,s:s,s:I,s:s,s:o}", "id", st->w.id, "object",
			      st->w.chat ? "chat.completion.chunk" : "text_completion", "created",
			      (json_int_t)st->w.created, "model", st->a->name, "choices", choices);

	if (st->w.usage)
		json_object_set_new(c, "usage", json_null());
	return c;
}

/* Writes (under the arm's lock) the chunks of what the job has that has
 * not gone yet.  Returns 1 when it wrote something or the stream is over. */
static int produce(struct stream *st)
{
	struct job *j = st->j;
	struct arm *a = st->a;
	size_t before = st->out.n;

	if (st->w.chat && !st->started) {
		json_t *chs = json_array();
		for (int k = 0; k < j->n; k++)
			json_array_append_new(chs, json_pack("{s:i,s:{s:s,s:s},s:n,s:n}", "index", k,
				"delta", "role", "assistant", "content", "", "logprobs",
				"finish_reason"));
		emit(st, chunk_of(st, chs));
	}
	st->started = 1;
	if (j->failed && j->finished) {
		emit(st, json_pack("{s:{s:s,s:s}}", "error", "message", j->err[0] ? j->err :
				   "the request was not decoded", "type", "server_error"));
		fw_buf_append(&st->out, "data: [DONE]\n\n", 14);
		st->ended = 1;
		return 1;
	}
	for (int k = 0; k < j->n; k++) {
		struct choice *c = &j->ch[k];
		if (st->over[k])
			continue;
		size_t upto = safe_len(j, c);
		json_t *calls = NULL;
		if (c->done)
			calls = tool_calls(a, &st->w, c, &upto, 1);
		int to = listed(c, upto, st->sent_tok[k]);
		if (upto <= st->sent[k] && to == st->sent_tok[k] && !c->done)
			continue;
		json_t *lp = json_null();
		if (st->w.lp && to > st->sent_tok[k]) {
			lp = new_logprobs(st->w.chat);
			add_logprobs(a, j, c, st->sent_tok[k], to, st->w.chat, lp, 0);
		}
		json_t *txt = text_json((const char *)c->text.p + st->sent[k],
					upto > st->sent[k] ? upto - st->sent[k] : 0);
		json_t *ch;
		if (st->w.chat) {
			json_t *d = json_object();
			if (json_string_length(txt) || !calls)
				json_object_set(d, "content", txt);
			if (calls)
				json_object_set_new(d, "tool_calls", calls);
			ch = json_pack("{s:i,s:o,s:o}", "index", k, "delta", d, "logprobs", lp);
		} else {
			ch = json_pack("{s:i,s:O,s:o}", "index", k, "text", txt, "logprobs", lp);
		}
		json_decref(txt);
		json_object_set_new(ch, "finish_reason",
				    c->done ? json_string(calls ? "tool_calls" : c->finish)
					    : json_null());
		if (c->done) {
			json_object_set_new(ch, "token_ids", json_array());
			for (int i = 0; i < c->n; i++)
				json_array_append_new(json_object_get(ch, "token_ids"),
						      json_integer(c->tok[i]));
			st->over[k] = 1;
		}
		if (upto > st->sent[k])
			st->sent[k] = upto;
		st->sent_tok[k] = to;
		emit(st, chunk_of(st, json_pack("[o]", ch)));
	}
	if (j->finished) {
		if (st->w.usage)
			emit(st, json_pack("{s:s,s:s,s:I,s:s,s:[],s:o}", "id", st->w.id, "object",
					   st->w.chat ? "chat.completion.chunk" : "text_completion",
					   "created", (json_int_t)st->w.created, "model", a->name,
					   "choices", "usage", usage_json(j)));
		fw_buf_append(&st->out, "data: [DONE]\n\n", 14);
		st->ended = 1;
	}
	return st->out.n > before || st->ended;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct stream *st = cls;

	(void)pos;
	if (st->off == st->out.n) {
		if (st->ended)
			return MHD_CONTENT_READER_END_OF_STREAM;
		st->out.n = st->off = 0;
		pthread_mutex_lock(&st->a->mu);
		while (!produce(st))
			pthread_cond_wait(&st->j->cv, &st->a->mu);
		pthread_mutex_unlock(&st->a->mu);
	}
	size_t n = st->out.n - st->off < max ? st->out.n - st->off : max;
	memcpy(buf, st->out.p + st->off, n);
	st->off += n;
	return (ssize_t)n;
}

/* The connection is done with the stream (finished, or the client went):
 * a job still decoding is cancelled. */
static void stream_free(void *cls)
{
	struct stream *st = cls;

	pthread_mutex_lock(&st->a->mu);
	st->j->cancelled = 1;
	pthread_mutex_unlock(&st->a->mu);
	job_drop(st->a, st->j, 0);
	free(st->w.prefix);
	free(st->sent);
	free(st->sent_tok);
	free(st->over);
	fw_buf_free(&st->out);
	free(st);
}

static enum MHD_Result stream_reply(struct MHD_Connection *con, struct arm *a, struct job *j,
				    const struct want *w)
{
	struct stream *st = calloc(1, sizeof *st);
	struct MHD_Response *r;
	enum MHD_Result rc;

	if (!st || !(st->sent = calloc((size_t)j->n, sizeof *st->sent)) ||
	    !(st->sent_tok = calloc((size_t)j->n, sizeof *st->sent_tok)) ||
	    !(st->over = calloc((size_t)j->n, sizeof *st->over))) {
		if (st) {
			free(st->sent);
			free(st->sent_tok);
		}
		free(st);
		return MHD_NO;
	}
	st->a = a;
	st->j = j;
	st->w = *w;
	for (int k = 0; k < j->n; k++)
		st->sent[k] = 0;
	r = mhd.create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, st,
					      stream_free);
	if (!r) {
		stream_free(st);
		return MHD_NO;
	}
	mhd.add_response_header(r, "Content-Type", "text/event-stream");
	mhd.add_response_header(r, "Cache-Control", "no-cache");
	count_code(MHD_HTTP_OK);
	rc = mhd.queue_response(con, MHD_HTTP_OK, r);
	mhd.destroy_response(r);
	return rc;
}

/* ---- endpoints ----------------------------------------------------------- */

static enum MHD_Result completions(struct MHD_Connection *con, json_t *rq, int chat)
{
	struct arm *a = find_arm(rq);
	struct fw_tok_ids ids = { 0 };
	struct want w = { 0 };
	enum MHD_Result q;
	const char *field = NULL, *msg = NULL, *tool = NULL;
	char buf[512];
	json_t *v;

	if (unsupported(rq, chat, &field, buf, sizeof buf))
		return refuse_param(con, buf, field);
	if (!a)
		return fail(con, MHD_HTTP_NOT_FOUND, "invalid_request_error", "no such model");
	w.chat = chat;
	v = json_object_get(rq, "stream");
	if (v && !json_is_null(v) && !json_is_boolean(v))
		return refuse_param(con, "'stream' must be a boolean", "stream");
	w.stream = json_is_true(v);
	v = json_object_get(rq, "stream_options");
	if (v && !json_is_null(v)) {
		const char *k;
		json_t *x;
		if (!json_is_object(v))
			return refuse_param(con, "'stream_options' must be an object",
					    "stream_options");
		json_object_foreach(v, k, x)
			if (strcmp(k, "include_usage")) {
				snprintf(buf, sizeof buf, "'stream_options.%s' is not supported", k);
				return refuse_param(con, buf, "stream_options");
			}
		if (!w.stream)
			return refuse_param(con, "'stream_options' needs 'stream': true",
					    "stream_options");
		w.usage = json_is_true(json_object_get(v, "include_usage"));
	}
	v = json_object_get(rq, "logprobs");
	w.lp = chat ? json_is_true(v) : json_is_integer(v) || json_is_true(v);
	w.echo = !chat && json_is_true(json_object_get(rq, "echo"));
	v = json_object_get(rq, "prompt_logprobs");
	w.prompt_lp = v && !json_is_null(v);
	if (chat) {
		if ((w.tools = tool_mode(rq, &tool, &msg)) < 0)
			return refuse_param(con, msg, "tools");
		w.single_call = json_is_false(json_object_get(rq, "parallel_tool_calls"));
	}
	if (prompt_ids(con, a, rq, chat, 1, w.tools, tool, &w.prefix, &ids, &q)) {
		fw_tok_ids_release(&ids);
		return q;
	}
	if (!chat && ids.n == 0 && fw_tok_ids_push(&ids, a->b->stop[0] >= 0 ? a->b->stop[0] : 0, 0)) {
		fw_tok_ids_release(&ids);
		free(w.prefix);
		return fail(con, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", "out of memory");
	}
	if (fit(con, a, rq, ids.n, &q) < 0) {
		fw_tok_ids_release(&ids);
		free(w.prefix);
		return q;
	}
	struct job *j = make_job(a, rq, &w, &ids, &field, buf, sizeof buf);
	fw_tok_ids_release(&ids);
	if (!j) {
		free(w.prefix);
		return field || strcmp(buf, "out of memory")
			? refuse_param(con, buf, field)
			: fail(con, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", buf);
	}
	if (w.prompt_lp && !(w.echo && j->max_tokens == 0)) {
		job_free(j);
		free(w.prefix);
		return refuse_param(con, "'prompt_logprobs' is served with 'echo': true and "
					 "'max_tokens': 0 only", "prompt_logprobs");
	}
	snprintf(w.id, sizeof w.id, "%s-%016llx", chat ? "chatcmpl" : "cmpl",
		 (unsigned long long)fresh());
	w.created = (long)time(NULL);
	j->score = w.echo && j->max_tokens == 0;
	if (j->max_tokens == 0 && !j->score) {
		/* nothing to decode: every choice is empty */
		for (int k = 0; k < j->n; k++)
			j->ch[k].finish = "length", j->ch[k].done = 1;
		j->finished = 1;
		j->refs = 1;
	} else if (submit(a, j)) {
		job_free(j);
		free(w.prefix);
		return fail(con, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", "out of memory");
	}
	if (w.stream && !j->score)
		return stream_reply(con, a, j, &w);
	wait_done(a, j);
	enum MHD_Result rc;
	if (j->failed)
		rc = fail(con, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", j->err);
	else
		rc = reply(con, MHD_HTTP_OK, j->score ? score_answer(a, j, &w) : answer(a, j, &w));
	job_drop(a, j, 0);
	free(w.prefix);
	return rc;
}

/* POST /tokenize, as vLLM answers it: the ids of "prompt" (a BOS first
 * unless "add_special_tokens" is false) or of the rendered "messages",
 * their count and the model's context. */
static enum MHD_Result tokenize(struct MHD_Connection *con, json_t *rq)
{
	struct arm *a = find_arm(rq);
	struct fw_tok_ids ids = { 0 };
	enum MHD_Result q;
	const char *tool = NULL, *msg = NULL;
	char *prefix = NULL;
	int chat = json_object_get(rq, "messages") != NULL, mode = TOOLS_NONE;
	json_t *t;

	if (!a)
		return fail(con, MHD_HTTP_NOT_FOUND, "invalid_request_error", "no such model");
	if (chat && (mode = tool_mode(rq, &tool, &msg)) < 0)
		return refuse_param(con, msg, "tools");
	if (prompt_ids(con, a, rq, chat, !json_is_false(json_object_get(rq, "add_special_tokens")),
		       mode, tool, &prefix, &ids, &q)) {
		fw_tok_ids_release(&ids);
		return q;
	}
	free(prefix);
	t = json_array();
	for (size_t i = 0; t && i < ids.n; i++)
		json_array_append_new(t, json_integer(ids.ids[i]));
	fw_tok_ids_release(&ids);
	return reply(con, MHD_HTTP_OK, json_pack("{s:i,s:i,s:o}", "count", (int)json_array_size(t),
						 "max_model_len", a->b->m->cfg.max_pos,
						 "tokens", t));
}

static json_t *model_json(const struct arm *a)
{
	return json_pack("{s:s,s:s,s:I,s:s,s:i}", "id", a->name, "object", "model", "created",
			 (json_int_t)0, "owned_by", "flywheel", "max_model_len",
			 a->b->m->cfg.max_pos);
}

/* GET /metrics: Prometheus text exposition format 0.0.4. */
static enum MHD_Result metrics(struct MHD_Connection *con)
{
	struct fw_buf b = { 0 };
	char line[512];
	struct MHD_Response *r;
	enum MHD_Result rc;

#define OUT(...) (snprintf(line, sizeof line, __VA_ARGS__), fw_buf_append(&b, line, strlen(line)))
	OUT("# HELP serve_http_requests_total HTTP requests answered, by status.\n"
	    "# TYPE serve_http_requests_total counter\n");
	pthread_mutex_lock(&stat_mu);
	for (size_t i = 0; i <= sizeof codes / sizeof codes[0]; i++)
		if (i < sizeof codes / sizeof codes[0])
			OUT("serve_http_requests_total{code=\"%u\"} %llu\n", codes[i], by_code[i]);
		else
			OUT("serve_http_requests_total{code=\"other\"} %llu\n", by_code[i]);
	pthread_mutex_unlock(&stat_mu);
	static const char *const help[][3] = {
		{ "serve_requests_total", "counter", "Completions decoded, by model." },
		{ "serve_prompt_tokens_total", "counter", "Prompt tokens of completions." },
		{ "serve_generation_tokens_total", "counter", "Tokens drawn." },
		{ "serve_requests_waiting", "gauge", "Requests queued for a free sequence." },
		{ "serve_requests_running", "gauge", "Requests being decoded." },
		{ "serve_decode_steps_total", "counter", "Batched decoding steps." },
		{ "serve_decode_step_sequences_total", "counter",
		  "Sequences over all decoding steps (divided by the steps: the batch)." },
		{ "serve_prefix_shared_tokens_total", "counter",
		  "Prompt tokens taken from the cache of a request being decoded." },
	};
	for (size_t h = 0; h < sizeof help / sizeof help[0]; h++) {
		OUT("# HELP %s %s\n# TYPE %s %s\n", help[h][0], help[h][2], help[h][0], help[h][1]);
		for (int i = 0; i < narms; i++) {
			struct arm *a = &arms[i];
			unsigned long long v;
			pthread_mutex_lock(&a->mu);
			v = h == 0 ? a->ok : h == 1 ? a->prompt_tokens : h == 2 ? a->gen_tokens
			    : h == 3 ? (unsigned long long)a->nq : h == 4 ? (unsigned long long)a->nrun
			    : h == 5 ? a->steps : h == 6 ? a->step_seqs : a->shared;
			pthread_mutex_unlock(&a->mu);
			OUT("%s{model=\"%s\"} %llu\n", help[h][0], a->name, v);
		}
	}
	OUT("# HELP serve_request_duration_seconds Time from a completion's arrival to its "
	    "last token.\n# TYPE serve_request_duration_seconds histogram\n");
	for (int i = 0; i < narms; i++) {
		struct arm *a = &arms[i];
		unsigned long long cum = 0;
		pthread_mutex_lock(&a->mu);
		for (int k = 0; k <= NBUCKET; k++) {
			cum += a->hist[k];
			if (k < NBUCKET)
				OUT("serve_request_duration_seconds_bucket{model=\"%s\",le=\"%g\"} %llu\n",
				    a->name, buckets[k], cum);
			else
				OUT("serve_request_duration_seconds_bucket{model=\"%s\",le=\"+Inf\"} %llu\n",
				    a->name, cum);
		}
		OUT("serve_request_duration_seconds_sum{model=\"%s\"} %.6f\n", a->name, a->lat_sum);
		OUT("serve_request_duration_seconds_count{model=\"%s\"} %llu\n", a->name, cum);
		pthread_mutex_unlock(&a->mu);
	}
#undef OUT
	r = mhd.create_response_from_buffer(b.n, b.p, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		fw_buf_free(&b);
		return MHD_NO;
	}
	mhd.add_response_header(r, "Content-Type", "text/plain; version=0.0.4");
	count_code(MHD_HTTP_OK);
	rc = mhd.queue_response(con, MHD_HTTP_OK, r);
	mhd.destroy_response(r);
	return rc;
}

/* A request body being received. */
struct req {
	char *p;
	size_t n;
	int too_big;
};

/* 1 when the request carries the server's API key (or none is set). */
static int authorized(struct MHD_Connection *con)
{
	const char *h;
	size_t n;

	if (!api_key)
		return 1;
	h = mhd.lookup_connection_value(con, MHD_HEADER_KIND, "Authorization");
	if (!h || strncasecmp(h, "Bearer ", 7))
		return 0;
	h += 7;
	n = strlen(api_key);
	/* the same time whatever prefix matches */
	unsigned d = strlen(h) != n;
	for (size_t i = 0; i < n; i++)
		d |= (unsigned)(h[i < strlen(h) ? i : 0] ^ api_key[i]);
	return d == 0;
}

static enum MHD_Result unauthorized(struct MHD_Connection *con)
{
	return reply(con, MHD_HTTP_UNAUTHORIZED,
		     json_pack("{s:{s:s,s:s,s:n,s:s}}", "error", "message",
			       "a missing or wrong API key (send Authorization: Bearer KEY)",
			       "type", "invalid_request_error", "param", "code",
			       "invalid_api_key"));
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *con, const char *url,
			       const char *method, const char *version, const char *upload,
			       size_t *upload_size, void **state)
{
	struct req *r = *state;
	int open = !strcmp(url, "/health") || !strcmp(url, "/metrics");

	(void)cls;
	(void)version;
	if (!strcmp(method, "GET")) {
		if (!open && !authorized(con))
			return unauthorized(con);
		if (!strcmp(url, "/health"))
			return reply(con, MHD_HTTP_OK, json_pack("{s:s}", "status", "ok"));
		if (!strcmp(url, "/metrics"))
			return metrics(con);
		if (!strcmp(url, "/v1/models")) {
			json_t *d = json_array();
			for (int i = 0; i < narms; i++)
				json_array_append_new(d, model_json(&arms[i]));
			return reply(con, MHD_HTTP_OK, json_pack("{s:s,s:o}", "object", "list",
								 "data", d));
		}
		if (!strncmp(url, "/v1/models/", 11)) {
			for (int i = 0; i < narms; i++)
				if (!strcmp(url + 11, arms[i].name))
					return reply(con, MHD_HTTP_OK, model_json(&arms[i]));
			return fail(con, MHD_HTTP_NOT_FOUND, "invalid_request_error",
				    "no such model");
		}
		return fail(con, MHD_HTTP_NOT_FOUND, "invalid_request_error", "no such path");
	}
	if (strcmp(method, "POST"))
		return fail(con, MHD_HTTP_METHOD_NOT_ALLOWED, "invalid_request_error",
			    "method not allowed");
	if (!r) {
		if (!(r = calloc(1, sizeof *r)))
			return MHD_NO;
		*state = r;
		return MHD_YES;
	}
	if (*upload_size) {
		if (r->n + *upload_size > max_body) {
			r->too_big = 1;
		} else {
			char *p = realloc(r->p, r->n + *upload_size + 1);
			if (!p)
				return MHD_NO;
			memcpy(p + r->n, upload, *upload_size);
			r->p = p;
			r->n += *upload_size;
		}
		*upload_size = 0;
		return MHD_YES;
	}
	if (!authorized(con))
		return unauthorized(con);
	if (r->too_big)
		return fail(con, MHD_HTTP_CONTENT_TOO_LARGE, "invalid_request_error",
			    "request body too large");
	json_error_t je;
	json_t *rq = json_loadb(r->p ? r->p : "", r->n, 0, &je);
	if (!json_is_object(rq)) {
		json_decref(rq);
		return fail(con, MHD_HTTP_BAD_REQUEST, "invalid_request_error",
			    "the body is not a JSON object");
	}
	enum MHD_Result rc;
	if (!strcmp(url, "/v1/completions"))
		rc = completions(con, rq, 0);
	else if (!strcmp(url, "/v1/chat/completions"))
		rc = completions(con, rq, 1);
	else if (!strcmp(url, "/tokenize"))
		rc = tokenize(con, rq);
	else
		rc = fail(con, MHD_HTTP_NOT_FOUND, "invalid_request_error", "no such path");
	json_decref(rq);
	return rc;
}

static void done(void *cls, struct MHD_Connection *con, void **state,
		 enum MHD_RequestTerminationCode toe)
{
	struct req *r = *state;

	(void)cls;
	(void)con;
	(void)toe;
	if (r) {
		free(r->p);
		free(r);
		*state = NULL;
	}
}

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int usage_error(const char *fmt, const char *arg)
{
	return fw_usage_error(usage_text, fmt, arg);
}

int main(int argc, char **argv)
{
	fw_cli_init("serve");
	fw_usage_init(usage_text, options);
	enum { O_CKPT = 256, O_HOST, O_PORT, O_MAX_BODY, O_API_KEY, O_MAX_SEQS, O_DEVICE, O_VERSION };
	static const struct option longopts[] = {
		{ "ckpt", required_argument, NULL, O_CKPT },
		{ "device", required_argument, NULL, O_DEVICE },
		{ "host", required_argument, NULL, O_HOST },
		{ "port", required_argument, NULL, O_PORT },
		{ "max-body", required_argument, NULL, O_MAX_BODY },
		{ "api-key", required_argument, NULL, O_API_KEY },
		{ "max-seqs", required_argument, NULL, O_MAX_SEQS },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, O_VERSION },
		{ NULL, 0, NULL, 0 },
	};
	const char *host = "127.0.0.1", *device = NULL;
	uint64_t port = 8000, u, seqs = 16;
	int ch;

	arms = calloc((size_t)argc, sizeof *arms);
	if (!arms)
		return FW_EXIT_DATA;
	while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (ch) {
		case O_CKPT: {
			char *eq = strchr(optarg, '=');
			if (!eq || eq == optarg || !eq[1])
				return usage_error("bad checkpoint '%s' (want NAME=DIR)", optarg);
			*eq = '\0';
			for (int i = 0; i < narms; i++)
				if (!strcmp(arms[i].name, optarg))
					return usage_error("checkpoint name '%s' given twice", optarg);
			arms[narms].name = optarg;
			arms[narms++].dir = eq + 1;
			break;
		}
		case O_HOST: host = optarg; break;
		case O_DEVICE: device = optarg; break;
		case O_PORT:
			if (fw_parse_u64(optarg, &port, 0) || port > 65535)
				return usage_error("bad port '%s'", optarg);
			break;
		case O_MAX_BODY:
			if (fw_parse_u64(optarg, &u, 1) || u < 1024)
				return usage_error("bad body size '%s'", optarg);
			max_body = (size_t)u;
			break;
		case O_API_KEY:
			if (!*optarg)
				return usage_error("%s", "an empty --api-key");
			api_key = optarg;
			break;
		case O_MAX_SEQS:
			if (fw_parse_u64(optarg, &seqs, 0) || seqs < 1 || seqs > 1024)
				return usage_error("bad sequence count '%s' (1 to 1024)", optarg);
			break;
		case 'h': fw_help(); return fw_close_stdout() ? FW_EXIT_DATA : 0;
		case O_VERSION: fw_print_version(); return fw_close_stdout() ? FW_EXIT_DATA : 0;
		default: fputs(usage_text, stderr); return FW_EXIT_USAGE;
		}
	}
	if (!narms)
		return usage_error("%s", "--ckpt is required");
	if (optind < argc)
		return usage_error("unexpected operand '%s'", argv[optind]);
	struct sockaddr_in sa = { 0 };
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		return usage_error("bad host '%s' (an IPv4 address)", host);
	char err[1024];
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	fresh_base = mix((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^
		     (uint64_t)getpid();
	if (load_mhd())
		return FW_EXIT_DATA;
	if (fw_dev_select(device, err, sizeof err) < 0) {
		fw_warn("%s", err);
		return FW_EXIT_DATA;
	}
	for (int i = 0; i < narms; i++) {
		struct arm *a = &arms[i];
		if (!(a->b = fw_builtin_load(a->dir, err, sizeof err))) {
			fw_warn("%s", err);
			return FW_EXIT_DATA;
		}
		a->tmpl = fw_chat_detect(a->b->t);
		a->S = (int)seqs;
		if (!(a->g = fw_gen_new(a->b->m, a->S, a->b->m->cfg.max_pos, err, sizeof err))) {
			fw_warn("%s: %s", a->dir, err);
			return FW_EXIT_DATA;
		}
		pthread_mutex_init(&a->mu, NULL);
		pthread_cond_init(&a->work, NULL);
		if (pthread_create(&a->th, NULL, engine, a)) {
			fw_warn("cannot start the decoding thread");
			return FW_EXIT_DATA;
		}
	}
	struct MHD_Daemon *d = mhd.start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG,
		0, NULL, NULL, handler, NULL, MHD_OPTION_SOCK_ADDR, &sa,
		MHD_OPTION_NOTIFY_COMPLETED, done, NULL, MHD_OPTION_CONNECTION_TIMEOUT, 120u,
		MHD_OPTION_END);
	if (!d) {
		fw_warn("cannot listen on %s:%llu", host, (unsigned long long)port);
		return FW_EXIT_DATA;
	}
	const union MHD_DaemonInfo *info = mhd.get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	/* the address on stdout, so that a script that asked for port 0 learns
	 * the one it got */
	printf("http://%s:%u\n", host, info ? info->port : (unsigned)port);
	fflush(stdout);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	while (!stop)
		pause();
	/* the engines end first: a connection that waits on one is woken by
	 * stopping the daemon */
	for (int i = 0; i < narms; i++) {
		pthread_mutex_lock(&arms[i].mu);
		pthread_cond_broadcast(&arms[i].work);
		pthread_mutex_unlock(&arms[i].mu);
		pthread_join(arms[i].th, NULL);
	}
	_exit(fw_close_stdout() ? FW_EXIT_DATA : FW_EXIT_OK);
}
#endif
