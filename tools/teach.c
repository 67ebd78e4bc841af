/*
 * teach — hints for rollouts (environment, rules, demos, a teacher model),
 * and the per-token credit a teacher gives the policy's tokens with the
 * hint in context.  See teach(1).
 *
 * With -j N the records are handed to N worker threads through a ring of
 * 4N slots and written back in input order by the main thread, which also
 * reads; each worker keeps its own teachers (a model is used by one thread
 * at a time).
 */
#include <curl/curl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_cli.h"
#include "fw_mp.h"
#include "fw_stream.h"
#include "fw_teach.h"
#include "fw_tok.h"
#include "kernels_dev.h"

static const char usage_text[] =
	"usage: teach [--hints SOURCE[,SOURCE ...]] [--rules FILE]\n"
	"             [--teacher builtin:DIR | http:URL | none] [--tokenizer FILE]\n"
	"             [--clip X] [--max-chars N] [--hint-tokens N] [--hint-prompt N]\n"
	"             [--hint-temp X] [--seed N] [--timeout SEC] [--device cpu|cuda[:N]]\n"
	"             [-j N] [-o OUT] [-z] [--shard K/N] [--progress] [FILE ...]\n"
	"       teach -h | --help | --version\n";

static const struct fw_opt_doc options[] = {
	{ "--hints SOURCE[,SOURCE ...]", "where hints come from: env, rules, demo, model:TEACHER (default env)" },
	{ "--rules FILE", "the rules file of --hints rules" },
	{ "--teacher builtin:DIR | http:URL | none", "the teacher that re-scores the rollouts" },
	{ "--tokenizer FILE", "the tokenizer.json of the rollouts' tokens, for an http teacher" },
	{ "--clip X", "bound of each advantage (default 5)" },
	{ "--max-chars N", "bytes of an environment or model hint (default 400)" },
	{ "--hint-tokens N", "tokens a model hint may take (1 to 4096, default 48)" },
	{ "--hint-prompt N", "bytes of the hint prompt at most" },
	{ "--hint-temp X", "temperature of a model hint" },
	{ "--seed N", "base seed of the model hints drawn (default 0)" },
	{ "--timeout SEC", "seconds an http request may take (default 120)" },
	{ "--device cpu|cuda[:N]", "where builtin teachers score (default FW_DEVICE, else a GPU when there is one)" },
	{ "-j N", "records taught at once, by N threads (1 to 64, default 1)" },
	{ "-o OUT", "write there (via a temporary file, renamed at the end)" },
	{ "-z", "compress the output with zstd" },
	{ "--shard K/N", "teach only the records whose id hashes to K modulo N" },
	{ "--progress", "a progress meter on standard error even when it is not a terminal" },
	{ "-h, --help", "print this help and exit" },
	{ "--version", "print the version and exit" },
	{ NULL, NULL },
};

enum { NCACHE = 4, NOMIT = 8 };

/* What one worker thread owns: teachers by spec (most recent first) and
 * the tokenizer of an http teacher's records. */
struct worker {
	struct { char *spec; struct fw_teacher *T; } tc[NCACHE];
	char *tok_path;
	struct fw_tok *tok;
	struct fw_buf tb;
};

static void worker_free(struct worker *W)
{
	for (int i = 0; i < NCACHE; i++) {
		free(W->tc[i].spec);
		fw_teacher_free(W->tc[i].T);
	}
	free(W->tok_path);
	fw_tok_free(W->tok);
	fw_buf_free(&W->tb);
}

/* The teacher spec names, opened once per worker.  NULL with err. */
static struct fw_teacher *get_teacher(struct worker *W, const char *spec, double timeout_s,
				      char *err, size_t errlen)
{
	struct fw_teacher *T;
	int i;

	for (i = 0; i < NCACHE && W->tc[i].spec; i++)
		if (!strcmp(W->tc[i].spec, spec))
			break;
	if (i == NCACHE || !W->tc[i].spec) {
		if (!(T = fw_teacher_open(spec, timeout_s, 2, err, errlen)))
			return NULL;
		char *s = strdup(spec);

		if (!s) {
			fw_teacher_free(T);
			snprintf(err, errlen, "out of memory");
			return NULL;
		}
		/* evict the least recent when full */
		i = NCACHE - 1;
		free(W->tc[i].spec);
		fw_teacher_free(W->tc[i].T);
		W->tc[i].spec = s;
		W->tc[i].T = T;
	}
	/* move to the front */
	for (; i > 0; i--) {
		__typeof__(W->tc[0]) x = W->tc[i];

		W->tc[i] = W->tc[i - 1];
		W->tc[i - 1] = x;
	}
	return W->tc[0].T;
}

/* The tokenizer at path, kept while the next record asks for the same. */
static const struct fw_tok *get_tok(struct worker *W, const char *path, char *err,
				    size_t errlen)
{
	if (W->tok && !strcmp(W->tok_path, path))
		return W->tok;
	fw_tok_free(W->tok);
	free(W->tok_path);
	W->tok_path = NULL;
	if (!(W->tok = fw_tok_load(path, err, errlen)))
		return NULL;
	if (!(W->tok_path = strdup(path))) {
		fw_tok_free(W->tok);
		W->tok = NULL;
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	return W->tok;
}

/* What every record needs. */
struct ctx {
	int use_env, no_teacher;
	struct fw_teach_rules *rules;
	const char *teacher;   /* builtin:DIR or http:URL; NULL: policy.ckpt */
	const char *hint_spec; /* model hints: builtin:DIR, http:URL, policy; or NULL */
	const char *tokenizer; /* http teacher's tokenizer.json, or NULL */
	double clip, timeout_s;
	size_t max_chars, demo_chars;
	struct fw_teach_hint_opts ho;
};

/* One record to teach, and what teaching it gave. */
struct job {
	struct fw_buf rec, demo; /* the record; its group's demo (n 0: none) */
	const char *file;
	uint64_t index, offset;
	struct fw_buf out;       /* the record to write (n 0: none) */
	struct fw_buf diag;      /* diagnostics, one a line */
	int bad, done;
	int hinted, credited;    /* the record has hints; they gave it credit */
	char omitted[160];       /* why not, digits as N ("" when credited) */
	/* credit on the policy tokens that differ from the group's correct
	 * solution, and on the rest: sums and counts (split 0: no such
	 * comparison for this record) */
	int split;
	double sum_diff, sum_rest;
	long n_diff, n_rest;
};

static void diag(struct job *J, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void diag(struct job *J, const char *fmt, ...)
{
	char m[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(m, sizeof m, fmt, ap);
	va_end(ap);
	for (char *p = m; *p; p++)
		if (*p == '\n')
			*p = ' ';
	fw_buf_printf(&J->diag, "%s\n", m);
}

/* The record's policy.ckpt into buf (size n); 1 when it has one. */
static int policy_ckpt(struct fw_mpv v, char *buf, size_t n)
{
	struct fw_mpv pol, ck;
	const char *s;
	size_t sn;

	if (fw_mp_get(v, "policy", &pol) != 1 || fw_mp_get(pol, "ckpt", &ck) != 1 ||
	    fw_mp_str(ck, &s, &sn) || !sn || sn + 9 >= n)
		return 0;
	memcpy(buf, s, sn);
	buf[sn] = 0;
	return 1;
}

/* The reason s into buf (size n) with each run of digits as N, so that
 * reasons differing only in their numbers count together. */
static void reason_class(char *buf, size_t n, const char *s)
{
	size_t j = 0;

	for (; *s && j + 1 < n; s++) {
		if (*s >= '0' && *s <= '9') {
			if (j && buf[j - 1] == 'N')
				continue;
			buf[j++] = 'N';
		} else {
			buf[j++] = *s == '\n' ? ' ' : *s;
		}
	}
	buf[j] = 0;
}

/* Hints and credit for job J's record into J->out. */
static void process(const struct ctx *C, struct worker *W, struct job *J)
{
	struct fw_mpv v = { J->rec.p, J->rec.n }, demo = { J->demo.p, J->demo.n };
	struct fw_teach_hints hs = { 0 };
	float *adv = NULL;
	long nadv = 0;
	const char *reason = NULL, *other = NULL, *hint_error = NULL;
	char why[1024] = "", hwhy[1024] = "", err[1024], ckpt[4096], spec[4200];
	int has_ckpt = policy_ckpt(v, ckpt, sizeof ckpt);

	fw_buf_reset(&J->out);
	J->hinted = J->credited = 0;
	J->omitted[0] = 0;
	if ((C->use_env && fw_teach_env_hints(v, C->max_chars, &hs, err, sizeof err) < 0) ||
	    (C->rules && fw_teach_rule_hints(C->rules, v, &hs, err, sizeof err) < 0) ||
	    (demo.n && fw_teach_demo_hint(v, demo, C->demo_chars, &hs, err, sizeof err) < 0)) {
		diag(J, "%s", err);
		J->bad = 1;
		fw_teach_hints_free(&hs);
		return;
	}
	if (C->hint_spec) {
		struct fw_teacher *H = NULL;
		const char *hsp = C->hint_spec;

		if (!strcmp(hsp, "policy")) {
			hsp = NULL;
			if (has_ckpt) {
				snprintf(spec, sizeof spec, "builtin:%s", ckpt);
				hsp = spec;
			}
		}
		if (!hsp)
			snprintf(hwhy, sizeof hwhy, "no policy.ckpt for model:policy");
		else if ((H = get_teacher(W, hsp, C->timeout_s, hwhy, sizeof hwhy)) &&
			 fw_teach_model_hint(H, v, &C->ho, &hs, hwhy, sizeof hwhy) >= 0)
			hwhy[0] = 0;
		if (hwhy[0]) {
			hint_error = hwhy;
			diag(J, "model hint: %s", hwhy);
		}
	}
	if (!C->no_teacher) {
		struct fw_teacher *T = NULL;
		const struct fw_tok *t = NULL;
		struct fw_mpv x;
		int cr;

		if (C->teacher) {
			snprintf(spec, sizeof spec, "%s", C->teacher);
			/* the rollout's own checkpoint is not named */
			if (!(has_ckpt && !strncmp(spec, "builtin:", 8) && !strcmp(spec + 8, ckpt)))
				other = !strncmp(spec, "builtin:", 8) ? C->teacher + 8 : C->teacher;
		} else if (has_ckpt) {
			snprintf(spec, sizeof spec, "builtin:%s", ckpt);
		} else {
			reason = "no teacher: no --teacher and no policy.ckpt";
		}
		if (!reason && !(T = get_teacher(W, spec, C->timeout_s, why, sizeof why)))
			reason = why;
		if (T && !(t = fw_teacher_tok(T))) {
			/* an http teacher scores ids of the rollout's own tokenizer */
			char p[4200];

			if (C->tokenizer)
				snprintf(p, sizeof p, "%s", C->tokenizer);
			else if (has_ckpt)
				snprintf(p, sizeof p, "%s/tokenizer.json", ckpt);
			if (!C->tokenizer && !has_ckpt)
				reason = "no tokenizer for the http teacher: no --tokenizer and no policy.ckpt";
			else if (!(t = get_tok(W, p, why, sizeof why)))
				reason = why;
		}
		if (T && t &&
		    (cr = (fw_mp_get(v, "tokens", &x) == 1 ? fw_teach_credit_fill
							   : fw_teach_credit_agent)(
			     T, t, v, &hs, C->clip, &adv, &nadv, why, sizeof why)) != 0) {
			reason = why;
			if (cr < 0)
				diag(J, "teacher: %s", why);
		}
	}
	J->split = 0;
	J->sum_diff = J->sum_rest = 0;
	J->n_diff = J->n_rest = 0;
	/* only a failing rollout is compared (a resolved one has no hint) */
	if (adv && nadv > 0 && demo.n && hs.n && !fw_teach_resolved(v)) {
		unsigned char *dm = NULL;
		long nd = 0;

		if (fw_teach_diff_mask(v, demo, &dm, &nd, err, sizeof err) < 0) {
			diag(J, "%s", err);
			J->bad = 1;
		} else if (dm && nd == nadv) {
			J->split = 1;
			for (long i = 0; i < nadv; i++)
				if (dm[i]) {
					J->sum_diff += adv[i];
					J->n_diff++;
				} else {
					J->sum_rest += adv[i];
					J->n_rest++;
				}
		}
		free(dm);
	}
	if (!C->no_teacher && hs.n) {
		J->hinted = 1;
		J->credited = adv != NULL;
		if (!adv)
			reason_class(J->omitted, sizeof J->omitted, reason ? reason : "no credit");
	}
	fw_buf_reset(&W->tb);
	if (fw_teach_pack(&W->tb, &hs, adv, nadv, reason, other, hint_error)) {
		diag(J, "out of memory");
		J->bad = 1;
	} else {
		struct fw_field f = { "teach", 5, { W->tb.p, W->tb.n } };
		struct fw_buf sb = { 0 }, tb2 = { 0 };
		int oom = 0;

		if (J->split) {
			/* teach.adv_split: {differ, rest, n_differ, n_rest}, the
			 * mean credit on each side (0 on an empty one) */
			msgpack_packer pk;
			struct fw_field sf = { "adv_split", 9, { NULL, 0 } };

			fw_buf_packer(&pk, &sb);
			msgpack_pack_map(&pk, 4);
			msgpack_pack_str(&pk, 6);
			msgpack_pack_str_body(&pk, "differ", 6);
			msgpack_pack_double(&pk, J->n_diff ? J->sum_diff / (double)J->n_diff : 0);
			msgpack_pack_str(&pk, 4);
			msgpack_pack_str_body(&pk, "rest", 4);
			msgpack_pack_double(&pk, J->n_rest ? J->sum_rest / (double)J->n_rest : 0);
			msgpack_pack_str(&pk, 8);
			msgpack_pack_str_body(&pk, "n_differ", 8);
			msgpack_pack_int64(&pk, J->n_diff);
			msgpack_pack_str(&pk, 6);
			msgpack_pack_str_body(&pk, "n_rest", 6);
			msgpack_pack_int64(&pk, J->n_rest);
			sf.val = (struct fw_mpv){ sb.p, sb.n };
			oom = fw_rec_set(&tb2, f.val, &sf, 1) != 0;
			f.val = (struct fw_mpv){ tb2.p, tb2.n };
		}
		if (oom || fw_rec_set(&J->out, v, &f, 1)) {
			fw_buf_reset(&J->out);
			diag(J, "out of memory");
			J->bad = 1;
		}
		fw_buf_free(&sb);
		fw_buf_free(&tb2);
	}
	free(adv);
	fw_teach_hints_free(&hs);
}

/* ---- the workers ------------------------------------------------------------ */

struct pool {
	const struct ctx *C;
	struct worker *W;
	int nw;
	pthread_t *th;
	struct job *ring;
	uint64_t cap, head, next, tail; /* to write, to process, to fill */
	int quit;
	pthread_mutex_t mu;
	pthread_cond_t work, ready;
	struct fw_writer *w;
	int status, write_failed;
	/* the share of hinted records that got credit, and why the rest not */
	uint64_t hinted, credited;
	double sum_diff, sum_rest;
	long n_diff, n_rest, n_split;
	struct { char why[160]; uint64_t n; } omit[NOMIT];
	int nomit;
};

struct wa { struct pool *P; int i; };

static void *work(void *arg)
{
	struct wa *a = arg;
	struct pool *P = a->P;

	pthread_mutex_lock(&P->mu);
	for (;;) {
		while (P->next == P->tail && !P->quit)
			pthread_cond_wait(&P->work, &P->mu);
		if (P->next == P->tail)
			break;
		struct job *J = &P->ring[P->next++ % P->cap];

		pthread_mutex_unlock(&P->mu);
		process(P->C, &P->W[a->i], J);
		pthread_mutex_lock(&P->mu);
		J->done = 1;
		pthread_cond_broadcast(&P->ready);
	}
	pthread_mutex_unlock(&P->mu);
	return NULL;
}

/* Prints J's diagnostics and writes its record. */
static void emit(struct pool *P, struct job *J)
{
	const char *s = (const char *)J->diag.p, *e = s + J->diag.n;

	while (s < e) {
		const char *nl = memchr(s, '\n', (size_t)(e - s));

		fw_warn_rec(J->file, J->index, J->offset, "%.*s", (int)(nl - s), s);
		s = nl + 1;
	}
	if (J->bad)
		P->status = FW_EXIT_DATA;
	P->hinted += J->hinted;
	if (J->split) {
		P->n_split++;
		P->sum_diff += J->sum_diff;
		P->sum_rest += J->sum_rest;
		P->n_diff += J->n_diff;
		P->n_rest += J->n_rest;
	}
	P->credited += J->credited;
	if (J->hinted && !J->credited) {
		int i = 0;

		while (i < P->nomit && strcmp(P->omit[i].why, J->omitted))
			i++;
		/* past NOMIT distinct reasons the last slot holds the rest */
		if (i == P->nomit && P->nomit == NOMIT)
			snprintf(P->omit[i = NOMIT - 1].why, sizeof P->omit[0].why, "other reasons");
		else if (i == P->nomit)
			snprintf(P->omit[P->nomit++].why, sizeof P->omit[0].why, "%s", J->omitted);
		P->omit[i].n++;
	}
	if (J->out.n && !P->write_failed && fw_writer_put(P->w, J->out.p, J->out.n)) {
		fw_warn("write error: %s", fw_writer_error(P->w));
		P->status = FW_EXIT_DATA;
		P->write_failed = 1;
	}
}

/* Writes the finished jobs at the head; with all, waits for every one. */
static void drain(struct pool *P, int all)
{
	pthread_mutex_lock(&P->mu);
	while (P->head < P->tail) {
		struct job *J = &P->ring[P->head % P->cap];

		if (!J->done) {
			if (!all && P->tail - P->head < P->cap)
				break;
			pthread_cond_wait(&P->ready, &P->mu);
			continue;
		}
		pthread_mutex_unlock(&P->mu);
		emit(P, J);
		pthread_mutex_lock(&P->mu);
		P->head++;
	}
	pthread_mutex_unlock(&P->mu);
}

/* Queues a record (and its demo, or NULL) from file; with one worker it is
 * taught and written at once.  0, or -1 when out of memory. */
static int submit(struct pool *P, const char *file, uint64_t index, uint64_t offset,
		  struct fw_mpv v, const struct fw_mpv *demo)
{
	struct job *J;

	if (P->nw > 1)
		drain(P, 0); /* makes room: tail - head < cap */
	J = &P->ring[P->tail % P->cap];
	fw_buf_reset(&J->rec);
	fw_buf_reset(&J->demo);
	fw_buf_reset(&J->diag);
	J->file = file;
	J->index = index;
	J->offset = offset;
	J->bad = J->done = 0;
	if (fw_buf_append(&J->rec, v.p, v.n) || (demo && fw_buf_append(&J->demo, demo->p, demo->n)))
		return -1;
	if (P->nw == 1) {
		process(P->C, &P->W[0], J);
		emit(P, J);
		return 0;
	}
	pthread_mutex_lock(&P->mu);
	P->tail++;
	pthread_cond_signal(&P->work);
	pthread_mutex_unlock(&P->mu);
	drain(P, 0);
	return 0;
}

/* ---- groups (for demo hints) ------------------------------------------------ */

/* Consecutive records of one group, copied. */
struct group {
	struct fw_buf data;
	struct { size_t off, n; uint64_t index, offset; } *r;
	size_t n, cap;
	int has;
	uint64_t key;
};

static int group_add(struct group *G, const struct fw_rec *rec, int has, uint64_t key)
{
	if (G->n == G->cap) {
		size_t nc = G->cap ? 2 * G->cap : 16;
		void *p = realloc(G->r, nc * sizeof *G->r);

		if (!p)
			return -1;
		G->r = p;
		G->cap = nc;
	}
	G->r[G->n].off = G->data.n;
	G->r[G->n].n = rec->v.n;
	G->r[G->n].index = rec->index;
	G->r[G->n].offset = rec->offset;
	if (fw_buf_append(&G->data, rec->v.p, rec->v.n))
		return -1;
	G->n++;
	G->has = has;
	G->key = key;
	return 0;
}

/* Submits the group's records with its first resolved one as the demo (a
 * group of one, or without a key, has none); empties G.  0 or -1. */
static int flush(struct pool *P, struct group *G, const char *file)
{
	struct fw_mpv demo = { 0 };
	int have = 0;

	for (size_t i = 0; G->has && i < G->n && !have; i++) {
		struct fw_mpv v = { G->data.p + G->r[i].off, G->r[i].n };

		if (fw_teach_resolved(v)) {
			demo = v;
			have = 1;
		}
	}
	for (size_t i = 0; i < G->n; i++) {
		struct fw_mpv v = { G->data.p + G->r[i].off, G->r[i].n };

		if (submit(P, file, G->r[i].index, G->r[i].offset, v, have ? &demo : NULL))
			return -1;
	}
	G->n = 0;
	fw_buf_reset(&G->data);
	return 0;
}

/* "builtin:DIR" or "http:URL": 0, else -1. */
static int teacher_spec_ok(const char *s)
{
	return (!strncmp(s, "builtin:", 8) && s[8]) || (!strncmp(s, "http:", 5) && s[5]) ? 0 : -1;
}

int main(int argc, char **argv)
{
	enum { OPT_HINTS = 256, OPT_RULES, OPT_TEACHER, OPT_TOKENIZER, OPT_CLIP, OPT_MAX_CHARS,
	       OPT_HINT_TOKENS, OPT_HINT_PROMPT, OPT_HINT_TEMP, OPT_SEED, OPT_TIMEOUT,
	       OPT_DEVICE, OPT_VERSION, OPT_SHARD, OPT_PROGRESS };
	static const struct option longopts[] = {
		{ "hints", required_argument, NULL, OPT_HINTS },
		{ "device", required_argument, NULL, OPT_DEVICE },
		{ "rules", required_argument, NULL, OPT_RULES },
		{ "teacher", required_argument, NULL, OPT_TEACHER },
		{ "tokenizer", required_argument, NULL, OPT_TOKENIZER },
		{ "clip", required_argument, NULL, OPT_CLIP },
		{ "max-chars", required_argument, NULL, OPT_MAX_CHARS },
		{ "hint-tokens", required_argument, NULL, OPT_HINT_TOKENS },
		{ "hint-prompt", required_argument, NULL, OPT_HINT_PROMPT },
		{ "hint-temp", required_argument, NULL, OPT_HINT_TEMP },
		{ "seed", required_argument, NULL, OPT_SEED },
		{ "timeout", required_argument, NULL, OPT_TIMEOUT },
		{ "jobs", required_argument, NULL, 'j' },
		{ "shard", required_argument, NULL, OPT_SHARD },
		{ "progress", no_argument, NULL, OPT_PROGRESS },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, OPT_VERSION },
		{ NULL, 0, NULL, 0 },
	};
	const char *out = NULL, *rules_path = NULL;
	int use_rules = 0, use_demo = 0;
	struct ctx C = { .use_env = 1, .clip = 5, .timeout_s = 120 };
	uint64_t max_chars = 400, u, jobs = 1;
	double d;
	int c, status = FW_EXIT_OK;
	char err[512], *hints_arg = NULL;
	const char *device = NULL;
	int level = -1, progress = 0;
	uint64_t shard_k = 0, shard_n = 0;

	fw_cli_init("teach");
	fw_usage_init(usage_text, options);
	while ((c = getopt_long(argc, argv, "j:o:zh", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_HINTS: {
			char *save = NULL;

			free(hints_arg);
			if (!(hints_arg = strdup(optarg)))
				return FW_EXIT_DATA;
			C.use_env = use_rules = use_demo = 0;
			C.hint_spec = NULL;
			for (char *w = strtok_r(hints_arg, ",", &save); w; w = strtok_r(NULL, ",", &save))
				if (!strcmp(w, "env")) {
					C.use_env = 1;
				} else if (!strcmp(w, "rules")) {
					use_rules = 1;
				} else if (!strcmp(w, "demo")) {
					use_demo = 1;
				} else if (!strncmp(w, "model:", 6) &&
					   (!strcmp(w + 6, "policy") || !teacher_spec_ok(w + 6))) {
					C.hint_spec = w + 6;
				} else {
					fw_warn("--hints: unknown or unsupported source '%s'", w);
					fputs(usage_text, stderr);
					free(hints_arg);
					return FW_EXIT_USAGE;
				}
			break;
		}
		case OPT_RULES:
			rules_path = optarg;
			break;
		case OPT_TEACHER:
			if (!strcmp(optarg, "none")) {
				C.no_teacher = 1;
			} else if (!teacher_spec_ok(optarg)) {
				C.no_teacher = 0;
				C.teacher = optarg;
			} else {
				fw_warn("--teacher: want builtin:DIR, http:URL or none, not '%s'", optarg);
				return FW_EXIT_USAGE;
			}
			break;
		case OPT_TOKENIZER:
			C.tokenizer = optarg;
			break;
		case OPT_CLIP:
			if (fw_parse_double(optarg, &C.clip) || !(C.clip > 0)) {
				fw_warn("--clip: want a positive number, not '%s'", optarg);
				return FW_EXIT_USAGE;
			}
			break;
		case OPT_MAX_CHARS:
			if (fw_parse_u64(optarg, &max_chars, 0) || !max_chars || max_chars > 1u << 20) {
				fw_warn("--max-chars: want 1 to 1048576, not '%s'", optarg);
				return FW_EXIT_USAGE;
			}
			break;
		case OPT_HINT_TOKENS:
			if (fw_parse_u64(optarg, &u, 0) || !u || u > 4096) {
				fw_warn("--hint-tokens: want 1 to 4096, not '%s'", optarg);
				return FW_EXIT_USAGE;
			}
			C.ho.max_tokens = (int)u;
			break;
		case OPT_HINT_PROMPT:
			if (fw_parse_u64(optarg, &u, 1) || u < 256 || u > 1u << 24) {
				fw_warn("--hint-prompt: want 256 to 16M bytes, not '%s'", optarg);
				return FW_EXIT_USAGE;
			}
			C.ho.prompt_bytes = (size_t)u;
			break;
		case OPT_HINT_TEMP:
			if (fw_parse_double(optarg, &d) || d < 0 || d > 10) {
				fw_warn("--hint-temp: want 0 to 10, not '%s'", optarg);
				return FW_EXIT_USAGE;
			}
			C.ho.temp = (float)d;
			break;
		case OPT_SEED:
			if (fw_parse_u64(optarg, &C.ho.seed, 0)) {
				fw_warn("--seed: want an unsigned integer, not '%s'", optarg);
				return FW_EXIT_USAGE;
			}
			break;
		case OPT_TIMEOUT:
			if (fw_parse_double(optarg, &C.timeout_s) || !(C.timeout_s > 0)) {
				fw_warn("--timeout: want a positive number of seconds, not '%s'", optarg);
				return FW_EXIT_USAGE;
			}
			break;
		case 'j':
			if (fw_parse_u64(optarg, &jobs, 0) || jobs < 1 || jobs > 64) {
				fw_warn("-j: want 1 to 64, not '%s'", optarg);
				return FW_EXIT_USAGE;
			}
			break;
		case 'o':
			out = optarg;
			break;
		case OPT_DEVICE:
			device = optarg;
			break;
		case 'z':
			level = 3;
			break;
		case OPT_SHARD:
			if (fw_parse_shard(optarg, &shard_k, &shard_n) < 0)
				return fw_usage_fail("bad shard '%s' (want K/N, 0 <= K < N)", optarg);
			break;
		case OPT_PROGRESS:
			progress = 1;
			break;
		case 'h':
			fw_help();
			return fw_close_stdout() ? FW_EXIT_DATA : FW_EXIT_OK;
		case OPT_VERSION:
			fw_print_version();
			return FW_EXIT_OK;
		default:
			fw_usage(stderr);
			return FW_EXIT_USAGE;
		}
	}
	if (use_rules && !rules_path) {
		fw_warn("--hints rules needs --rules FILE");
		return FW_EXIT_USAGE;
	}
	if (use_rules && !(C.rules = fw_teach_rules_load(rules_path, err, sizeof err))) {
		fw_warn("%s", err);
		return FW_EXIT_USAGE;
	}
	/* builtin teachers score on --device ($FW_DEVICE, a GPU when there is one) */
	if (fw_dev_select(device, err, sizeof err) < 0) {
		fw_warn("%s", err);
		return FW_EXIT_DATA;
	}
	C.max_chars = max_chars;
	C.demo_chars = 5 * max_chars;
	C.ho.max_chars = max_chars;
	struct fw_writer *w = fw_writer_open(out, level, err, sizeof err);

	if (!w) {
		fw_warn("%s", err);
		return FW_EXIT_DATA;
	}
	/* The workers share the kernels' thread pool as it is (FW_THREADS):
	 * a forward's sums depend on how its work is split, so a different
	 * split per worker would change the bytes written. */
	/* http teachers open libcurl in the workers: set it up before them,
	 * since its global setup is not safe from several threads at once */
	curl_global_init(CURL_GLOBAL_DEFAULT);
	struct pool P = { .C = &C, .nw = (int)jobs, .cap = 4 * jobs, .w = w };
	struct wa *wa = calloc(jobs, sizeof *wa);

	P.W = calloc(jobs, sizeof *P.W);
	P.ring = calloc(P.cap, sizeof *P.ring);
	P.th = calloc(jobs, sizeof *P.th);
	pthread_mutex_init(&P.mu, NULL);
	pthread_cond_init(&P.work, NULL);
	pthread_cond_init(&P.ready, NULL);
	if (!P.W || !P.ring || !P.th || !wa) {
		fw_warn("out of memory");
		return FW_EXIT_DATA;
	}
	int started = 0;

	for (int i = 0; jobs > 1 && i < (int)jobs; i++) {
		wa[i] = (struct wa){ &P, i };
		if (pthread_create(&P.th[i], NULL, work, &wa[i])) {
			fw_warn("cannot start a worker thread");
			break;
		}
		started++;
	}
	if (jobs > 1 && !started) {
		fw_writer_close(w, err, sizeof err);
		return FW_EXIT_DATA;
	}
	int nfiles = argc - optind;
	struct group G = { 0 };
	struct fw_progress meter;
	uint64_t nread = 0, bytes_before = 0;

	fw_progress_start(&meter, progress);
	for (int fi = 0; meter.on && fi < (nfiles ? nfiles : 1); fi++)
		fw_progress_expect(&meter, nfiles ? argv[optind + fi] : "-");

	for (int fi = 0; fi < (nfiles ? nfiles : 1); fi++) {
		const char *path = nfiles ? argv[optind + fi] : "-";
		struct fw_reader *r = fw_reader_open(path, NULL, err, sizeof err);
		struct fw_rec rec;
		int got = 0, oom = 0;

		if (!r) {
			fw_warn("%s", err);
			status = FW_EXIT_DATA;
			continue;
		}
		const char *name = fw_reader_name(r);

		while (!oom && (got = fw_reader_next(r, &rec)) == 1) {
			uint64_t key = 0;
			if (shard_n && !fw_shard_keep(rec.v, shard_k, shard_n))
				continue;
			fw_progress_tick(&meter, ++nread, bytes_before + fw_reader_bytes_in(r));
			int has = use_demo && fw_teach_group_key(rec.v, &key);

			if (!use_demo) {
				oom = submit(&P, name, rec.index, rec.offset, rec.v, NULL);
				continue;
			}
			if (G.n && (!has || !G.has || key != G.key))
				oom = flush(&P, &G, name);
			oom = oom || group_add(&G, &rec, has, key);
		}
		if (!oom && G.n)
			oom = flush(&P, &G, name);
		if (oom) {
			fw_warn("out of memory");
			status = FW_EXIT_DATA;
		} else if (got < 0) {
			fw_warn_reader(r);
			status = FW_EXIT_DATA;
		}
		/* the jobs name the reader's file: write them before it closes */
		drain(&P, 1);
		bytes_before += fw_reader_bytes_in(r);
		fw_reader_close(r);
		if (oom)
			break;
	}
	pthread_mutex_lock(&P.mu);
	P.quit = 1;
	pthread_cond_broadcast(&P.work);
	pthread_mutex_unlock(&P.mu);
	for (int i = 0; i < started; i++)
		pthread_join(P.th[i], NULL);
	fw_progress_end(&meter);
	if (P.status)
		status = P.status;
	if (P.hinted) {
		fprintf(stderr, "%s: credit for %llu of %llu failing rollouts (%.1f%%)\n", fw_prog,
			(unsigned long long)P.credited, (unsigned long long)P.hinted,
			100.0 * (double)P.credited / (double)P.hinted);
		for (int i = 0; i < P.nomit; i++)
			fprintf(stderr, "%s: omitted for %llu: %s\n", fw_prog,
				(unsigned long long)P.omit[i].n, P.omit[i].why);
	}
	if (P.n_split)
		fprintf(stderr,
			"%s: credit beside a correct solution (%ld rollouts): mean %.3f on the %ld "
			"tokens that differ, %.3f on the %ld others\n",
			fw_prog, P.n_split, P.n_diff ? P.sum_diff / (double)P.n_diff : 0.0, P.n_diff,
			P.n_rest ? P.sum_rest / (double)P.n_rest : 0.0, P.n_rest);
	for (uint64_t i = 0; i < P.cap; i++) {
		fw_buf_free(&P.ring[i].rec);
		fw_buf_free(&P.ring[i].demo);
		fw_buf_free(&P.ring[i].out);
		fw_buf_free(&P.ring[i].diag);
	}
	for (uint64_t i = 0; i < jobs; i++)
		worker_free(&P.W[i]);
	free(P.W);
	free(P.ring);
	free(P.th);
	free(wa);
	fw_buf_free(&G.data);
	free(G.r);
	free(hints_arg);
	fw_teach_rules_free(C.rules);
	if (fw_writer_close(w, err, sizeof err)) {
		fw_warn("%s", err);
		status = FW_EXIT_DATA;
	}
	return status;
}
