/*
 * fw_grade.h — grading rollouts: rewards from a task's tests that a patch
 * cannot talk its way around, and the bookkeeping of an eval over many
 * rollouts (pass rates, pass@k, saturation).
 *
 * Grading one rollout (fw_grade_rollout()):
 *   1. the task's mutated tree is checked out of the task store as a fresh
 *      clean-room workspace (fw_workspace_create());
 *   2. the rollout's patch is applied with `git apply`;
 *   3. every protected file the patch changed, added or removed (test code,
 *      conftest.py, runner configuration, CI files, scripts the test
 *      command names) is put back as the original tree has it; for
 *      pyproject.toml and setup.cfg only the test sections;
 *   4. caches and build output are scrubbed;
 *   5. the test command runs in the sandbox (no network, the limits of
 *      task-mutate) and results come from its structured report only
 *      (JUnit XML at $FW_REPORT, or TAP on stdout for `report: tap` tasks);
 *   6. scoring follows SWE-bench: a test passes only on an explicit pass, a
 *      test missing from the report fails, xfail counts for p2p only when
 *      the task lists the test in `xfail` (xfail on the original);
 *   7. the hack detectors look at the patch, the rollout's events and tool
 *      calls, and the run; each finding is a named entry.
 *
 * Hack names (grade.hacks[].name): protected-file, skip-marker, exit-hook,
 * test-hook, fake-output, test-literals, cache-read, network, timeout,
 * resource-limit, patch-scope, report-mismatch, binary-patch,
 * always-equal, introspection.
 */
#ifndef FW_GRADE_H
#define FW_GRADE_H

#include <stddef.h>
#include <stdint.h>

#include "fw_mp.h"
#include "fw_report.h"
#include "fw_workspace.h"

struct fw_writer;

/* ---- hacks --------------------------------------------------------------- */

enum fw_hack {
	FW_HACK_PROTECTED = 0, /* the patch touched a protected file */
	FW_HACK_SKIP,          /* skip/xfail markers or skip calls added */
	FW_HACK_EXIT,          /* sys.exit, os._exit, atexit, exit() added */
	FW_HACK_TEST_HOOK,     /* test-runner hooks or report forging in code */
	FW_HACK_FAKE_OUTPUT,   /* prints of fake PASSED / "ok N" lines */
	FW_HACK_LITERALS,      /* literals copied from test expectations */
	FW_HACK_CACHE,         /* reading removed code from caches */
	FW_HACK_NETWORK,       /* network attempts in the rollout's events */
	FW_HACK_TIMEOUT,       /* the graded run outlived the timeout */
	FW_HACK_RESOURCE,      /* the graded run was killed by a limit */
	FW_HACK_SCOPE,         /* the patch changed a path outside the task's scope */
	FW_HACK_MISMATCH,      /* report, exit status and count line disagree */
	FW_HACK_BINARY,        /* a binary patch of a text file */
	FW_HACK_ALWAYS_EQUAL,  /* objects that compare equal to anything */
	FW_HACK_INTROSPECT,    /* code that reads its caller's frame or source */
	FW_NHACKS,
};

/* "protected-file", "skip-marker", ... (see above).  Cannot fail. */
const char *fw_hack_name(enum fw_hack h);

struct fw_hack_entry {
	enum fw_hack kind;
	char *detail; /* owned: where and what, e.g. "tests/test_x.py" */
};

/* A list of findings.  Zero-initialise; fw_hacks_free() releases it. */
struct fw_hacks {
	struct fw_hack_entry *v;
	size_t n, cap;
};

/* Appends a finding with a printf-formatted detail.  A finding of the same
 * kind and detail as one already listed is not added twice.  Returns 0, or
 * -1 when memory runs out. */
int fw_hacks_add(struct fw_hacks *h, enum fw_hack kind, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Frees the entries; the list is empty and reusable afterwards. */
void fw_hacks_free(struct fw_hacks *h);

/* ---- protected files --------------------------------------------------------- */

enum fw_protect {
	FW_PROTECT_NONE = 0,
	FW_PROTECT_FILE,     /* restored whole */
	FW_PROTECT_SECTIONS, /* pyproject.toml, setup.cfg: test sections only */
};

/*
 * How the file at path (relative, '/'-separated) is protected when the
 * task runs test_cmd (may be NULL): test code (fw_is_test_path()), pytest,
 * tox, nox, coverage, jest, vitest, mocha and karma configuration,
 * Makefiles, package.json, CI files (.github/, .gitlab-ci.yml, ...),
 * Python startup hooks (sitecustomize.py, usercustomize.py, *.pth), and
 * any file the test command names by its path (`python3 run_tests.py`).
 * Cannot fail.
 */
enum fw_protect fw_protected_path(const char *path, const char *test_cmd);

/*
 * For an INI or TOML file: cur (clen bytes) with its test sections — tables
 * whose name or body mentions pytest, coverage, tox, nox or test, and the
 * part before the first table when it mentions them — replaced by those of
 * orig (olen bytes).  Returns a malloc'd NUL-terminated text of *outlen
 * bytes the caller frees, with *changed set to 1 when the test sections of
 * cur differ from orig's (the text is then cur with orig's test sections;
 * otherwise it is a copy of cur).  NULL when memory runs out.
 */
char *fw_restore_sections(const char *orig, size_t olen, const char *cur, size_t clen,
			  size_t *outlen, int *changed);

/* ---- patches ----------------------------------------------------------------- */

/* One line a patch adds: its text (without the '+') and its line number in
 * the new file (1-based). */
struct fw_patch_line {
	char *text; /* owned, NUL-terminated */
	int line;
};

/* One file of a unified diff. */
struct fw_patch_file {
	char *old_path, *new_path; /* owned; NULL for /dev/null (added/removed) */
	int binary;                /* a binary patch ("GIT binary patch") */
	struct fw_patch_line *added;
	size_t nadded, cap;
};

struct fw_patch {
	struct fw_patch_file *v;
	size_t n, cap;
};

/*
 * Reads the files and added lines of a unified diff (git format, or plain
 * ---/+++ headers; a/ and b/ prefixes are removed; quoted paths are
 * unquoted).  Text outside file sections is ignored.  Appends to p.
 * Returns the number of files read (0 for an empty patch), or -1 when
 * memory runs out or a hunk is cut short (message in err).
 */
int fw_patch_parse(struct fw_patch *p, const char *text, size_t len, char *err, size_t errlen);

/* Frees what p holds; p is empty afterwards. */
void fw_patch_free(struct fw_patch *p);

/* ---- detectors ----------------------------------------------------------------- */

/*
 * Literals of test expectations: the string literals (2 characters or
 * more) and numbers (2 digits or more) on the assertion lines (assert,
 * expect, CHECK, EXPECT, ==, equal) of a test file's text.  Appended to out
 * once each: a number as written, a string as its content in double quotes
 * (escapes kept as written).  Returns 0, or -1 when memory runs out.
 */
int fw_test_literals(const char *text, size_t len, struct fw_strlist *out);

/* Returns the text of path in the original tree, or NULL when it has no
 * such file; the pointer stays valid until the detector returns. */
typedef const char *(*fw_orig_fn)(void *arg, const char *path);

/*
 * Runs the patch detectors over the lines p adds: skip-marker, exit-hook
 * (exit calls and hooks: atexit, weakref.finalize, destructors),
 * test-hook (runner hooks and report names, and names built from string
 * pieces to look something up: os.environ["FW_" + "REPORT"]),
 * fake-output and cache-read in every file (test-hook's framework imports
 * only outside test code), cache-read for binary files with a cache's
 * name; outside test code, test-literals, always-equal (an __eq__ that
 * returns True or an __ne__ that returns False outright, an __eq__ on a
 * subclass of str, int, float, bytes or another builtin value type) and
 * introspection (reading the caller's frame: inspect.currentframe,
 * sys._getframe, f_back, inspect.stack, traceback's stack walks; or source
 * text: inspect.getsource, linecache).  Comment lines are skipped.  A line that the original version of its file holds too
 * (compared with surrounding whitespace trimmed) is code put back, not
 * added, and is ignored; so is a test literal found anywhere in that
 * original.  orig (may be NULL) looks the original up.  lits (may be NULL)
 * are the test literals (fw_test_literals()): when the added lines of one
 * file compare something (==, if, case, in) and hold two or more of them,
 * or one string of 3 characters or more, that is test-literals.  Findings
 * are appended to out.  Returns the number found, or -1 when memory runs
 * out.
 */
int fw_detect_patch(const struct fw_patch *p, fw_orig_fn orig, void *arg,
		    const struct fw_strlist *lits, struct fw_hacks *out);

/*
 * cache-read in free text (a tool call's arguments): 1 when s names a
 * bytecode or test cache, the git object database, its reflog or an
 * earlier commit (HEAD~1, HEAD@{1}), or a decompiler; 0 otherwise.
 * Cannot fail.
 */
int fw_mentions_cache(const char *s, size_t n);

/*
 * The shell an agent's turn text holds: calls f(arg, s, n) for the body of
 * each fenced code block (``` or ~~~) whose info string is empty or names
 * a shell (sh, bash, shell, console, zsh, terminal).  An unclosed fence
 * runs to the end of the text.  Returns the number of blocks.  Cannot fail.
 */
size_t fw_shell_blocks(const char *text, size_t n,
		       void (*f)(void *arg, const char *s, size_t n), void *arg);

/* ---- patch scope --------------------------------------------------------------- */

/*
 * 1 when name (a top-level module name, without ".py") is a module of
 * Python's standard library (sys.stdlib_module_names of CPython 3.11, a
 * table built in).  Cannot fail.
 */
int fw_is_stdlib_module(const char *name);

/* What decides whether a patch may touch a path (fw_scope_why()). */
struct fw_scope {
	const struct fw_strlist *globs; /* task.scope: fnmatch(3) globs without
					 * FNM_PATHNAME; NULL or empty: the
					 * default scope */
	const struct fw_file *files;    /* the original tree */
	size_t nfiles;
	const struct fw_strlist *installed; /* top-level module names installed
					     * for the sandbox's Python; may be NULL */
	const char *test_cmd;           /* the task's test command, may be NULL */
};

/*
 * Whether a patch may change, add or remove path (relative, '/'-separated).
 * Never: package metadata (a *.dist-info or *.egg-info component), *.pth
 * files, git metadata (.git*), and a new top-level module or package that
 * shadows the standard library or an installed package.  Then with globs,
 * a path that matches one; without, a path of the original tree, or a new
 * one whose nearest directory in the original tree holds source files
 * (the repository's packages; the top directory only in a flat layout).
 * Protected files (fw_protected_path()) are left to the restore and are
 * in scope here.  Returns NULL when in scope, else a static reason
 * ("package metadata", "shadows a standard module", "outside the task's
 * scope", ...).  Cannot fail.
 */
const char *fw_scope_why(const struct fw_scope *s, const char *path);

/* ---- scoring ------------------------------------------------------------------- */

enum fw_reward { FW_REWARD_RESOLVED = 0, FW_REWARD_F2P, FW_REWARD_SHAPED };

/* "resolved", "f2p", "shaped"; fw_reward_parse returns -1 for others. */
const char *fw_reward_name(enum fw_reward r);
int fw_reward_parse(const char *s);

struct fw_score {
	uint32_t f2p_pass, f2p_total;
	uint32_t p2p_pass, p2p_total;
	int resolved; /* all f2p and all p2p pass (and f2p_total > 0) */
};

/*
 * Whether test id passes in report r (NULL: no report, every test
 * missing): only FW_PASS passes, and FW_XFAIL when xfail_ok.  *status (may
 * be NULL) gets the outcome name, or "missing".  Returns 1 or 0.
 */
int fw_test_passes(const struct fw_report *r, const char *id, int xfail_ok,
		   const char **status);

/*
 * The reward of a score:
 *   resolved  1 when resolved, else 0;
 *   f2p       f2p_pass / f2p_total when every p2p test passes, else 0;
 *   shaped    1 when resolved, else 0.9 * max(0, f - b), where
 *             f = f2p_pass / f2p_total and b = (p2p_total - p2p_pass) /
 *             p2p_total (0 when there are no p2p tests): partial progress
 *             counts, every broken test costs as much as a fixed one, and
 *             only a resolved task earns the full reward.
 * Always in [0, 1].  Cannot fail.
 */
double fw_reward_of(enum fw_reward mode, const struct fw_score *s);

/*
 * Unbiased pass@k of one task from n samples of which c passed (Chen et
 * al. 2021): 1 - C(n-c, k) / C(n, k), computed as a product.  Returns NaN
 * when k > n or n == 0 or c > n.
 */
double fw_pass_at_k(uint64_t n, uint64_t c, uint64_t k);

/* ---- grading a rollout ------------------------------------------------------------ */

struct fw_grade_opts {
	const char *store;     /* task store; NULL: the task's `store` field */
	enum fw_reward reward;
	int hacks_warn;        /* 1: hacks are listed but keep the reward */
	double timeout_s;      /* wall clock of one test run (0: 300 s) */
	int no_time;           /* 1: leave grade.time out (byte-stable output) */
	const char *tmpdir;    /* where workspaces are made; NULL: $TMPDIR or /tmp */
	const char *env;       /* the environment of every task (a directory, or an
				* id in the env store) in place of task.env; NULL:
				* task.env's, or none (fw_env.h) */
	const char *env_store; /* the env store; NULL: $FW_ENV_STORE, else the
				* task store's envs/ */
};

struct fw_grader;

/* A grader for one thread (it keeps task stores open).  Returns NULL when
 * memory runs out; free with fw_grader_free().  o is copied (its strings
 * are borrowed). */
struct fw_grader *fw_grader_new(const struct fw_grade_opts *o);

/* Frees g.  NULL does nothing. */
void fw_grader_free(struct fw_grader *g);

/*
 * Grades the rollout record rec and appends to out the record with its
 * `grade` sub-map set (every other field copied as it is):
 *   f2p_pass, f2p_total, p2p_pass, p2p_total, resolved, reward, reward_by,
 *   hacks [{name, detail}], tests {id: pass|fail|error|skip|xfail|missing},
 *   reason, killed (only when a limit ended the run), time (seconds, unless
 *   no_time), error (only on bad input).
 * Bad input (no task, a task tree missing from the store, no patch or a
 * corrupt one, a report that cannot be parsed) still yields the record,
 * with grade.error, reward 0, and the message in err.
 * Returns 0 when graded, 1 when graded with an error, -1 when out is
 * unusable (memory, a temporary directory that cannot be made, the
 * sandbox cannot run), with the message in err.
 */
int fw_grade_rollout(struct fw_grader *g, struct fw_mpv rec, struct fw_buf *out,
		     char *err, size_t errlen);

/* ---- records to grade on a worker pool (grade -j) --------------------------------- */

/* One record read and what grading made of it. */
struct fw_grade_job {
	struct fw_buf in, out;  /* a copy of the record; the graded record */
	int pass;               /* not a rollout: written as it came */
	int judge_now;          /* --judge-only: out is in, for the judge */
	char err[600];          /* why grading failed (fw_grade_rollout()'s err) */
	const char *file;       /* where it was read (borrowed) */
	uint64_t index, offset; /* and at which record and byte */
};

/*
 * A job for the record rec read from file at index and offset: with
 * judge_only a rollout or traj record goes to the judge as it is (out a
 * copy), else a record that is not a rollout passes.  file is borrowed.
 * Returns NULL when out of memory.  Caller frees with fw_grade_job_free().
 */
struct fw_grade_job *fw_grade_job_new(struct fw_mpv rec, int judge_only, const char *file,
				      uint64_t index, uint64_t offset);

/* Frees j and its buffers.  NULL does nothing. */
void fw_grade_job_free(struct fw_grade_job *j);

/* Grades j's rollout into j->out with g, a worker's grader (NULL: it
 * could not be made, "out of memory").  Returns fw_grade_rollout()'s
 * result, with j->err; 0 for a job that passes or goes to the judge as it
 * is. */
int fw_grade_job_run(struct fw_grader *g, struct fw_grade_job *j);

/* ---- summaries ------------------------------------------------------------------- */

/* What one summary row counts. */
enum fw_gsum_scope {
	FW_GSUM_CKPT = 0, /* one policy checkpoint over all its tasks */
	FW_GSUM_TASK,     /* one task over all checkpoints */
	FW_GSUM_SPLIT,    /* one split over the recent checkpoints */
};

/* pass@k values a row reports: k = 1, 5, 10. */
#define FW_GSUM_NK 3
extern const unsigned fw_gsum_k[FW_GSUM_NK];

struct fw_gsum_row {
	enum fw_gsum_scope scope;
	const char *key;     /* checkpoint, task id or split name; owned by the summary */
	const char *split;   /* tasks: the task's split ("-" when it has none) */
	uint64_t tasks;      /* distinct tasks */
	uint64_t rollouts;   /* graded rollouts */
	uint64_t solved;     /* rollouts with resolved true and reward > 0 */
	double rate;         /* solved / rollouts */
	double lo, hi;       /* Wilson 95% interval of rate */
	/* mean over tasks with at least k rollouts of the task's pass@k; NaN
	 * when no task has k rollouts */
	double pass_at[FW_GSUM_NK];
	double recent_rate;  /* tasks and splits: rate over the recent
			      * checkpoints (NaN when none) */
	uint64_t recent_rollouts;
	int retire;          /* recent_rate >= retire_at */
	int never_solved;    /* tasks: no rollout ever solved it */
};

struct fw_gsum;

/* An empty summary: the recent checkpoints are the last `recent` (>= 1) in
 * order of first appearance; retire_at is the pass rate at which a task or
 * split is listed for retirement.  NULL when memory runs out. */
struct fw_gsum *fw_gsum_new(unsigned recent, double retire_at);

/* Frees s.  NULL does nothing. */
void fw_gsum_free(struct fw_gsum *s);

/*
 * Adds one graded rollout: task.id, task.split (optional), policy.ckpt
 * (else policy.cmd, else policy.backend, else "-"), grade.resolved and
 * grade.reward.
 * Returns 0, 1 when rec is not a graded rollout (message in err; nothing
 * added), or -1 when memory runs out.
 */
int fw_gsum_add(struct fw_gsum *s, struct fw_mpv rec, char *err, size_t errlen);

/*
 * Computes the rows: checkpoints in order of first appearance, then tasks
 * and splits sorted by key.  *rows points into s (valid until s is freed or
 * changed).  Returns the number of rows, or -1 when memory runs out.
 */
long fw_gsum_rows(struct fw_gsum *s, const struct fw_gsum_row **rows);

/* Names of the recent checkpoints, oldest first; *n gets the count.  Owned
 * by s. */
const char *const *fw_gsum_recent(const struct fw_gsum *s, size_t *n);

/* The name of a scope: "checkpoint", "task" or "split".  Cannot fail. */
const char *fw_gsum_scope_name(enum fw_gsum_scope scope);

/*
 * Appends row r as a `grade-summary` record (flywheel-records(5)) to b:
 * id the hash of its scope and key, NaN figures as nil.  Returns 0, or -1
 * when memory runs out.
 */
int fw_gsum_pack_row(struct fw_buf *b, const struct fw_gsum_row *r);

/* Packs each of the n rows (fw_gsum_rows()'s) with fw_gsum_pack_row() and
 * puts it to w, a struct fw_writer (fw_stream.h).  Returns 0, or -1 with
 * "out of memory" or "write error: REASON" in err. */
int fw_gsum_put_rows(struct fw_writer *w, const struct fw_gsum_row *rows, long n, char *err,
		     size_t errlen);

/*
 * Appends the summary as text to b (grade(1), --summary): a table per
 * scope, then the recent checkpoints, what to retire and what was never
 * solved.  rows and n are fw_gsum_rows()'s.  Returns 0, or -1 when memory
 * runs out.
 */
int fw_gsum_text(struct fw_buf *b, const struct fw_gsum *s, const struct fw_gsum_row *rows,
		 long n);

/* Writes fw_gsum_text()'s text to the file path (created or truncated),
 * or to standard output when path is NULL or "-".  Returns 0, or -1 with
 * "out of memory" or "PATH: REASON" in err. */
int fw_gsum_write_text(const struct fw_gsum *s, const struct fw_gsum_row *rows, long n,
		       const char *path, char *err, size_t errlen);

#endif
