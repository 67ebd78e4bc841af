/*
 * fw_task_run.h — one repository's mutations validated on the shared
 * worker pool (fw_cli.h), the tasks taken from the finished prefix of the
 * order, the store and environment a run of task-mutate opens once, the
 * repositories its operands name, and the run over them.
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

/* ---- a run over repositories ----------------------------------------------------- */

/* Says one diagnostic line: msg has neither the program's name nor a
 * newline. */
typedef void (*fw_task_say_fn)(void *arg, const char *msg);

/* The repositories of a run in the order given, each with the test
 * command and report format its record names ("" when it names none, and
 * for a directory operand).  Zero-initialise; fw_task_sources_release()
 * frees what it holds. */
struct fw_task_sources {
	struct fw_strlist repos, cmds, fmts; /* as many in each */
};

/* What an operand is: 1 a directory (a repository), 0 a record stream
 * ("-", standard input, or whatever stat(2) finds that is not a
 * directory), -1 nothing stat(2) finds (errno says why). */
int fw_task_operand_kind(const char *operand);

/*
 * Adds the repositories of the operands ops[0..n) to s, in order: a
 * directory is one; a record stream gives one for each record, its `repo`
 * with its own `test_cmd` and `report` (fw_task_source()).  Each fault is
 * said to warn(arg, msg) and the rest is still added: an operand that is
 * not there ("OPERAND: REASON"), a stream that cannot be opened ("FILE:
 * REASON"), a record without a `repo` string ("FILE: record N (byte B):
 * no 'repo' string"), a bad record (the same position and what is wrong;
 * the stream ends there).  Returns 0, or -1 after a fault or when memory
 * ran out (unsaid).
 */
int fw_task_sources_fill(struct fw_task_sources *s, int n, char *const *ops, fw_task_say_fn warn,
			 void *arg);

/* Frees what s holds and zeroes it.  NULL does nothing. */
void fw_task_sources_release(struct fw_task_sources *s);

/* A run of task-mutate over its repositories.  The caller sets the options
 * and the callbacks and zeroes the rest; fw_task_run_release() frees the
 * lines. */
struct fw_task_run {
	struct fw_task_opts t;    /* the run's, fw_task_run_open()'d; test_cmd NULL: each
				   * repository names its own; strategies 0: no mutations */
	uint64_t max;             /* tasks over all repositories; 0: no limit */
	uint64_t jobs;            /* candidates or commits validated at once (1..64) */
	int progress;             /* fw_progress_start()'s force, for the mutations */
	int history;              /* --strategy history, with h */
	struct fw_history_opts h; /* the history's own options (range, paths, dates, grep,
				   * limits, split, context); the rest is set per repository */
	fw_history_emit_fn emit;  /* each task record; nonzero stops that repository,
				   * emit having said why */
	void (*flush)(void *arg); /* after each repository run (may be NULL) */
	fw_task_say_fn warn;      /* the diagnostics */
	fw_task_say_fn note;      /* -v: why each candidate or commit was rejected, how the
				   * output of an unusable suite ends; NULL: unsaid */
	void *arg;                /* for the callbacks */
	/* what the run counts */
	struct fw_task_tally tally;
	struct fw_history_tally htally;
	struct fw_strlist lines;  /* with strategies, one per repository run: "REPO:
				   * candidates N, validated N" or "REPO: not used: WHY" */
};

/*
 * Runs the repositories of s in order until R->max tasks are kept over
 * all of them.  Each takes its own test command and report format over
 * R->t's: an unknown format ("REPO: unknown report format 'F' (junit, tap,
 * gotest)") or no command at all ("REPO: no test command (--test-cmd, or
 * a test_cmd field)") is said and the repository left out.  Then, each
 * with the tasks still wanted, its history (R->history, as
 * fw_task_run_history()) and its mutations (R->t.strategies, as
 * fw_task_repo_open(), fw_task_repo_validate() and
 * fw_task_repo_results()), each task given to emit, and flush.  What
 * stops a repository is said to warn ("REPO: MESSAGE", and the tests left
 * out of its baseline), except a scratch directory that cannot be made
 * (the history's: unsaid; the mutations': its line says so).  Returns 0,
 * or -1 when some repository was left out or failed.
 */
int fw_task_run_all(struct fw_task_run *R, const struct fw_task_sources *s);

/* Frees R's lines.  NULL does nothing. */
void fw_task_run_release(struct fw_task_run *R);

#endif
