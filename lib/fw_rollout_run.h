/*
 * fw_rollout_run.h — the rollouts of task records: what rollout(1) does
 * with one task, apart from reading input and its threads.  A worker
 * holds one thread's policy; each task gives one rollout record per
 * sample (see rollout(1) and flywheel-records(5)).
 */
#ifndef FW_ROLLOUT_RUN_H
#define FW_ROLLOUT_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "fw_mp.h"

struct fw_builtin;
struct fw_http;
struct fw_store;
struct fw_toolset;

enum fw_policy_backend { FW_POLICY_BUILTIN, FW_POLICY_EXEC, FW_POLICY_HTTP };

/* What the episodes of a rollout run are: the policy and its settings,
 * as rollout(1)'s options give them.  Pointers are borrowed. */
struct fw_rollout_cfg {
	const char *policy, *arg, *store, *model; /* --policy, what follows its
						   * prefix, --store, --model */
	enum fw_policy_backend backend;
	uint64_t samples, seed, max_tokens, context, max_steps;
	double temp, top_p, timeout_s;
	int top_k, no_time, ignore_stop, agent, tools;
	const char **allow, **mounts; /* NULL-terminated, or NULL */
	size_t nallow, nmounts;
	const char *env, *env_store;  /* --env (in place of task.env), --env-store */
	const char *tool_defs;        /* --tool-defs */
	struct fw_toolset *toolset;   /* the tools with --tool-defs, or NULL */
};

/* One thread's policy (b for builtin:, h for http:, loaded by the caller;
 * load_err why it could not be) and the task store it last opened.
 * Release what it holds with fw_rollout_worker_release(). */
struct fw_rollout_worker {
	const struct fw_rollout_cfg *o;
	struct fw_builtin *b;
	struct fw_http *h;
	char load_err[512];
	struct fw_store *st;
	char *st_path;
};

/* The rollout records of one task. */
struct fw_rollout_out {
	struct fw_buf out; /* msgpack records, appended */
	int failed;        /* records with an error */
	char err[512];     /* the first error */
};

/*
 * Runs the o->samples episodes of the task record p (n bytes) with w's
 * policy (fill or agent episodes for builtin: and http:, exec runs for
 * exec:) and appends one rollout record per sample to r->out (see
 * rollout(1)); a task that cannot be run gives a record with its error
 * per sample.  Returns r->failed.  Cannot fail otherwise.
 */
int fw_rollout_task(struct fw_rollout_worker *w, const uint8_t *p, size_t n,
		    struct fw_rollout_out *r);

/*
 * Sets c->backend and c->arg from c->policy: "builtin:DIR", "exec:CMD" or
 * "http:URL", not empty after the colon.  Returns 0, or -1 for any other
 * spec.
 */
int fw_rollout_cfg_policy(struct fw_rollout_cfg *c);

/*
 * Gives each of the n workers ws (zeroed by the caller) c and loads its
 * policy: a builtin checkpoint or an http client each (the API key from
 * $FW_API_KEY when it is set, else $OPENAI_API_KEY); exec needs none.
 * When one cannot be loaded, the reason goes to err and to the load_err
 * of it and of the workers after it, whose tasks give records saying why.
 * Returns 0, or -1 after such a failure.
 */
int fw_rollout_workers_load(struct fw_rollout_worker *ws, int n, const struct fw_rollout_cfg *c,
			    char *err, size_t errlen);

/* Frees w's policy and store and zeroes them; keeps w->o.  NULL does
 * nothing. */
void fw_rollout_worker_release(struct fw_rollout_worker *w);

/* ---- records on a worker pool (rollout -j) ---------------------------------- */

/* One record read and the records written for it. */
struct fw_rollout_job {
	struct fw_buf in;         /* a copy of the record */
	const char *file;         /* where it was read (borrowed) */
	uint64_t index, offset;   /* and at which record and byte */
	int is_task;              /* a task: rolled out; else written as it came */
	struct fw_rollout_out r;  /* what is written for it */
};

/* A job for the record rec read from file at index and offset; is_task
 * says whether it is rolled out.  file is borrowed.  Returns NULL when out
 * of memory.  Caller frees with fw_rollout_job_free(). */
struct fw_rollout_job *fw_rollout_job_new(struct fw_mpv rec, int is_task, const char *file,
					  uint64_t index, uint64_t offset);

/* Frees j and its buffers.  NULL does nothing. */
void fw_rollout_job_free(struct fw_rollout_job *j);

/* Rolls out j's task on w (fw_rollout_task()) into j->r, or copies a
 * record that is not a task to j->r.out.  Cannot fail (j->r says what
 * failed; a copy that runs out of memory leaves j->r.out short). */
void fw_rollout_job_run(struct fw_rollout_worker *w, struct fw_rollout_job *j);

#endif
