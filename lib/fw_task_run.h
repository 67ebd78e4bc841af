/*
 * fw_task_run.h — one repository's mutations validated on the shared
 * worker pool (fw_cli.h), the tasks taken from the finished prefix of the
 * order, and the store and environment a run of task-mutate opens once.
 *
 * The order of the candidates (fw_task_repo_open()'s, from --seed) is the
 * order of the output: whatever the number of workers, the tasks written
 * and the counts of the summary are those of the prefix of that order up
 * to the max-th task kept, so they do not depend on -j.
 */
#ifndef FW_TASK_RUN_H
#define FW_TASK_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "fw_env.h"
#include "fw_history.h"
#include "fw_task.h"

/* Counts of a run, for the summary. */
struct fw_task_tally {
	uint64_t cand, ok, why[FW_TASK_NREASONS];
};

/*
 * Validates the candidates of j (fw_task_repo_open()) in their order with
 * `workers` threads (1: on the caller's thread), each with its own handle
 * of the store at j->o->store, until max tasks are kept in the finished
 * prefix of the order (0: no limit) or a candidate fails.  progress is
 * fw_progress_start()'s force: the meter counts the candidates done.
 * Sets each finished candidate's done and reason.  Returns 0, or -1 with
 * the failure in msg (the first FW_TASK_ERROR's detail, the store's open
 * error, out of memory): the run stopped there.
 */
int fw_task_repo_validate(struct fw_task_repo *j, int workers, uint64_t max, int progress,
			  char *msg, size_t msglen);

/*
 * Walks the finished prefix of j's order up to its max-th kept task (0: to
 * its end), counting into t: kept(arg, c) for a task, rejected(arg, c)
 * (may be NULL) for any other candidate.  Returns 0, or the first nonzero
 * return of kept(), where the walk stopped.
 */
int fw_task_repo_results(const struct fw_task_repo *j, uint64_t max, struct fw_task_tally *t,
			 int (*kept)(void *arg, const struct fw_task_cand *c),
			 void (*rejected)(void *arg, const struct fw_task_cand *c), void *arg);

/*
 * What a run opens once for every repository: the task store at t->store
 * (made when absent; t->store_abs its absolute path, malloc'd into
 * *store_abs for the caller to free), the environment store (t->env_store
 * resolved beside it into env_store, a buffer of env_store_len bytes) and,
 * when env_arg names an environment (a directory or an id), that one
 * opened into env (t->env).  Returns 0, or -1 with the reason in err.
 */
int fw_task_run_open(struct fw_task_opts *t, const char *env_arg, struct fw_env *env,
		     char **store_abs, char *env_store, size_t env_store_len, char *err,
		     size_t errlen);

/*
 * --strategy history on repo: h holds the history's own options (range,
 * paths, dates, context, max, jobs, split, tmp); the rest comes from t
 * (test command, report, timeout, shard, store), and the environment is
 * t->env or the one the repository's recipe names (fw_task_repo_env()).
 * Runs fw_history_run() with emit, note and ctx, counting into tally.
 * Returns what it returns, or -1 with the reason in err.
 */
int fw_task_run_history(struct fw_history_opts *h, const struct fw_task_opts *t,
			const char *repo, fw_history_emit_fn emit, fw_history_note_fn note,
			void *ctx, struct fw_history_tally *tally, char *err, size_t errlen);

/* The summary's counts, "candidates N, validated N, rejected N: REASON N,
 * ..." for t and "history: commits N, candidates N, validated N: REASON N,
 * ..." for h, into buf (truncated to len).  Cannot fail. */
void fw_task_tally_format(char *buf, size_t len, const struct fw_task_tally *t);
void fw_task_history_tally_format(char *buf, size_t len, const struct fw_history_tally *h);

#endif
