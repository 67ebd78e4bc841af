/*
 * fw_serve_int.h — the insides of fw_serve shared by lib/serve/: jobs,
 * checkpoints (arms) and their engines, requests, answers, streams.
 */
#ifndef FW_SERVE_INT_H
#define FW_SERVE_INT_H

#include <pthread.h>
#include <stdint.h>

#include <jansson.h>

#include "fw_base.h"
#include "fw_mp.h"
#include "fw_policy.h"
#include "fw_serve.h"

#define MAX_TOP 20   /* top_logprobs at most, as OpenAI allows */
#define MAX_STOPS 16 /* stop strings at most */
#define NBUCKET 12   /* latency histogram buckets */
#define MIN_SHARE 32 /* prompt tokens worth taking from another sequence */

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

/* A sequence of the engine's state: choice k of job j. */
struct seq {
	struct job *j;
	int k;
};

/* One checkpoint by name, with its engine. */
struct arm {
	struct fw_serve *srv;
	const char *name, *dir;
	struct fw_builtin *b;
	struct fw_gen *g;
	int S;                   /* sequences of g */
	pthread_t th;
	int started;             /* th runs */
	pthread_mutex_t mu;
	pthread_cond_t work;     /* the engine waits for jobs */
	struct job **queue;      /* waiting jobs, FIFO */
	int nq, capq;
	int nrun;                /* jobs being decoded */
	int tmpl;                /* chat template, or -1 */
	/* the engine's buffers, allocated with it */
	struct seq *seqs;        /* (S) */
	int32_t *next, *tid;     /* (S), (S, MAX_TOP) */
	float *lps, *tlp, *scratch; /* (S), (S, MAX_TOP), (2V) */
	/* metrics (under mu) */
	unsigned long long prompt_tokens, gen_tokens, ok;
	unsigned long long hist[NBUCKET + 1];
	double lat_sum;
	unsigned long long steps, step_seqs;
	unsigned long long shared;  /* prompt tokens taken from another sequence */
};

/* HTTP answers counted by status, for /metrics. */
#define NCODES 7
extern const unsigned fw_serve_codes[NCODES];
extern const double fw_serve_buckets[NBUCKET];

struct fw_serve {
	struct arm *arms;
	int narms, caparms;
	char *api_key;
	volatile int stop;
	uint64_t fresh_base, fresh_ctr;
	pthread_mutex_t stat_mu;
	unsigned long long by_code[NCODES + 1];
};

/* What a chat request asks of tools. */
enum { TOOLS_NONE, TOOLS_AUTO, TOOLS_REQUIRED, TOOLS_NAMED };

/* What a completion request wants back, besides the job. */
struct want {
	int chat, stream, usage, echo, lp, prompt_lp;
	int tools;            /* TOOLS_* */
	int single_call;      /* parallel_tool_calls: false */
	char *prefix;         /* the start of a tool call put after the prompt */
	char id[40];
	long created;
};

/* fw_serve.c: the server's own services */
uint64_t serve_fresh(struct fw_serve *s);
double serve_now(void);
void serve_count(struct fw_serve *s, unsigned status);
/* r becomes j (freed) as a JSON reply of status; -1 when out of memory */
int serve_reply(struct fw_serve *s, struct fw_serve_reply *r, unsigned status, json_t *j);
int serve_fail(struct fw_serve *s, struct fw_serve_reply *r, unsigned status, const char *type,
	       const char *msg);
/* HTTP 400 with vLLM's error object; param names the field, or NULL */
int serve_refuse(struct fw_serve *s, struct fw_serve_reply *r, const char *msg,
		 const char *param);

/* fw_serve_engine.c: jobs and the batching engine */
void serve_job_free(struct job *j);
void serve_job_drop(struct arm *a, struct job *j, int locked);
int serve_submit(struct arm *a, struct job *j);
void serve_wait_done(struct arm *a, struct job *j);
int serve_engine_start(struct arm *a, char *err, size_t errlen);
void serve_engine_stop(struct arm *a);

/* fw_serve_req.c: request fields into jobs.  Functions that take r
 * answer a refusal into it and return -1 (r->status set) or 0. */
int serve_unsupported(json_t *rq, int chat, const char **field, char *buf, size_t len);
int serve_fit(struct arm *a, json_t *rq, size_t P, struct fw_serve_reply *r);
int serve_tool_mode(json_t *rq, const char **name, const char **msg);
int serve_prompt_ids(struct arm *a, json_t *rq, int chat, int special, int mode,
		     const char *tool, char **prefix, struct fw_tok_ids *ids,
		     struct fw_serve_reply *r);
/* the job of rq with the prompt ids (taken: *ids is left empty), or NULL
 * with buf and *field (NULL: out of memory) */
struct job *serve_make_job(struct arm *a, json_t *rq, const struct want *w,
			   struct fw_tok_ids *ids, const char **field, char *buf, size_t blen);

/* fw_serve_answer.c: answers and streams */
json_t *serve_answer(const struct arm *a, const struct job *j, const struct want *w);
json_t *serve_score_answer(const struct arm *a, const struct job *j, const struct want *w);
/* a stream of j's events (takes the connection's reference to j and
 * w->prefix), or NULL when out of memory (j and w left to the caller) */
struct fw_serve_stream *serve_stream_new(struct arm *a, struct job *j, const struct want *w);

/* fw_serve_metrics.c: the Prometheus text of s into b; -1 out of memory */
int serve_metrics(struct fw_serve *s, struct fw_buf *b);

#endif
