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
 * Release what it holds with fw_rollout_worker_clear(). */
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

/* Frees w's policy and store and zeroes them; keeps w->o.  NULL does
 * nothing. */
void fw_rollout_worker_clear(struct fw_rollout_worker *w);

#endif
