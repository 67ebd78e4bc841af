/*
 * fw_history.h — tasks from a repository's own history: "reach the fix we
 * made", with the context an engineer had.
 *
 * A commit that changes both code and tests becomes a task.  Its tree
 * (the oracle) is the commit's; the task tree is the parent's tree with
 * the commit's test changes applied; the solution is the rest of the
 * commit (its change to everything that is not a test), as a diff from the
 * task tree to the commit's tree; the prompt is the commit message.  The
 * failing and passing tests come from running the suite in the clean room
 * twice on each tree, as for the mutation strategies: tests that differ
 * between two runs are excluded, a second run of the untouched task tree
 * must fail the same tests, and the workspace is audited.  The audit
 * proves that no future is in it: every object of the workspace's git
 * database must be an object of the task tree or its one root commit, and
 * no file holds a line the solution adds that the task tree lacks.
 *
 * A task may carry a context bundle: files an engineer had beside the
 * repository (a production log, a chat export, an issue thread, docs),
 * each with a kind and a name.  They are kept in the task store as blobs,
 * listed in the task's context[] and its prompt, and mounted read-only at
 * FW_CONTEXT_DIR in the clean room by fw_context_mount().
 */
#ifndef FW_HISTORY_H
#define FW_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#include "fw_mp.h"
#include "fw_report.h"

struct fw_env;
struct fw_store;

/* Where a task's context files appear inside the clean room (read-only). */
#define FW_CONTEXT_DIR "/context"

/* ---- dates ------------------------------------------------------------------ */

/* Bytes of "YYYY-MM-DDTHH:MM:SSZ" with its NUL. */
#define FW_TIME_LEN 21

/*
 * Parses n bytes of an ISO 8601 date or date-time: "2024-03-01",
 * "2024-03-01T12:30", "2024-03-01T12:30:05Z", "2024-03-01 12:30:05+02:00",
 * fractions of a second ignored; no zone means UTC.  *t receives seconds
 * since 1970-01-01 UTC.  Returns 0, or -1 when s is no such date.
 */
int fw_time_parse(const char *s, size_t n, int64_t *t);

/* Writes t (seconds since the epoch) as "YYYY-MM-DDTHH:MM:SSZ" into out
 * (FW_TIME_LEN bytes).  Cannot fail. */
void fw_time_format(int64_t t, char *out);

/* ---- context bundles ------------------------------------------------------------ */

/* One file of a bundle. */
struct fw_context_file {
	char *kind;  /* "log", "chat", "issue", "doc", ...: a lowercase word, owned */
	char *name;  /* its name under FW_CONTEXT_DIR: no '/', owned */
	char *path;  /* the host file, owned */
};

/* The bundles of a context directory. */
struct fw_context_map;

/*
 * Reads DIR/context.json: an object whose keys are commits (their full id,
 * or a prefix of at least 7 hex digits) and whose values are arrays of
 * {"kind": K, "name": N, "path": P} ("path" relative to DIR; default N).
 * Checks that every file is readable.  Returns the map, which the caller
 * frees with fw_context_free(), or NULL with a message in err.
 */
struct fw_context_map *fw_context_load(const char *dir, char *err, size_t errlen);

/* Frees m.  NULL does nothing. */
void fw_context_free(struct fw_context_map *m);

/* The bundle of commit commit_hex (40 hex digits): *n files, borrowed from
 * m, or NULL (with *n = 0) when it has none.  m may be NULL. */
const struct fw_context_file *fw_context_find(const struct fw_context_map *m,
					      const char *commit_hex, size_t *n);

/*
 * What a run in the clean room needs for a task's context: the bundle
 * written to a temporary directory and the read-only binds to give the
 * sandbox.  Fill with fw_context_mount(), release with
 * fw_context_unmount().
 */
struct fw_context_mount {
	char dir[4096];     /* the host directory, "" when the task has none */
	char bind[4200];    /* "DIR:" FW_CONTEXT_DIR */
	const char **binds; /* NULL-terminated: the caller's mounts, then bind */
};

/*
 * Writes the files of task.context[] (their blobs in store s) into a new
 * directory under $TMPDIR, read-only, and sets m->binds to the caller's
 * mounts (NULL-terminated, may be NULL) followed by the bind of that
 * directory at FW_CONTEXT_DIR.  A task without context[] gets m->binds
 * equal to mounts and no directory.  Returns 0, or -1 with a message in err
 * (a blob missing from the store, a bad name, a write failure); m is then
 * safe to unmount.
 */
int fw_context_mount(struct fw_context_mount *m, struct fw_store *s, struct fw_mpv task,
		     const char *const *mounts, char *err, size_t errlen);

/* Removes the directory and frees what m holds.  Safe on a zeroed m. */
void fw_context_unmount(struct fw_context_mount *m);

/* ---- the strategy ------------------------------------------------------------------- */

/* What became of a commit; the order is the summary's. */
enum fw_history_reason {
	FW_HIST_MERGE = 0,    /* a merge commit (more than one parent) */
	FW_HIST_ROOT,         /* the first commit: no parent to start from */
	FW_HIST_FILTERED,     /* left out by --since, --until, --grep, --path, --shard */
	FW_HIST_NO_TESTS,     /* changes no test file (below --test-path) */
	FW_HIST_NO_CODE,      /* changes tests but no code */
	FW_HIST_TOO_LARGE,    /* more code files or lines than the limits */
	FW_HIST_BROKEN,       /* the suite reports nothing passing at the commit */
	FW_HIST_BUILD_FAILED, /* the suite reports nothing passing on the task tree */
	FW_HIST_TIMEOUT,      /* a run hit the timeout or a resource limit */
	FW_HIST_NO_F2P,       /* no test passing at the commit fails on the task tree */
	FW_HIST_FLAKY,        /* the only such tests differ between two runs */
	FW_HIST_EMPTY_PATCH,  /* a second run of the task tree passes them */
	FW_HIST_LEAK,         /* the workspace or the context holds the solution */
	FW_HIST_NREASONS,
	FW_HIST_KEPT = FW_HIST_NREASONS,
};

/* "merge", "root", "filtered", "no-tests", "no-code", "too-large",
 * "broken", "build-failed", "timeout", "no-f2p", "flaky",
 * "empty-patch-passes", "leak". */
const char *fw_history_reason_name(enum fw_history_reason r);

struct fw_history_opts {
	const char *test_cmd;           /* sh -c in the workspace */
	enum fw_report_format fmt;
	double timeout_s;               /* per suite run */
	const char *rev;                /* "A..B", "B", or NULL: HEAD */
	const char *const *paths;       /* keep commits changing code below one of
					 * these prefixes; NULL-terminated, or NULL */
	const char *const *test_paths;  /* keep commits changing tests below one of
					 * these prefixes (other tests still go into
					 * the task tree); NULL-terminated, or NULL */
	int64_t since, until;           /* commit time bounds, inclusive; 0: none */
	const char *grep;               /* PCRE2 pattern the message must match
					 * (caseless), or NULL */
	uint64_t max_files, max_lines;  /* code files / lines changed; 0: no limit */
	uint64_t max;                   /* tasks to make; 0: no limit */
	uint64_t shard_k, shard_n;      /* keep commits whose id hashes to K mod N */
	size_t jobs;                    /* commits validated at once (>= 1) */
	const double *split;            /* train, eval, private fractions, or NULL:
					 * every task private */
	const char *store;              /* the task store (a path) */
	const char *store_abs;          /* the same, absolute, for the records */
	const char *tmp;                /* an existing directory for workspaces */
	const struct fw_context_map *context; /* bundles, or NULL */
	const struct fw_env *env;       /* the environment the suites run in
					 * (fw_env.h), named in task.env; NULL:
					 * the system alone */
};

struct fw_history_tally {
	uint64_t scanned;               /* commits walked */
	uint64_t candidates;            /* commits validated in the clean room */
	uint64_t kept;
	uint64_t why[FW_HIST_NREASONS];
};

/* Receives each task record (n bytes of msgpack); returns 0, or -1 to stop
 * the run. */
typedef int (*fw_history_emit_fn)(void *ctx, const void *rec, size_t n);

/* Told about each commit that did not become a task (may be NULL). */
typedef void (*fw_history_note_fn)(void *ctx, const char *commit_hex, const char *subject,
				   enum fw_history_reason r, const char *detail);

/*
 * Walks the commits of o->rev in the git repository at repo (newest first,
 * as git log), copies the trees of the candidates into o->store and
 * validates them with o->jobs threads.  Tasks are emitted in commit order;
 * with o->max, the first o->max tasks of that order, whatever o->jobs.
 * Counts are added to t.  Workspaces are made and removed below o->tmp.
 * Returns 0, or -1 with a message in err (not a repository, a bad
 * revision or pattern, a store, workspace or sandbox failure, emit
 * stopping the run); the tasks emitted before a failure stand.
 */
int fw_history_run(const struct fw_history_opts *o, const char *repo, fw_history_emit_fn emit,
		   fw_history_note_fn note, void *ctx, struct fw_history_tally *t,
		   char *err, size_t errlen);

#endif
