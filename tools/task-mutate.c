/*
 * task-mutate — git repositories in, validated `task` records out.
 *
 * For each repository: import its HEAD tree into the task store, run its
 * test suite twice in the clean room (tests that differ are flaky), find
 * functions with ctags, and for every candidate mutation check that some
 * passing tests now fail (f2p), that the rest keep passing (p2p), that an
 * empty patch fails, and that no file or object of the workspace holds
 * the removed code.  See task-mutate(1).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fw_base.h"
#include "fw_cli.h"
#include "fw_env.h"
#include "fw_history.h"
#include "fw_mp.h"
#include "fw_mutate.h"
#include "fw_report.h"
#include "fw_store.h"
#include "fw_stream.h"
#include "fw_workspace.h"

static const char usage_text[] =
	"usage: task-mutate --test-cmd CMD [--strategy S ...]\n"
	"                   [--report junit | tap | gotest] [--lang L] [--store DIR]\n"
	"                   [--max N] [--seed S] [-j N] [--shard K/N]\n"
	"                   [--split train=F,eval=F,private=F] [--timeout SEC]\n"
	"                   [--env DIR | ID] [--env-store DIR]\n"
	"                   [--allow-dirty] [-o OUT] [-z] [-v] [--progress] REPO ...\n"
	"       task-mutate --strategy history --test-cmd CMD [--range A..B] [--path P ...]\n"
	"                   [--test-path P ...] [--since DATE] [--until DATE] [--grep RE]\n"
	"                   [--max-files N] [--max-lines N] [--context DIR] [option ...]\n"
	"                   REPO ...\n"
	"       task-mutate -h | --help | --version\n";

static const struct fw_opt_doc options[] = {
	{ "--test-cmd CMD", "the command that runs the suite" },
	{ "--strategy S", "which mutations to try (history: tasks from the commit history)" },
	{ "--report junit | tap | gotest", "how the suite reports results (default junit)" },
	{ "--lang L", "mutate only files of language L" },
	{ "--store DIR", "the task store, a bare git repository created when missing" },
	{ "--max N", "stop after N validated tasks (over all repositories)" },
	{ "--seed S", "order in which candidates are tried (default 0)" },
	{ "-j N", "validate N candidates at a time (default 1)" },
	{ "--shard K/N", "try only the candidates whose key hashes to K modulo N" },
	{ "--split train=F,eval=F,private=F", "weights of the splits a task falls in by the hash of its id" },
	{ "--timeout SEC", "wall-clock limit of one suite run (default 300)" },
	{ "--env DIR | ID", "run every suite in this environment" },
	{ "--env-store DIR", "where environments are kept" },
	{ "--allow-dirty", "accept a work tree with uncommitted changes" },
	{ "-o OUT", "write records to OUT (replaced atomically) instead of standard output" },
	{ "-z", "compress the output with zstd" },
	{ "-v", "say on standard error why each rejected candidate was rejected" },
	{ "--progress", "a progress meter on standard error even when it is not a terminal" },
	{ "--range A..B", "history: the commits reachable from B and not from A" },
	{ "--path P", "history: only commits that change code below P" },
	{ "--test-path P", "history: only commits that change tests below P" },
	{ "--since DATE", "history: only commits dated at or after DATE" },
	{ "--until DATE", "history: only commits dated at or before DATE" },
	{ "--grep RE", "history: only commits whose message matches RE, ignoring case" },
	{ "--max-files N", "history: only commits that change at most N code files" },
	{ "--max-lines N", "history: only commits that change at most N code lines" },
	{ "--context DIR", "history: attach the context bundles of DIR/context.json" },
	{ "-h, --help", "print this help and exit" },
	{ "--version", "print the version and exit" },
	{ NULL, NULL },
};

/* Why a candidate was not kept; the order is the summary's. */
enum reason {
	R_NOTHING = 0, /* nothing to remove (empty or trivial body) */
	R_LEAK,        /* removed code still present (duplicate, cache, object) */
	R_BROKEN,      /* mutated suite reported no results or no passing test */
	R_TIMEOUT,     /* mutated suite hit the timeout or a resource limit */
	R_NO_F2P,      /* no passing test fails after the mutation */
	R_EMPTY_PATCH, /* a rerun without any change passes the failing tests */
	R_COUNT,
	R_KEPT = R_COUNT,
	R_ERROR,       /* store, workspace or sandbox failure: stops the run */
};

static const char *const reason_names[R_COUNT] = {
	"nothing-to-remove", "leak", "broken", "timeout", "no-f2p", "empty-patch-passes",
};

struct opts {
	const char *test_cmd;
	unsigned strategies; /* bit per enum fw_strategy */
	enum fw_report_format fmt;
	enum fw_lang lang;
	const char *store;
	uint64_t max;
	uint64_t seed;
	uint64_t jobs;
	uint64_t shard_k, shard_n;
	double split[3]; /* train, eval, private */
	double timeout;
	int allow_dirty, verbose, progress, level;
	const char *out;
	/* --strategy history */
	int history, split_given;
	struct fw_history_opts h;
	const char *paths[65], *test_paths[65];
	size_t npaths, ntest_paths;
	const char *context;
	/* --env: the environment of every repository; NULL: a repository's
	 * flywheel.env recipe names one, or none */
	const char *env_arg;
	const struct fw_env *env;
	const char *env_store;
};

struct cand {
	enum fw_strategy strategy;
	size_t sym;          /* index into syms (delete-file: first symbol of the file) */
	const char *path;    /* the file (points into syms) */
	size_t helpers[16];
	size_t nh;
	/* results */
	int done;
	enum reason reason;
	char detail[512];
	struct fw_buf rec;
};

/* One repository's run. */
struct job {
	const struct opts *o;
	const char *repo, *store_abs;
	char tree[FW_OID_HEX], base[FW_OID_HEX];
	char tmp[4096];
	struct fw_symbols syms;
	struct fw_text *files;
	size_t nfiles;
	struct fw_report *base_pass; /* tests passing (or xfail) in both original runs */
	const struct fw_env *env;    /* where the suites run; NULL: the system */
	struct fw_env own_env;       /* the one its flywheel.env names */
	char why[600];               /* why the repository gave no candidates */
	char tail[8192];             /* the end of the last original run's output */
	struct cand *c;
	size_t nc;
	size_t next;
	pthread_mutex_t mu;
	struct fw_progress prog;
	size_t ndone;
	int fatal;
	char fatal_msg[512];
};

/* The temporary directory of the repository being worked on, so that a
 * signal does not leave workspaces behind. */
static pthread_mutex_t tmp_mu = PTHREAD_MUTEX_INITIALIZER;
static char tmp_now[4096];

static const char *split_of(const struct opts *o, const char *id)
{
	uint64_t h = fw_hash64(id, strlen(id));
	double u = (double)(h >> 11) / 9007199254740992.0, sum = o->split[0] + o->split[1] +
							    o->split[2];
	u *= sum;
	if (u < o->split[0])
		return "train";
	if (u < o->split[0] + o->split[1])
		return "eval";
	return "private";
}

/* Does the path's file text, for the helper search and the mutations. */
static const struct fw_text *text_of(const struct job *j, const char *path)
{
	for (size_t i = 0; i < j->nfiles; i++)
		if (strcmp(j->files[i].path, path) == 0)
			return &j->files[i];
	return NULL;
}

static int failing(const struct fw_report *r, const char *id)
{
	const struct fw_test_result *t = fw_report_find(r, id);
	return !t || t->outcome == FW_FAIL || t->outcome == FW_ERROR;
}

static int same(const struct fw_report *r, const char *id, enum fw_outcome o)
{
	const struct fw_test_result *t = fw_report_find(r, id);
	return t && t->outcome == o;
}

static enum reason reject(struct cand *c, enum reason r, const char *fmt, const char *a)
{
	snprintf(c->detail, sizeof c->detail, fmt, a);
	return r;
}

/* Builds the mutation of candidate c.  Returns 0, 1 (nothing to remove)
 * or -1. */
static int build_mutation(struct job *j, struct cand *c, struct fw_mutation *m)
{
	const struct fw_text *t = text_of(j, c->path);
	if (!t)
		return -1;
	const struct fw_symbol *sym = &j->syms.v[c->sym];
	switch (c->strategy) {
	case FW_STUB_BODY:
		return fw_mutate_stub(sym, t->data, t->len, m);
	case FW_DELETE_FUNCTION:
		return fw_mutate_delete(FW_DELETE_FUNCTION, sym, NULL, 0, t->data, t->len, m);
	case FW_DELETE_FEATURE: {
		const struct fw_symbol *h[16];
		for (size_t i = 0; i < c->nh; i++)
			h[i] = &j->syms.v[c->helpers[i]];
		return fw_mutate_delete(FW_DELETE_FEATURE, sym, h, c->nh, t->data, t->len, m);
	}
	case FW_DELETE_FILE: {
		size_t a = c->sym, b = a;
		while (b < j->syms.n && strcmp(j->syms.v[b].path, c->path) == 0)
			b++;
		return fw_mutate_delete_file(c->path, t->data, t->len, &j->syms.v[a], b - a, m);
	}
	default:
		return -1;
	}
}

static enum reason validate(struct job *j, struct fw_store *s, size_t idx)
{
	const struct opts *o = j->o;
	struct cand *c = &j->c[idx];
	struct fw_mutation m = { 0 };
	struct fw_audit *audit = NULL;
	struct fw_report *m1 = fw_report_new(), *m2 = fw_report_new();
	struct fw_strlist f2p = { 0 }, p2p = { 0 }, xfail = { 0 }, leaks = { 0 };
	char err[512] = "", mut[FW_OID_HEX], ws[4200], detail[512] = "";
	char *patch = NULL, *prompt = NULL;
	enum reason r = R_ERROR;
	int k;

	snprintf(ws, sizeof ws, "%s/c%zu", j->tmp, idx);
	k = build_mutation(j, c, &m);
	if (k == 1) {
		r = reject(c, R_NOTHING, "%s", "no code to remove");
		goto out;
	}
	if (k < 0 || !m1 || !m2) {
		r = reject(c, R_ERROR, "%s", "cannot build the mutation");
		goto out;
	}
	struct fw_edit ed = { m.path, m.data, m.len };
	if (fw_store_edit(s, j->tree, &ed, 1, mut, err, sizeof err) < 0) {
		r = reject(c, R_ERROR, "%s", err);
		goto out;
	}
	if (strcmp(mut, j->tree) == 0) {
		r = reject(c, R_NOTHING, "%s", "the mutation changes nothing");
		goto out;
	}
	audit = fw_audit_new();
	if (!audit || fw_audit_removed(audit, m.removed, strlen(m.removed)) < 0 ||
	    fw_audit_kept_tree(audit, s, mut, err, sizeof err) < 0) {
		r = reject(c, R_ERROR, "%s", err[0] ? err : "out of memory");
		goto out;
	}
	if (fw_audit_kept_share(audit) >= 0.5) {
		r = reject(c, R_LEAK, "%s", "the removed code is still in the tree");
		goto out;
	}
	if (fw_workspace_create(s, mut, ws, NULL, NULL, err, sizeof err) < 0) {
		r = reject(c, R_ERROR, "%s", err);
		goto out;
	}
	k = fw_audit_workspace(audit, ws, &leaks, err, sizeof err);
	if (k != 0) {
		r = k < 0 ? reject(c, R_ERROR, "%s", err)
			  : reject(c, R_LEAK, "%s", leaks.v[0]);
		goto out;
	}

	/* Run 1: the mutated suite must report results and break something. */
	k = fw_suite_run_env(ws, o->test_cmd, o->fmt, o->timeout, j->env, m1, detail,
			     sizeof detail, NULL, 0, err, sizeof err);
	if (k < 0) {
		r = reject(c, R_ERROR, "%s", err);
		goto out;
	}
	if (k == FW_SUITE_TIMEOUT) {
		r = reject(c, R_TIMEOUT, "%s", detail);
		goto out;
	}
	if (k == FW_SUITE_NO_REPORT || fw_report_count(m1, FW_PASS) == 0) {
		r = reject(c, R_BROKEN, "%s", k ? detail : "no test passes after the mutation");
		goto out;
	}
	size_t nf1 = 0;
	for (size_t i = 0; i < j->base_pass->n; i++)
		nf1 += j->base_pass->tests[i].outcome == FW_PASS &&
		       failing(m1, j->base_pass->tests[i].id);
	if (nf1 == 0) {
		r = reject(c, R_NO_F2P, "%s", "no passing test fails after the mutation");
		goto out;
	}
	/* Run 2: grading an empty patch — the same workspace, untouched —
	 * must fail the same tests. */
	k = fw_suite_run_env(ws, o->test_cmd, o->fmt, o->timeout, j->env, m2, detail,
			     sizeof detail, NULL, 0, err, sizeof err);
	if (k < 0) {
		r = reject(c, R_ERROR, "%s", err);
		goto out;
	}
	if (k == FW_SUITE_TIMEOUT) {
		r = reject(c, R_TIMEOUT, "%s", detail);
		goto out;
	}
	if (k == FW_SUITE_NO_REPORT) {
		r = reject(c, R_BROKEN, "%s", detail);
		goto out;
	}
	for (size_t i = 0; i < j->base_pass->n; i++) {
		const char *id = j->base_pass->tests[i].id;
		if (j->base_pass->tests[i].outcome == FW_XFAIL) {
			/* expected failures stay expected: p2p, listed in xfail */
			if (same(m1, id, FW_XFAIL) && same(m2, id, FW_XFAIL)) {
				fw_strlist_add(&p2p, id);
				fw_strlist_add(&xfail, id);
			}
		} else if (failing(m1, id) && failing(m2, id)) {
			fw_strlist_add(&f2p, id);
		} else if (same(m1, id, FW_PASS) && same(m2, id, FW_PASS)) {
			fw_strlist_add(&p2p, id);
		}
	}
	if (f2p.n == 0) {
		r = reject(c, R_EMPTY_PATCH, "%s", "the failing tests pass when run again");
		goto out;
	}
	if (fw_store_diff(s, mut, j->tree, &patch, err, sizeof err) < 0) {
		r = reject(c, R_ERROR, "%s", err);
		goto out;
	}
	prompt = fw_task_prompt(&m, (const char *const *)f2p.v, f2p.n);
	if (!prompt) {
		r = reject(c, R_ERROR, "%s", "out of memory");
		goto out;
	}

	/* The id names the repository tree, the mutation and the environment. */
	char key[260], id[17];
	snprintf(key, sizeof key, "%s\n%s\n%s%s%s", j->tree, mut, fw_strategy_name(m.strategy),
		 j->env ? "\n" : "", j->env ? j->env->id : "");
	snprintf(id, sizeof id, "%016llx", (unsigned long long)fw_hash64(key, strlen(key)));
	char ref[64];
	snprintf(ref, sizeof ref, "tasks/%s", id);
	if (fw_store_keep(s, ref, mut, err, sizeof err) < 0) {
		r = reject(c, R_ERROR, "%s", err);
		goto out;
	}

	msgpack_packer pk;
	fw_buf_packer(&pk, &c->rec);
	msgpack_pack_map(&pk, 19 + (j->env != NULL));
	fw_pack_cstr(&pk, "kind"); fw_pack_cstr(&pk, "task");
	fw_pack_cstr(&pk, "id"); fw_pack_cstr(&pk, id);
	fw_pack_cstr(&pk, "v"); msgpack_pack_int(&pk, 1);
	fw_pack_cstr(&pk, "repo"); fw_pack_cstr(&pk, j->repo);
	fw_pack_cstr(&pk, "base"); fw_pack_cstr(&pk, j->base);
	fw_pack_cstr(&pk, "store"); fw_pack_cstr(&pk, j->store_abs);
	fw_pack_cstr(&pk, "orig_tree"); fw_pack_cstr(&pk, j->tree);
	fw_pack_cstr(&pk, "tree"); fw_pack_cstr(&pk, mut);
	fw_pack_cstr(&pk, "strategy"); fw_pack_cstr(&pk, fw_strategy_name(m.strategy));
	fw_pack_cstr(&pk, "targets");
	msgpack_pack_array(&pk, m.ntargets);
	for (size_t i = 0; i < m.ntargets; i++) {
		const struct fw_target *t = &m.targets[i];
		msgpack_pack_map(&pk, 5);
		fw_pack_cstr(&pk, "path"); fw_pack_cstr(&pk, t->path);
		fw_pack_cstr(&pk, "symbol"); fw_pack_cstr(&pk, t->symbol);
		fw_pack_cstr(&pk, "lang"); fw_pack_cstr(&pk, fw_lang_name(t->lang));
		fw_pack_cstr(&pk, "start"); msgpack_pack_int(&pk, t->start);
		fw_pack_cstr(&pk, "end"); msgpack_pack_int(&pk, t->end);
	}
	fw_pack_cstr(&pk, "prompt"); fw_pack_cstr(&pk, prompt);
	fw_pack_cstr(&pk, "test_cmd"); fw_pack_cstr(&pk, o->test_cmd);
	fw_pack_cstr(&pk, "report"); fw_pack_cstr(&pk, fw_report_format_name(o->fmt));
	fw_pack_cstr(&pk, "f2p"); fw_pack_strlist(&pk, &f2p);
	fw_pack_cstr(&pk, "p2p"); fw_pack_strlist(&pk, &p2p);
	fw_pack_cstr(&pk, "xfail"); fw_pack_strlist(&pk, &xfail);
	fw_pack_cstr(&pk, "solution"); fw_pack_cstr(&pk, patch);
	fw_pack_cstr(&pk, "split"); fw_pack_cstr(&pk, split_of(o, id));
	fw_pack_cstr(&pk, "lang"); fw_pack_cstr(&pk, fw_lang_name(m.targets[0].lang));
	if (j->env) {
		fw_pack_cstr(&pk, "env"); fw_pack_cstr(&pk, j->env->id);
	}
	r = R_KEPT;
out:
	fw_rmtree(ws);
	free(patch);
	free(prompt);
	fw_strlist_free(&f2p);
	fw_strlist_free(&p2p);
	fw_strlist_free(&xfail);
	fw_strlist_free(&leaks);
	fw_report_free(m1);
	fw_report_free(m2);
	fw_audit_free(audit);
	fw_mutation_clear(&m);
	return r;
}

/* Validated candidates among the finished prefix of the order. */
static uint64_t validated_prefix(const struct job *j)
{
	uint64_t v = 0;
	for (size_t i = 0; i < j->nc && j->c[i].done; i++)
		v += j->c[i].reason == R_KEPT;
	return v;
}

static void *worker(void *arg)
{
	struct job *j = arg;
	char err[512];
	struct fw_store *s = fw_store_open(j->o->store, 0, err, sizeof err);
	for (;;) {
		pthread_mutex_lock(&j->mu);
		if (!s && !j->fatal) {
			j->fatal = 1;
			snprintf(j->fatal_msg, sizeof j->fatal_msg, "%s", err);
		}
		if (j->fatal || j->next >= j->nc ||
		    (j->o->max && validated_prefix(j) >= j->o->max)) {
			pthread_mutex_unlock(&j->mu);
			break;
		}
		size_t i = j->next++;
		pthread_mutex_unlock(&j->mu);
		enum reason r = validate(j, s, i);
		pthread_mutex_lock(&j->mu);
		if (r == R_ERROR && !j->fatal) {
			j->fatal = 1;
			snprintf(j->fatal_msg, sizeof j->fatal_msg, "%s", j->c[i].detail);
		}
		j->c[i].reason = r;
		j->c[i].done = 1;
		j->ndone++;
		fw_progress_tick(&j->prog, j->ndone, 0);
		pthread_mutex_unlock(&j->mu);
	}
	fw_store_free(s);
	return NULL;
}

static int has_symbols(const struct job *j, const char *path)
{
	for (size_t i = 0; i < j->syms.n; i++)
		if (strcmp(j->syms.v[i].path, path) == 0)
			return 1;
	return 0;
}

/* Reads every source text of the tree for the mutations and the helper
 * search. */
static int load_texts(struct job *j, struct fw_store *s, char *err, size_t errlen)
{
	struct fw_file *f;
	size_t n;
	if (fw_store_files(s, j->tree, &f, &n, err, errlen) < 0)
		return -1;
	j->files = calloc(n ? n : 1, sizeof *j->files);
	if (!j->files) {
		fw_files_free(f, n);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		if (fw_lang_of_path(f[i].path) == FW_LANG_UNKNOWN && !has_symbols(j, f[i].path))
			continue;
		char *data;
		size_t len;
		if (fw_store_read(s, j->tree, f[i].path, &data, &len, err, errlen) < 0)
			continue;
		if (memchr(data, '\0', len)) {
			free(data);
			continue;
		}
		j->files[j->nfiles++] = (struct fw_text){ strdup(f[i].path), data, len };
	}
	fw_files_free(f, n);
	return 0;
}

static void free_texts(struct job *j)
{
	for (size_t i = 0; i < j->nfiles; i++) {
		free((char *)j->files[i].path);
		free((char *)j->files[i].data);
	}
	free(j->files);
}

static int add_cand(struct job *j, enum fw_strategy st, size_t sym, const size_t *h, size_t nh)
{
	struct cand *c = realloc(j->c, (j->nc + 1) * sizeof *c);
	if (!c)
		return -1;
	j->c = c;
	c = &c[j->nc];
	memset(c, 0, sizeof *c);
	c->strategy = st;
	c->sym = sym;
	c->path = j->syms.v[sym].path;
	c->nh = nh < 16 ? nh : 16;
	if (c->nh)
		memcpy(c->helpers, h, c->nh * sizeof *h);
	/* --shard keeps candidates whose key hashes to K mod N */
	char key[4400];
	snprintf(key, sizeof key, "%s\n%s\n%s\n%s\n%d", j->tree, fw_strategy_name(st), c->path,
		 st == FW_DELETE_FILE ? "" : j->syms.v[sym].name, j->syms.v[sym].start);
	if (j->o->shard_n > 1 && fw_hash64(key, strlen(key)) % j->o->shard_n != j->o->shard_k)
		return 0;
	j->nc++;
	return 0;
}

static int make_candidates(struct job *j)
{
	const struct opts *o = j->o;
	for (int st = 0; st < FW_NSTRATEGIES; st++) {
		if (!(o->strategies & (1u << st)))
			continue;
		for (size_t i = 0; i < j->syms.n; i++) {
			const struct fw_symbol *y = &j->syms.v[i];
			if (fw_is_test_path(y->path) || !text_of(j, y->path))
				continue;
			if (st == FW_DELETE_FILE) {
				if (i > 0 && strcmp(j->syms.v[i - 1].path, y->path) == 0)
					continue; /* one candidate per file */
				if (add_cand(j, st, i, NULL, 0) < 0)
					return -1;
				continue;
			}
			if (!strcmp(y->name, "main") && y->lang != FW_LANG_PYTHON)
				continue;
			size_t h[16], nh = 0;
			if (st == FW_DELETE_FEATURE) {
				nh = fw_private_helpers(&j->syms, i, j->files, j->nfiles, h, 16);
				if (nh == 0)
					continue;
			}
			if (add_cand(j, st, i, h, nh) < 0)
				return -1;
		}
	}
	/* --seed fixes the order in which candidates are tried */
	uint64_t s = o->seed;
	for (size_t i = j->nc; i > 1; i--) {
		size_t k = (size_t)(fw_rand64(&s) % i);
		struct cand t = j->c[i - 1];
		j->c[i - 1] = j->c[k];
		j->c[k] = t;
	}
	return 0;
}

/* Says why the repository is not used (the summary's line) and warns. */
static void unusable(struct job *j, const char *reason, const char *fmt, const char *a)
{
	char msg[512];
	snprintf(msg, sizeof msg, fmt, a);
	snprintf(j->why, sizeof j->why, "%s (%s)", reason, msg);
	fw_warn("%s: %s", j->repo, msg);
}

/* With -v: the last lines the test command printed, which say why the
 * original suite cannot be used. */
static void show_tail(const struct job *j)
{
	if (!j->o->verbose || !j->tail[0])
		return;
	fw_warn("%s: the test command's output ends:", j->repo);
	for (const char *p = j->tail; *p;) {
		const char *e = strchr(p, '\n');
		int n = e ? (int)(e - p) : (int)strlen(p);
		fw_warn("%s: | %.*s", j->repo, n, p);
		p += n + (e != NULL);
	}
}

/* Runs the original suite twice and keeps what passes both times. */
static int baseline(struct job *j, const char *ws)
{
	const struct opts *o = j->o;
	struct fw_report *r1 = fw_report_new(), *r2 = fw_report_new();
	char err[512] = "", detail[512] = "";
	int rc = -1;
	j->base_pass = fw_report_new();
	if (!r1 || !r2 || !j->base_pass)
		goto out;
	for (int run = 0; run < 2; run++) {
		int k = fw_suite_run_env(ws, o->test_cmd, o->fmt, o->timeout, j->env,
					 run ? r2 : r1, detail, sizeof detail, j->tail,
					 sizeof j->tail, err, sizeof err);
		if (k < 0) {
			unusable(j, "error", "%s", err);
			goto out;
		}
		if (k == FW_SUITE_TIMEOUT) {
			unusable(j, "suite-timeout", "the original test suite did not finish: %s",
				 detail);
			show_tail(j);
			goto out;
		}
		if (k == FW_SUITE_NO_REPORT) {
			unusable(j, "no-tests", "no tests found: %s", detail);
			show_tail(j);
			goto out;
		}
	}
	size_t flaky = 0, bad = 0;
	for (size_t i = 0; i < r1->n; i++) {
		const struct fw_test_result *a = &r1->tests[i];
		const struct fw_test_result *b = fw_report_find(r2, a->id);
		if (!b || b->outcome != a->outcome) {
			flaky++;
			continue;
		}
		if (a->outcome != FW_PASS && a->outcome != FW_XFAIL) {
			bad += a->outcome == FW_FAIL || a->outcome == FW_ERROR;
			continue;
		}
		char *id = strdup(a->id);
		if (!id)
			goto out;
		/* the report takes the id; sorted order is kept */
		if (j->base_pass->n == j->base_pass->cap) {
			size_t cap = j->base_pass->cap ? 2 * j->base_pass->cap : 64;
			struct fw_test_result *t = realloc(j->base_pass->tests, cap * sizeof *t);
			if (!t) {
				free(id);
				goto out;
			}
			j->base_pass->tests = t;
			j->base_pass->cap = cap;
		}
		j->base_pass->tests[j->base_pass->n++] =
			(struct fw_test_result){ id, a->outcome, 0, NULL };
	}
	if (flaky)
		fw_warn("%s: %zu flaky tests (differ between two runs) are excluded", j->repo, flaky);
	if (bad)
		fw_warn("%s: %zu tests fail on the original and are excluded", j->repo, bad);
	if (fw_report_count(j->base_pass, FW_PASS) == 0) {
		char counts[128];
		snprintf(counts, sizeof counts, "%zu of %zu tests fail or error, %zu flaky", bad,
			 r1->n, flaky);
		unusable(j, "no-passing-test", "no test passes on the original: %s", counts);
		show_tail(j);
		goto out;
	}
	rc = 0;
out:
	fw_report_free(r1);
	fw_report_free(r2);
	return rc;
}

/* Counts of one run, for the summary. */
struct tally {
	uint64_t cand, ok, why[R_COUNT];
};

/*
 * The environment of repo's suites into *env: --env's, else the one built
 * from the repository's flywheel.env recipe (into own), else none.
 * Returns 0, or -1 with the reason in msg when the recipe's environment
 * is not in the env store.
 */
static int repo_env(const struct opts *o, const char *repo, struct fw_env *own,
		    const struct fw_env **env, char *msg, size_t msglen)
{
	char path[4200], rid[FW_ENV_ID_LEN], id[FW_ENV_ID_LEN];
	struct stat st;
	*env = o->env;
	if (o->env)
		return 0;
	snprintf(path, sizeof path, "%s/%s", repo, FW_ENV_RECIPE);
	if (lstat(path, &st) != 0)
		return 0;
	if (fw_env_recipe_id(path, rid, msg, msglen) < 0)
		return -1;
	int k = fw_env_recipe_find(o->env_store, rid, id, msg, msglen);
	if (k < 0)
		return -1;
	if (k == 0) {
		snprintf(msg, msglen, "the env store %s holds no environment built from its "
			 FW_ENV_RECIPE " (run fw-env build on the repository, or give --env)",
			 o->env_store);
		return -1;
	}
	if (fw_env_open(own, o->env_store, id, msg, msglen) < 0)
		return -1;
	*env = own;
	return 0;
}

static int run_repo(const struct opts *o, const char *repo, const char *store_abs,
		    struct fw_writer *w, struct tally *t, char *why, size_t whylen)
{
	struct job j;
	memset(&j, 0, sizeof j);
	j.o = o;
	j.repo = repo;
	j.store_abs = store_abs;
	pthread_mutex_init(&j.mu, NULL);
	char err[512] = "", ws[4200];
	int rc = -1, dirty = 0;
	struct fw_store *s = fw_store_open(o->store, 1, err, sizeof err);
	if (!s) {
		unusable(&j, "error", "%s", err);
		goto out;
	}
	if (fw_store_import(s, repo, "HEAD", j.tree, j.base, &dirty, err, sizeof err) < 0) {
		unusable(&j, "import-failed", "%s", err);
		goto out;
	}
	if (dirty && !o->allow_dirty) {
		unusable(&j, "dirty", "%s", "work tree has uncommitted changes (commit them, or "
			 "--allow-dirty to use HEAD as committed)");
		goto out;
	}
	if (repo_env(o, repo, &j.own_env, &j.env, err, sizeof err) < 0) {
		unusable(&j, "env-missing", "%s", err);
		goto out;
	}
	char ref[64];
	snprintf(ref, sizeof ref, "base/%s", j.tree);
	if (fw_store_keep(s, ref, j.tree, err, sizeof err) < 0) {
		unusable(&j, "error", "%s", err);
		goto out;
	}
	const char *tmpdir = getenv("TMPDIR");
	snprintf(j.tmp, sizeof j.tmp, "%s/task-mutate.XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
	pthread_mutex_lock(&tmp_mu);
	char *made = mkdtemp(j.tmp);
	if (made)
		snprintf(tmp_now, sizeof tmp_now, "%s", j.tmp);
	pthread_mutex_unlock(&tmp_mu);
	if (!made) {
		unusable(&j, "error", "cannot make a temporary directory: %s", strerror(errno));
		j.tmp[0] = '\0';
		goto out;
	}
	snprintf(ws, sizeof ws, "%s/orig", j.tmp);
	if (fw_workspace_create(s, j.tree, ws, NULL, NULL, err, sizeof err) < 0) {
		unusable(&j, "error", "%s", err);
		goto out;
	}
	if (fw_ctags(ws, o->lang, &j.syms, err, sizeof err) < 0) {
		unusable(&j, "error", "%s", err);
		goto out;
	}
	if (load_texts(&j, s, err, sizeof err) < 0) {
		unusable(&j, "error", "%s", err);
		goto out;
	}
	if (baseline(&j, ws) < 0)
		goto out;
	fw_rmtree(ws);
	if (make_candidates(&j) < 0) {
		fw_warn("%s: out of memory", repo);
		goto out;
	}
	fw_store_free(s);
	s = NULL;

	fw_progress_start(&j.prog, o->progress);
	size_t nt = o->jobs ? o->jobs : 1;
	pthread_t th[64];
	if (nt > 64)
		nt = 64;
	size_t started = 0;
	for (; started < nt; started++)
		if (pthread_create(&th[started], NULL, worker, &j) != 0)
			break;
	if (started == 0)
		worker(&j);
	for (size_t i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	fw_progress_end(&j.prog);
	if (j.fatal) {
		unusable(&j, "error", "%s", j.fatal_msg);
		goto out;
	}

	/* Output in candidate order, up to --max; the summary counts the same
	 * prefix, so it does not depend on -j. */
	uint64_t kept = 0;
	for (size_t i = 0; i < j.nc && j.c[i].done; i++) {
		if (o->max && kept >= o->max)
			break;
		struct cand *c = &j.c[i];
		t->cand++;
		if (c->reason == R_KEPT) {
			if (fw_writer_put(w, c->rec.p, c->rec.n) < 0) {
				fw_warn("write error: %s", fw_writer_error(w));
				goto out;
			}
			kept++;
			t->ok++;
			continue;
		}
		t->why[c->reason]++;
		if (o->verbose) {
			const struct fw_symbol *y = &j.syms.v[c->sym];
			fw_warn("%s: %s %s%s%s: %s: %s", repo, fw_strategy_name(c->strategy), c->path,
				c->strategy == FW_DELETE_FILE ? "" : ":",
				c->strategy == FW_DELETE_FILE ? "" : y->name,
				reason_names[c->reason], c->detail);
		}
	}
	rc = 0;
out:
	fw_store_free(s);
	for (size_t i = 0; i < j.nc; i++)
		fw_buf_free(&j.c[i].rec);
	free(j.c);
	free_texts(&j);
	fw_symbols_free(&j.syms);
	fw_report_free(j.base_pass);
	snprintf(why, whylen, "%s", j.why);
	if (j.tmp[0]) {
		pthread_mutex_lock(&tmp_mu);
		fw_rmtree(j.tmp);
		tmp_now[0] = '\0';
		pthread_mutex_unlock(&tmp_mu);
	}
	pthread_mutex_destroy(&j.mu);
	return rc;
}

/* What the history run's callbacks need. */
struct history_ctx {
	struct fw_writer *w;
	const char *repo;
	int verbose;
};

static int history_emit(void *ctx, const void *rec, size_t n)
{
	struct history_ctx *h = ctx;
	if (fw_writer_put(h->w, rec, n) < 0) {
		fw_warn("write error: %s", fw_writer_error(h->w));
		return -1;
	}
	return 0;
}

static void history_note(void *ctx, const char *hex, const char *subject,
			 enum fw_history_reason r, const char *detail)
{
	struct history_ctx *h = ctx;
	if (h->verbose)
		fw_warn("%s: %.12s %s: %s: %s", h->repo, hex, subject, fw_history_reason_name(r),
			detail);
}

/* --strategy history on one repository. */
static int run_history(const struct opts *o, const char *repo, const char *store_abs,
		       const struct fw_context_map *cm, struct fw_writer *w,
		       struct fw_history_tally *t)
{
	struct fw_history_opts h = o->h;
	struct history_ctx hc = { w, repo, o->verbose };
	char tmp[4096], err[1024];
	const char *tmpdir = getenv("TMPDIR");
	snprintf(tmp, sizeof tmp, "%s/task-mutate.XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
	pthread_mutex_lock(&tmp_mu);
	char *made = mkdtemp(tmp);
	if (made)
		snprintf(tmp_now, sizeof tmp_now, "%s", tmp);
	pthread_mutex_unlock(&tmp_mu);
	if (!made) {
		fw_warn("cannot make a temporary directory: %s", strerror(errno));
		return -1;
	}
	h.test_cmd = o->test_cmd;
	h.fmt = o->fmt;
	h.timeout_s = o->timeout;
	h.max = o->max;
	h.shard_k = o->shard_k;
	h.shard_n = o->shard_n;
	h.jobs = o->jobs;
	h.split = o->split_given ? o->split : NULL;
	h.store = o->store;
	h.store_abs = store_abs;
	h.tmp = tmp;
	h.context = cm;
	h.paths = o->npaths ? o->paths : NULL;
	h.test_paths = o->ntest_paths ? o->test_paths : NULL;
	struct fw_env *own = malloc(sizeof *own);
	if (!own || repo_env(o, repo, own, &h.env, err, sizeof err) < 0) {
		fw_warn("%s: %s", repo, own ? err : "out of memory");
		free(own);
		pthread_mutex_lock(&tmp_mu);
		fw_rmtree(tmp);
		tmp_now[0] = '\0';
		pthread_mutex_unlock(&tmp_mu);
		return -1;
	}
	int rc = fw_history_run(&h, repo, history_emit, history_note, &hc, t, err, sizeof err);
	if (rc < 0)
		fw_warn("%s: %s", repo, err);
	free(own);
	pthread_mutex_lock(&tmp_mu);
	fw_rmtree(tmp);
	tmp_now[0] = '\0';
	pthread_mutex_unlock(&tmp_mu);
	return rc;
}

/* Waits for SIGINT, SIGTERM or SIGHUP (blocked in every other thread),
 * removes the workspaces and exits as the signal would have.  The
 * sandboxed test runs die with their parent. */
static void *signal_thread(void *arg)
{
	sigset_t *set = arg;
	int sig = 0;
	if (sigwait(set, &sig) != 0)
		return NULL;
	pthread_mutex_lock(&tmp_mu);
	if (tmp_now[0]) {
		/* Moved first, so workers stop finding it; removal is retried
		 * while their last writes land. */
		char dead[4200];
		snprintf(dead, sizeof dead, "%s.dead", tmp_now);
		const char *p = rename(tmp_now, dead) == 0 ? dead : tmp_now;
		for (int i = 0; i < 20 && fw_rmtree(p) < 0; i++)
			usleep(50000);
	}
	_exit(128 + sig);
}

static int parse_split(const char *s, double out[3])
{
	static const char *const names[3] = { "train", "eval", "private" };
	double v[3] = { 0, 0, 0 };
	char *dup = strdup(s), *save = NULL;
	if (!dup)
		return -1;
	int ok = 1;
	for (char *tok = strtok_r(dup, ",", &save); tok && ok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		ok = 0;
		if (!eq)
			break;
		*eq = '\0';
		for (int i = 0; i < 3; i++) {
			if (strcmp(tok, names[i]) == 0 && fw_parse_double(eq + 1, &v[i]) == 0 &&
			    v[i] >= 0)
				ok = 1;
		}
	}
	free(dup);
	if (!ok || v[0] + v[1] + v[2] <= 0)
		return -1;
	memcpy(out, v, sizeof v);
	return 0;
}

static int usage_error(const char *fmt, const char *arg)
{
	return fw_usage_error(usage_text, fmt, arg);
}

/* A string field of rec as a new string, "" when absent; NULL when memory
 * runs out. */
static char *field(struct fw_mpv rec, const char *key)
{
	struct fw_mpv v;
	const char *s = "";
	size_t n = 0;
	if (fw_mp_get(rec, key, &v) == 1 && fw_mp_str(v, &s, &n) < 0) {
		s = "";
		n = 0;
	}
	return strndup(s, n);
}

/* Repositories named by the `repo` fields of a record stream, with the
 * record's own `test_cmd` and `report` when it has them ("" otherwise). */
static int repos_from_stream(const char *path, struct fw_strlist *repos,
			     struct fw_strlist *cmds, struct fw_strlist *fmts)
{
	char err[256];
	struct fw_reader *r = fw_reader_open(path, NULL, err, sizeof err);
	if (!r) {
		fw_warn("%s: %s", path, err);
		return -1;
	}
	struct fw_rec rec;
	int k, rc = 0;
	while ((k = fw_reader_next(r, &rec)) == 1) {
		struct fw_mpv v;
		const char *s;
		size_t n;
		if (fw_mp_get(rec.v, "repo", &v) != 1 || fw_mp_str(v, &s, &n) < 0) {
			fw_warn_rec(fw_reader_name(r), rec.index, rec.offset, "no 'repo' string");
			rc = -1;
			continue;
		}
		char *p = strndup(s, n), *c = field(rec.v, "test_cmd"), *f = field(rec.v, "report");
		if (!p || !c || !f || fw_strlist_add(repos, p) < 0 || fw_strlist_add(cmds, c) < 0 ||
		    fw_strlist_add(fmts, f) < 0)
			rc = -1;
		free(p);
		free(c);
		free(f);
	}
	if (k < 0) {
		fw_warn_reader(r);
		rc = -1;
	}
	fw_reader_close(r);
	return rc;
}

int main(int argc, char **argv)
{
	fw_cli_init("task-mutate");
	fw_usage_init(usage_text, options);
	struct opts o = {
		.fmt = FW_REPORT_JUNIT, .store = "tasks.git", .jobs = 1,
		.split = { 0.8, 0.1, 0.1 }, .timeout = 300, .level = -1,
	};
	enum { O_TEST_CMD = 256, O_STRATEGY, O_REPORT, O_LANG, O_STORE, O_MAX, O_SEED, O_SHARD,
	       O_SPLIT, O_TIMEOUT, O_ALLOW_DIRTY, O_PROGRESS, O_VERSION, OH_RANGE, OH_PATH, OH_TEST_PATH, OH_SINCE,
	       OH_UNTIL, OH_GREP, OH_MAX_FILES, OH_MAX_LINES, OH_CONTEXT, O_ENV, O_ENV_STORE };
	static const struct option longopts[] = {
		{ "test-cmd", required_argument, NULL, O_TEST_CMD },
		{ "strategy", required_argument, NULL, O_STRATEGY },
		{ "report", required_argument, NULL, O_REPORT },
		{ "lang", required_argument, NULL, O_LANG },
		{ "store", required_argument, NULL, O_STORE },
		{ "max", required_argument, NULL, O_MAX },
		{ "seed", required_argument, NULL, O_SEED },
		{ "jobs", required_argument, NULL, 'j' },
		{ "shard", required_argument, NULL, O_SHARD },
		{ "split", required_argument, NULL, O_SPLIT },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "allow-dirty", no_argument, NULL, O_ALLOW_DIRTY },
		{ "range", required_argument, NULL, OH_RANGE },
		{ "path", required_argument, NULL, OH_PATH },
		{ "test-path", required_argument, NULL, OH_TEST_PATH },
		{ "since", required_argument, NULL, OH_SINCE },
		{ "until", required_argument, NULL, OH_UNTIL },
		{ "grep", required_argument, NULL, OH_GREP },
		{ "max-files", required_argument, NULL, OH_MAX_FILES },
		{ "max-lines", required_argument, NULL, OH_MAX_LINES },
		{ "context", required_argument, NULL, OH_CONTEXT },
		{ "env", required_argument, NULL, O_ENV },
		{ "env-store", required_argument, NULL, O_ENV_STORE },
		{ "output", required_argument, NULL, 'o' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "progress", no_argument, NULL, O_PROGRESS },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, O_VERSION },
		{ NULL, 0, NULL, 0 },
	};
	int ch, st;
	while ((ch = getopt_long(argc, argv, "j:o:zvh", longopts, NULL)) != -1) {
		switch (ch) {
		case O_TEST_CMD: o.test_cmd = optarg; break;
		case O_STRATEGY:
			if (strcmp(optarg, "history") == 0) {
				o.history = 1;
				break;
			}
			if ((st = fw_strategy_parse(optarg)) < 0)
				return usage_error("unknown strategy '%s' (stub-body, delete-function, "
						   "delete-file, delete-feature, history)", optarg);
			o.strategies |= 1u << st;
			break;
		case OH_RANGE: o.h.rev = optarg; break;
		case OH_PATH:
			if (o.npaths == 64)
				return usage_error("too many --path options (at most %s)", "64");
			o.paths[o.npaths++] = optarg;
			break;
		case OH_TEST_PATH:
			if (o.ntest_paths == 64)
				return usage_error("too many --test-path options (at most %s)", "64");
			o.test_paths[o.ntest_paths++] = optarg;
			break;
		case OH_SINCE:
		case OH_UNTIL:
			if (fw_time_parse(optarg, strlen(optarg), ch == OH_SINCE ? &o.h.since : &o.h.until))
				return usage_error("bad date '%s' (want ISO 8601: 2024-03-01 or "
						   "2024-03-01T12:00:00Z)", optarg);
			/* a bare --until day takes in the whole day */
			if (ch == OH_UNTIL && strlen(optarg) == 10)
				o.h.until += 86399;
			break;
		case OH_GREP: o.h.grep = optarg; break;
		case OH_MAX_FILES:
		case OH_MAX_LINES:
			if (fw_parse_u64(optarg, ch == OH_MAX_FILES ? &o.h.max_files : &o.h.max_lines, 0))
				return usage_error("bad count '%s'", optarg);
			break;
		case OH_CONTEXT: o.context = optarg; break;
		case O_ENV: o.env_arg = optarg; break;
		case O_ENV_STORE: o.env_store = optarg; break;
		case O_REPORT:
			if ((st = fw_report_format_parse(optarg)) < 0)
				return usage_error("unknown report format '%s' (junit, tap, gotest)",
						   optarg);
			o.fmt = (enum fw_report_format)st;
			break;
		case O_LANG:
			if ((o.lang = fw_lang_parse(optarg)) == FW_LANG_UNKNOWN)
				return usage_error("unknown language '%s' (python, c, javascript, "
						   "typescript, go)", optarg);
			break;
		case O_STORE: o.store = optarg; break;
		case O_MAX:
			if (fw_parse_u64(optarg, &o.max, 0) < 0)
				return usage_error("bad count '%s'", optarg);
			break;
		case O_SEED:
			if (fw_parse_u64(optarg, &o.seed, 0) < 0)
				return usage_error("bad seed '%s'", optarg);
			break;
		case 'j':
			if (fw_parse_u64(optarg, &o.jobs, 0) < 0 || o.jobs < 1 || o.jobs > 64)
				return usage_error("bad job count '%s' (1..64)", optarg);
			break;
		case O_SHARD:
			if (fw_parse_shard(optarg, &o.shard_k, &o.shard_n) < 0)
				return usage_error("bad shard '%s' (want K/N, 0 <= K < N)", optarg);
			break;
		case O_SPLIT:
			if (parse_split(optarg, o.split) < 0)
				return usage_error("bad split '%s' (want train=F,eval=F,private=F)",
						   optarg);
			o.split_given = 1;
			break;
		case O_TIMEOUT:
			if (fw_parse_double(optarg, &o.timeout) < 0 || o.timeout <= 0)
				return usage_error("bad timeout '%s'", optarg);
			break;
		case O_ALLOW_DIRTY: o.allow_dirty = 1; break;
		case 'o': o.out = optarg; break;
		case 'z': o.level = 3; break;
		case 'v': o.verbose = 1; break;
		case O_PROGRESS: o.progress = 1; break;
		case 'h': fw_help(); return fw_close_stdout() ? FW_EXIT_DATA : FW_EXIT_OK;
		case O_VERSION: fw_print_version(); return FW_EXIT_OK;
		default: fputs(usage_text, stderr); return FW_EXIT_USAGE;
		}
	}
	if (optind >= argc)
		return usage_error("%s", "no repository given");
	/* without --test-cmd, every repository must come from a record
	 * that names its own */
	int only_dirs = 1;
	for (int i = optind; i < argc; i++) {
		struct stat sb;
		if (strcmp(argv[i], "-") == 0 || (stat(argv[i], &sb) == 0 && !S_ISDIR(sb.st_mode)))
			only_dirs = 0;
	}
	if (!o.test_cmd && only_dirs)
		return usage_error("%s", "--test-cmd is required");
	if (!o.strategies && !o.history)
		o.strategies = (1u << FW_NSTRATEGIES) - 1;
	if (!o.history && (o.h.rev || o.npaths || o.ntest_paths || o.h.since || o.h.until || o.h.grep ||
			   o.h.max_files || o.h.max_lines || o.context))
		return usage_error("%s", "--range, --path, --test-path, --since, --until, --grep, --max-files, "
				   "--max-lines and --context go with --strategy history");
	struct fw_context_map *cm = NULL;
	if (o.context) {
		char cerr[1024];
		if (!(cm = fw_context_load(o.context, cerr, sizeof cerr))) {
			fw_warn("%s", cerr);
			return FW_EXIT_DATA;
		}
	}

	struct fw_strlist repos = { 0 }, cmds = { 0 }, fmts = { 0 };
	int status = FW_EXIT_OK;
	for (int i = optind; i < argc; i++) {
		struct stat sb;
		if (strcmp(argv[i], "-") != 0 && stat(argv[i], &sb) == 0 && S_ISDIR(sb.st_mode)) {
			if (fw_strlist_add(&repos, argv[i]) < 0 || fw_strlist_add(&cmds, "") < 0 ||
			    fw_strlist_add(&fmts, "") < 0)
				status = FW_EXIT_DATA;
		} else if (strcmp(argv[i], "-") != 0 && stat(argv[i], &sb) < 0) {
			fw_warn("%s: %s", argv[i], strerror(errno));
			status = FW_EXIT_DATA;
		} else if (repos_from_stream(argv[i], &repos, &cmds, &fmts) < 0) {
			status = FW_EXIT_DATA;
		}
	}

	char err[512];
	struct fw_store *s = fw_store_open(o.store, 1, err, sizeof err);
	if (!s) {
		fw_warn("%s", err);
		fw_strlist_free(&repos);
		fw_strlist_free(&cmds);
		fw_strlist_free(&fmts);
		return FW_EXIT_DATA;
	}
	fw_store_free(s);
	char *store_abs = realpath(o.store, NULL);
	/* the environment: named once, the same for every repository */
	static char env_store[4096];
	static struct fw_env env;
	if (store_abs && fw_env_store_path(o.env_store, store_abs, env_store, sizeof env_store,
					   err, sizeof err) == 0) {
		o.env_store = env_store;
	} else if (store_abs) {
		fw_warn("%s", err);
		free(store_abs);
		fw_strlist_free(&repos);
		fw_strlist_free(&cmds);
		fw_strlist_free(&fmts);
		return FW_EXIT_DATA;
	}
	if (store_abs && o.env_arg) {
		char id[FW_ENV_ID_LEN];
		if (fw_env_resolve(o.env_store, o.env_arg, id, err, sizeof err) < 0 ||
		    fw_env_open(&env, o.env_store, id, err, sizeof err) < 0) {
			fw_warn("%s", err);
			free(store_abs);
			fw_strlist_free(&repos);
			fw_strlist_free(&cmds);
			fw_strlist_free(&fmts);
			return FW_EXIT_DATA;
		}
		o.env = &env;
	}
	/* An output that exists and is not a regular file (/dev/null, a
	 * FIFO) is written in place: the writer's write-beside-and-rename
	 * would replace it with a file. */
	struct stat ost;
	if (o.out && stat(o.out, &ost) == 0 && !S_ISREG(ost.st_mode)) {
		int fd = open(o.out, O_WRONLY | O_CLOEXEC);
		if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0) {
			fw_warn("%s: %s", o.out, strerror(errno));
			free(store_abs);
			fw_strlist_free(&repos);
			fw_strlist_free(&cmds);
			fw_strlist_free(&fmts);
			return FW_EXIT_DATA;
		}
		close(fd);
		o.out = NULL;
	}
	struct fw_writer *w = fw_writer_open(o.out, o.level, err, sizeof err);
	if (!w || !store_abs) {
		fw_warn("%s", w ? strerror(errno) : err);
		fw_writer_abort(w);
		free(store_abs);
		fw_strlist_free(&repos);
		fw_strlist_free(&cmds);
		fw_strlist_free(&fmts);
		return FW_EXIT_DATA;
	}
	static sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	pthread_t sig_th;
	if (pthread_sigmask(SIG_BLOCK, &sigs, NULL) == 0)
		pthread_create(&sig_th, NULL, signal_thread, &sigs);
	struct tally t = { 0 };
	struct fw_history_tally ht = { 0 };
	struct fw_strlist lines = { 0 };
	for (size_t i = 0; i < repos.n; i++) {
		if (o.max && t.ok + ht.kept >= o.max)
			break;
		struct opts oi = o;
		if (o.max)
			oi.max = o.max - t.ok - ht.kept;
		if (cmds.v[i][0])
			oi.test_cmd = cmds.v[i];
		if (fmts.v[i][0] && (st = fw_report_format_parse(fmts.v[i])) >= 0) {
			oi.fmt = (enum fw_report_format)st;
		} else if (fmts.v[i][0]) {
			fw_warn("%s: unknown report format '%s' (junit, tap, gotest)", repos.v[i],
				fmts.v[i]);
			status = FW_EXIT_DATA;
			continue;
		}
		if (!oi.test_cmd) {
			fw_warn("%s: no test command (--test-cmd, or a test_cmd field)", repos.v[i]);
			status = FW_EXIT_DATA;
			continue;
		}
		if (oi.history && run_history(&oi, repos.v[i], store_abs, cm, w, &ht) < 0)
			status = FW_EXIT_DATA;
		if (o.max && t.ok + ht.kept >= o.max)
			oi.strategies = 0;
		else if (o.max)
			oi.max = o.max - t.ok - ht.kept;
		struct tally before = t;
		char why[600] = "", line[1400];
		if (oi.strategies && run_repo(&oi, repos.v[i], store_abs, w, &t, why, sizeof why) < 0)
			status = FW_EXIT_DATA;
		if (oi.strategies) {
			if (why[0])
				snprintf(line, sizeof line, "%s: not used: %s", repos.v[i], why);
			else
				snprintf(line, sizeof line, "%s: candidates %llu, validated %llu",
					 repos.v[i], (unsigned long long)(t.cand - before.cand),
					 (unsigned long long)(t.ok - before.ok));
			fw_strlist_add(&lines, line);
		}
		fw_writer_flush(w);
	}
	if (fw_writer_close(w, err, sizeof err) < 0) {
		fw_warn("%s", err);
		status = FW_EXIT_DATA;
	}
	if (o.strategies) {
		/* a line per repository, then the totals */
		for (size_t i = 0; i < lines.n; i++)
			fprintf(stderr, "%s: %s\n", fw_prog, lines.v[i]);
		uint64_t rejected = t.cand - t.ok;
		fprintf(stderr, "%s: candidates %llu, validated %llu, rejected %llu", fw_prog,
			(unsigned long long)t.cand, (unsigned long long)t.ok,
			(unsigned long long)rejected);
		for (int r = 0; r < R_COUNT; r++)
			fprintf(stderr, "%s %s %llu", r ? "," : ":", reason_names[r],
				(unsigned long long)t.why[r]);
		fputc('\n', stderr);
	}
	if (o.history) {
		fprintf(stderr, "%s: history: commits %llu, candidates %llu, validated %llu",
			fw_prog, (unsigned long long)ht.scanned, (unsigned long long)ht.candidates,
			(unsigned long long)ht.kept);
		for (int r = 0; r < FW_HIST_NREASONS; r++)
			fprintf(stderr, "%s %s %llu", r ? "," : ":", fw_history_reason_name(r),
				(unsigned long long)ht.why[r]);
		fputc('\n', stderr);
	}
	fw_context_free(cm);
	fw_strlist_free(&lines);
	free(store_abs);
	fw_strlist_free(&repos);
	fw_strlist_free(&cmds);
	fw_strlist_free(&fmts);
	if (fw_close_stdout() < 0)
		status = FW_EXIT_DATA;
	return status;
}
