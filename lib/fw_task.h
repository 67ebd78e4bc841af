/*
 * fw_task.h — task records and what makes a mutation a valid task.
 *
 * A `task` record (flywheel-records(5)) is packed here, one way for every
 * strategy: the mutations of task-mutate and the commits of a history
 * (fw_history.h).  The validation of a mutation is the definition of a
 * valid task: the original suite runs twice in the clean room (tests that
 * differ are flaky and left out); a candidate is kept when its mutated tree
 * holds no trace of the removed code (tree, workspace, git objects), some
 * tests that passed now fail (f2p), the others keep passing (p2p), and a
 * second run of the untouched workspace — an empty patch — fails the same
 * tests.
 *
 * The caller owns the concurrency: fw_task_repo_open() prepares one
 * repository (its tree in the store, the baseline, the candidates in the
 * order --seed gives), then any number of threads call fw_task_validate()
 * on distinct candidates, each with its own store handle.
 */
#ifndef FW_TASK_H
#define FW_TASK_H

#include <stddef.h>
#include <stdint.h>

#include "fw_base.h"
#include "fw_env.h"
#include "fw_mp.h"
#include "fw_mutate.h"
#include "fw_report.h"

#include "fw_store.h"

/* ---- the record --------------------------------------------------------------- */

/* One entry of a history task's context[]. */
struct fw_task_context {
	const char *kind, *name, *blob; /* blob: its id in the task store */
	uint64_t size;                  /* bytes */
};

/* The fields of a task record; every string is borrowed. */
struct fw_task {
	const char *id, *repo, *base, *store, *orig_tree, *tree, *strategy;
	const struct fw_target *targets; /* ntargets, main target first */
	size_t ntargets;
	const char *prompt, *test_cmd;
	enum fw_report_format fmt;       /* packed as `report` */
	const struct fw_strlist *f2p, *p2p, *xfail;
	const char *solution, *split;
	enum fw_lang lang;
	const char *created, *commit;    /* history tasks; NULL: not packed */
	const char *env;                 /* the environment's id; NULL: none */
	int with_context;                /* pack context[] (history tasks) */
	const struct fw_task_context *context;
	size_t ncontext;
};

/*
 * Packs t as one task record (a map) with pk: kind, id, v, repo, base,
 * store, orig_tree, tree, strategy, targets, prompt, test_cmd, report, f2p,
 * p2p, xfail, solution, split, lang, then created and commit when set, env
 * when set, context when with_context.  The same fields give the same
 * bytes.  Returns 0, or -1 when a packer failed (out of memory); what was
 * packed then is not a whole record.
 */
int fw_task_pack(msgpack_packer *pk, const struct fw_task *t);

/*
 * The split of the task with id: id's 64-bit hash as a uniform number in
 * [0, 1) against the fractions split[0..3) (train, eval, private; their
 * sum > 0).  split NULL: "private".  Returns a static string; cannot fail.
 */
const char *fw_task_split(const double *split, const char *id);

/* Parses "train=F,eval=F,private=F" (any of them, any order; F >= 0, sum
 * > 0) into out.  Returns 0, or -1 (out unchanged) on a bad string or
 * when memory runs out. */
int fw_task_split_parse(const char *s, double out[3]);

/*
 * What a record of task-mutate's input names: its `repo` (a path) into
 * *repo, and its own `test_cmd` and `report` into *cmd and *fmt ("" when
 * absent); all three malloc'd, the caller frees them.  Returns 0; 1 when
 * rec has no `repo` string (nothing allocated); -1 when memory runs out.
 */
int fw_task_source(struct fw_mpv rec, char **repo, char **cmd, char **fmt);

/* ---- validating mutations ---------------------------------------------------------- */

/* Why a candidate was not kept; the order is the summary's. */
enum fw_task_reason {
	FW_TASK_NOTHING = 0, /* nothing to remove (empty or trivial body) */
	FW_TASK_LEAK,        /* removed code still present (duplicate, cache, object) */
	FW_TASK_BROKEN,      /* mutated suite reported no results or no passing test */
	FW_TASK_TIMEOUT,     /* mutated suite hit the timeout or a resource limit */
	FW_TASK_NO_F2P,      /* no passing test fails after the mutation */
	FW_TASK_EMPTY_PATCH, /* a rerun without any change passes the failing tests */
	FW_TASK_NREASONS,
	FW_TASK_KEPT = FW_TASK_NREASONS,
	FW_TASK_ERROR,       /* store, workspace or sandbox failure: stops the run */
};

/* "nothing-to-remove", "leak", "broken", "timeout", "no-f2p",
 * "empty-patch-passes" for r < FW_TASK_NREASONS, "kept", "error".  Cannot
 * fail. */
const char *fw_task_reason_name(enum fw_task_reason r);

/* What the validation of one repository's mutations needs. */
struct fw_task_opts {
	const char *test_cmd;
	enum fw_report_format fmt;
	enum fw_lang lang;          /* FW_LANG_UNKNOWN: every language */
	unsigned strategies;        /* bit per enum fw_strategy */
	double timeout_s;           /* of one suite run */
	uint64_t seed;              /* the order candidates are tried in */
	uint64_t shard_k, shard_n;  /* keep candidates whose key hashes to K mod N */
	double split[3];            /* train, eval, private */
	int allow_dirty;            /* use HEAD of a work tree with changes */
	const char *store;          /* the task store's path */
	const char *store_abs;      /* the same, absolute (task.store) */
	const struct fw_env *env;   /* --env, or NULL: the repository's recipe */
	const char *env_store;      /* where environments are looked up */
};

/* One candidate mutation and, once validated, its outcome. */
struct fw_task_cand {
	enum fw_strategy strategy;
	size_t sym;          /* index into the symbols (delete-file: the file's first) */
	const char *path;    /* the file (points into the symbols) */
	size_t helpers[16];  /* delete-feature: the private helpers */
	size_t nh;
	int done;            /* set by the caller once validated */
	enum fw_task_reason reason;
	char detail[512];    /* why it was not kept */
	struct fw_buf rec;   /* FW_TASK_KEPT: the task record */
};

/* One repository prepared for validation.  Fill with fw_task_repo_open(),
 * empty with fw_task_repo_release(). */
struct fw_task_repo {
	const struct fw_task_opts *o;
	const char *repo;
	char tree[FW_OID_HEX], base[FW_OID_HEX]; /* its HEAD tree and commit */
	const char *tmp;             /* the caller's scratch directory */
	struct fw_symbols syms;
	struct fw_text *files;       /* source texts, owned */
	size_t nfiles;
	struct fw_report *base_pass; /* tests passing (or xfail) in both original runs */
	const struct fw_env *env;    /* where the suites run; NULL: the system */
	struct fw_env own_env;       /* the one its flywheel.env names */
	size_t nflaky, nbad;         /* tests left out: they differ, or fail */
	char why[600];               /* why the repository gives no candidates */
	char msg[512];               /* the same, as a diagnostic */
	int show_tail;               /* tail says why the original suite is unusable */
	char tail[8192];             /* the end of the last original run's output */
	struct fw_task_cand *c;      /* candidates, in the order to try them */
	size_t nc;
};

/*
 * The environment repo's suites run in: given (an --env), else the one
 * the repository's FW_ENV_RECIPE names, looked up in env_store and opened
 * into own, else none (*env = NULL).  Returns 0, or -1 with the reason in
 * msg (the recipe is bad, or its environment is not built).
 */
int fw_task_repo_env(const struct fw_env *given, const char *env_store, const char *repo,
		     struct fw_env *own, const struct fw_env **env, char *msg, size_t msglen);

/*
 * Prepares repo (a git work tree) into j: imports HEAD into the store at
 * o->store (keeping base/TREE), opens its environment, lists its functions
 * with ctags in a workspace under tmp (an existing directory that outlives
 * j), reads its source texts, runs the original suite twice and keeps the
 * tests that pass both times, then lists the candidates of o->strategies
 * (o->shard_n > 1: this shard's only) shuffled by o->seed.  j and o must
 * outlive each other's use.  Returns 0; 1 when the repository cannot be
 * used (j->why "REASON (MESSAGE)", j->msg the message; j->show_tail when
 * j->tail holds the test command's own account); -1 when memory runs out.
 * Either way fw_task_repo_release(j) frees what it holds.
 */
int fw_task_repo_open(struct fw_task_repo *j, const struct fw_task_opts *o, const char *repo,
		      const char *tmp);

/* Frees what j holds and zeroes it.  NULL does nothing. */
void fw_task_repo_release(struct fw_task_repo *j);

/*
 * Validates candidate idx of j with store s (a handle of the caller's
 * thread): builds the mutation, writes the mutated tree to s, audits it,
 * makes a workspace under j->tmp, runs the suite on it twice and, when it
 * is a task, keeps tasks/ID in s and packs the record into j->c[idx].rec.
 * Distinct candidates may be validated at once from different threads.
 * Returns FW_TASK_KEPT, a reason it was not kept, or FW_TASK_ERROR (the
 * store, the workspace or the sandbox failed); j->c[idx].detail says why.
 */
enum fw_task_reason fw_task_validate(struct fw_task_repo *j, struct fw_store *s, size_t idx);

#endif
