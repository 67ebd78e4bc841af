/*
 * fw_task.c — the task record, and the validation of mutations: what makes
 * a candidate a task (fw_task.h).
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fw_cli.h"
#include "fw_task.h"
#include "fw_workspace.h"

/* ---- the record --------------------------------------------------------------- */

static int pack_kv(msgpack_packer *pk, const char *k, const char *v)
{
	return fw_pack_cstr(pk, k) || fw_pack_cstr(pk, v);
}

int fw_task_pack(msgpack_packer *pk, const struct fw_task *t)
{
	size_t n = 19 + (t->created != NULL) + (t->commit != NULL) + (t->env != NULL) +
		   (t->with_context != 0);
	int e = msgpack_pack_map(pk, n);

	e |= pack_kv(pk, "kind", "task");
	e |= pack_kv(pk, "id", t->id);
	e |= fw_pack_cstr(pk, "v") || msgpack_pack_int(pk, 1);
	e |= pack_kv(pk, "repo", t->repo);
	e |= pack_kv(pk, "base", t->base);
	e |= pack_kv(pk, "store", t->store);
	e |= pack_kv(pk, "orig_tree", t->orig_tree);
	e |= pack_kv(pk, "tree", t->tree);
	e |= pack_kv(pk, "strategy", t->strategy);
	e |= fw_pack_cstr(pk, "targets") || msgpack_pack_array(pk, t->ntargets);
	for (size_t i = 0; i < t->ntargets; i++) {
		const struct fw_target *g = &t->targets[i];
		e |= msgpack_pack_map(pk, 5);
		e |= pack_kv(pk, "path", g->path);
		e |= pack_kv(pk, "symbol", g->symbol ? g->symbol : "");
		e |= pack_kv(pk, "lang", fw_lang_name(g->lang));
		e |= fw_pack_cstr(pk, "start") || msgpack_pack_int(pk, g->start);
		e |= fw_pack_cstr(pk, "end") || msgpack_pack_int(pk, g->end);
	}
	e |= pack_kv(pk, "prompt", t->prompt);
	e |= pack_kv(pk, "test_cmd", t->test_cmd);
	e |= pack_kv(pk, "report", fw_report_format_name(t->fmt));
	e |= fw_pack_cstr(pk, "f2p") || fw_pack_strlist(pk, t->f2p);
	e |= fw_pack_cstr(pk, "p2p") || fw_pack_strlist(pk, t->p2p);
	e |= fw_pack_cstr(pk, "xfail") || fw_pack_strlist(pk, t->xfail);
	e |= pack_kv(pk, "solution", t->solution);
	e |= pack_kv(pk, "split", t->split);
	e |= pack_kv(pk, "lang", fw_lang_name(t->lang));
	if (t->created)
		e |= pack_kv(pk, "created", t->created);
	if (t->commit)
		e |= pack_kv(pk, "commit", t->commit);
	if (t->env)
		e |= pack_kv(pk, "env", t->env);
	if (t->with_context) {
		e |= fw_pack_cstr(pk, "context") || msgpack_pack_array(pk, t->ncontext);
		for (size_t i = 0; i < t->ncontext; i++) {
			const struct fw_task_context *c = &t->context[i];
			e |= msgpack_pack_map(pk, 4);
			e |= pack_kv(pk, "kind", c->kind);
			e |= pack_kv(pk, "name", c->name);
			e |= pack_kv(pk, "blob", c->blob);
			e |= fw_pack_cstr(pk, "size") || msgpack_pack_uint64(pk, c->size);
		}
	}
	return e ? -1 : 0;
}

const char *fw_task_split(const double *split, const char *id)
{
	if (!split)
		return "private";
	uint64_t h = fw_hash64(id, strlen(id));
	double sum = split[0] + split[1] + split[2];
	double u = (double)(h >> 11) / 9007199254740992.0 * sum;
	assert(sum > 0);
	if (u < split[0])
		return "train";
	if (u < split[0] + split[1])
		return "eval";
	return "private";
}

int fw_task_split_parse(const char *s, double out[3])
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

int fw_task_source(struct fw_mpv rec, char **repo, char **cmd, char **fmt)
{
	struct fw_mpv v;
	const char *s;
	size_t n;
	*repo = *cmd = *fmt = NULL;
	if (fw_mp_get(rec, "repo", &v) != 1 || fw_mp_str(v, &s, &n) < 0)
		return 1;
	*repo = strndup(s, n);
	*cmd = field(rec, "test_cmd");
	*fmt = field(rec, "report");
	return *repo && *cmd && *fmt ? 0 : -1;
}

/* ---- validating mutations ---------------------------------------------------------- */

static const char *const reason_names[FW_TASK_NREASONS] = {
	"nothing-to-remove", "leak", "broken", "timeout", "no-f2p", "empty-patch-passes",
};

const char *fw_task_reason_name(enum fw_task_reason r)
{
	if (r < FW_TASK_NREASONS)
		return reason_names[r];
	return r == FW_TASK_KEPT ? "kept" : "error";
}

/* The path's file text, for the helper search and the mutations. */
static const struct fw_text *text_of(const struct fw_task_repo *j, const char *path)
{
	for (size_t i = 0; i < j->nfiles; i++)
		if (strcmp(j->files[i].path, path) == 0)
			return &j->files[i];
	return NULL;
}

static enum fw_task_reason reject(struct fw_task_cand *c, enum fw_task_reason r, const char *fmt,
				  const char *a)
{
	snprintf(c->detail, sizeof c->detail, fmt, a);
	return r;
}

/* Builds the mutation of candidate c.  Returns 0, 1 (nothing to remove)
 * or -1. */
static int build_mutation(const struct fw_task_repo *j, const struct fw_task_cand *c,
			  struct fw_mutation *m)
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
		assert(c->nh <= 16);
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

/* Sorts the base tests into f2p, p2p and xfail by the two mutated runs.
 * Returns 0, or -1 when memory runs out. */
static int classify(const struct fw_report *base, const struct fw_report *m1,
		    const struct fw_report *m2, struct fw_strlist *f2p, struct fw_strlist *p2p,
		    struct fw_strlist *xfail)
{
	int e = 0;
	for (size_t i = 0; i < base->n; i++) {
		const char *id = base->tests[i].id;
		if (base->tests[i].outcome == FW_XFAIL) {
			/* expected failures stay expected: p2p, listed in xfail */
			if (fw_report_is(m1, id, FW_XFAIL) && fw_report_is(m2, id, FW_XFAIL))
				e |= fw_strlist_add(p2p, id) | fw_strlist_add(xfail, id);
		} else if (fw_report_failing(m1, id) && fw_report_failing(m2, id)) {
			e |= fw_strlist_add(f2p, id);
		} else if (fw_report_is(m1, id, FW_PASS) && fw_report_is(m2, id, FW_PASS)) {
			e |= fw_strlist_add(p2p, id);
		}
	}
	return e ? -1 : 0;
}

/* A suite run's status as a reason: FW_TASK_KEPT (it ran) or why not. */
static enum fw_task_reason run_status(struct fw_task_cand *c, int k, const char *detail,
				      const char *err)
{
	if (k < 0)
		return reject(c, FW_TASK_ERROR, "%s", err);
	if (k == FW_SUITE_TIMEOUT)
		return reject(c, FW_TASK_TIMEOUT, "%s", detail);
	if (k == FW_SUITE_NO_REPORT)
		return reject(c, FW_TASK_BROKEN, "%s", detail);
	return FW_TASK_KEPT;
}

enum fw_task_reason fw_task_validate(struct fw_task_repo *j, struct fw_store *s, size_t idx)
{
	const struct fw_task_opts *o = j->o;
	struct fw_task_cand *c = &j->c[idx];
	struct fw_mutation m = { 0 };
	struct fw_audit *audit = NULL;
	struct fw_report *m1 = fw_report_new(), *m2 = fw_report_new();
	struct fw_strlist f2p = { 0 }, p2p = { 0 }, xfail = { 0 }, leaks = { 0 };
	char err[512] = "", mut[FW_OID_HEX], ws[4200], detail[512] = "";
	char *patch = NULL, *prompt = NULL;
	enum fw_task_reason r = FW_TASK_ERROR;
	int k;

	assert(idx < j->nc && j->base_pass);
	snprintf(ws, sizeof ws, "%s/c%zu", j->tmp, idx);
	k = build_mutation(j, c, &m);
	if (k == 1) {
		r = reject(c, FW_TASK_NOTHING, "%s", "no code to remove");
		goto out;
	}
	if (k < 0 || !m1 || !m2) {
		r = reject(c, FW_TASK_ERROR, "%s", "cannot build the mutation");
		goto out;
	}
	struct fw_edit ed = { m.path, m.data, m.len };
	if (fw_store_edit(s, j->tree, &ed, 1, mut, err, sizeof err) < 0) {
		r = reject(c, FW_TASK_ERROR, "%s", err);
		goto out;
	}
	if (strcmp(mut, j->tree) == 0) {
		r = reject(c, FW_TASK_NOTHING, "%s", "the mutation changes nothing");
		goto out;
	}
	audit = fw_audit_new();
	if (!audit || fw_audit_removed(audit, m.removed, strlen(m.removed)) < 0 ||
	    fw_audit_kept_tree(audit, s, mut, err, sizeof err) < 0) {
		r = reject(c, FW_TASK_ERROR, "%s", err[0] ? err : "out of memory");
		goto out;
	}
	if (fw_audit_kept_share(audit) >= 0.5) {
		r = reject(c, FW_TASK_LEAK, "%s", "the removed code is still in the tree");
		goto out;
	}
	if (fw_workspace_create(s, mut, ws, NULL, NULL, err, sizeof err) < 0) {
		r = reject(c, FW_TASK_ERROR, "%s", err);
		goto out;
	}
	k = fw_audit_workspace(audit, ws, &leaks, err, sizeof err);
	if (k != 0) {
		r = k < 0 ? reject(c, FW_TASK_ERROR, "%s", err)
			  : reject(c, FW_TASK_LEAK, "%s", leaks.v[0]);
		goto out;
	}

	/* Run 1: the mutated suite must report results and break something. */
	k = fw_suite_run_env(ws, o->test_cmd, o->fmt, o->timeout_s, j->env, m1, detail,
			     sizeof detail, NULL, 0, err, sizeof err);
	if ((r = run_status(c, k, detail, err)) != FW_TASK_KEPT)
		goto out;
	r = FW_TASK_ERROR;
	if (fw_report_count(m1, FW_PASS) == 0) {
		r = reject(c, FW_TASK_BROKEN, "%s", "no test passes after the mutation");
		goto out;
	}
	size_t nf1 = 0;
	for (size_t i = 0; i < j->base_pass->n; i++)
		nf1 += j->base_pass->tests[i].outcome == FW_PASS &&
		       fw_report_failing(m1, j->base_pass->tests[i].id);
	if (nf1 == 0) {
		r = reject(c, FW_TASK_NO_F2P, "%s", "no passing test fails after the mutation");
		goto out;
	}
	/* Run 2: grading an empty patch — the same workspace, untouched —
	 * must fail the same tests. */
	k = fw_suite_run_env(ws, o->test_cmd, o->fmt, o->timeout_s, j->env, m2, detail,
			     sizeof detail, NULL, 0, err, sizeof err);
	if ((r = run_status(c, k, detail, err)) != FW_TASK_KEPT)
		goto out;
	r = FW_TASK_ERROR;
	if (classify(j->base_pass, m1, m2, &f2p, &p2p, &xfail) < 0) {
		reject(c, r, "%s", "out of memory");
		goto out;
	}
	if (f2p.n == 0) {
		r = reject(c, FW_TASK_EMPTY_PATCH, "%s", "the failing tests pass when run again");
		goto out;
	}
	if (fw_store_diff(s, mut, j->tree, &patch, err, sizeof err) < 0) {
		reject(c, r, "%s", err);
		goto out;
	}
	if (!(prompt = fw_task_prompt(&m, (const char *const *)f2p.v, f2p.n))) {
		reject(c, r, "%s", "out of memory");
		goto out;
	}

	/* The id names the repository tree, the mutation and the environment. */
	char key[260], id[17], ref[64];
	snprintf(key, sizeof key, "%s\n%s\n%s%s%s", j->tree, mut, fw_strategy_name(m.strategy),
		 j->env ? "\n" : "", j->env ? j->env->id : "");
	snprintf(id, sizeof id, "%016llx", (unsigned long long)fw_hash64(key, strlen(key)));
	snprintf(ref, sizeof ref, "tasks/%s", id);
	if (fw_store_keep(s, ref, mut, err, sizeof err) < 0) {
		reject(c, r, "%s", err);
		goto out;
	}

	struct fw_task t = {
		.id = id, .repo = j->repo, .base = j->base, .store = o->store_abs,
		.orig_tree = j->tree, .tree = mut, .strategy = fw_strategy_name(m.strategy),
		.targets = m.targets, .ntargets = m.ntargets, .prompt = prompt,
		.test_cmd = o->test_cmd, .fmt = o->fmt, .f2p = &f2p, .p2p = &p2p,
		.xfail = &xfail, .solution = patch, .split = fw_task_split(o->split, id),
		.lang = m.targets[0].lang, .env = j->env ? j->env->id : NULL,
	};
	msgpack_packer pk;
	fw_buf_packer(&pk, &c->rec);
	if (fw_task_pack(&pk, &t) < 0) {
		reject(c, r, "%s", "out of memory");
		goto out;
	}
	r = FW_TASK_KEPT;
out:
	fw_rmtree(ws);
	free(patch);
	free(prompt);
	fw_strlist_release(&f2p);
	fw_strlist_release(&p2p);
	fw_strlist_release(&xfail);
	fw_strlist_release(&leaks);
	fw_report_free(m1);
	fw_report_free(m2);
	fw_audit_free(audit);
	fw_mutation_release(&m);
	return r;
}

/* ---- preparing a repository ------------------------------------------------------- */

static int has_symbols(const struct fw_task_repo *j, const char *path)
{
	for (size_t i = 0; i < j->syms.n; i++)
		if (strcmp(j->syms.v[i].path, path) == 0)
			return 1;
	return 0;
}

/* Reads every source text of the tree for the mutations and the helper
 * search. */
static int load_texts(struct fw_task_repo *j, struct fw_store *s, char *err, size_t errlen)
{
	struct fw_file *f;
	size_t n;
	if (fw_store_files(s, j->tree, &f, &n, err, errlen) < 0)
		return -1;
	j->files = calloc(n ? n : 1, sizeof *j->files);
	if (!j->files) {
		fw_files_free(f, n);
		fw_seterr(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		if (fw_lang_of_path(f[i].path) == FW_LANG_UNKNOWN && !has_symbols(j, f[i].path))
			continue;
		char *data, *path;
		size_t len;
		if (fw_store_read(s, j->tree, f[i].path, &data, &len, err, errlen) < 0)
			continue;
		if (memchr(data, '\0', len) || !(path = strdup(f[i].path))) {
			free(data);
			continue;
		}
		j->files[j->nfiles++] = (struct fw_text){ path, data, len };
	}
	fw_files_free(f, n);
	return 0;
}

static int add_cand(struct fw_task_repo *j, enum fw_strategy st, size_t sym, const size_t *h,
		    size_t nh)
{
	struct fw_task_cand *c = realloc(j->c, (j->nc + 1) * sizeof *c);
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

static int make_candidates(struct fw_task_repo *j)
{
	const struct fw_task_opts *o = j->o;
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
	/* the seed fixes the order in which candidates are tried */
	uint64_t s = o->seed;
	for (size_t i = j->nc; i > 1; i--) {
		size_t k = (size_t)(fw_rand64(&s) % i);
		struct fw_task_cand t = j->c[i - 1];
		j->c[i - 1] = j->c[k];
		j->c[k] = t;
	}
	return 0;
}

/* Says why the repository is not used; returns 1. */
static int unusable(struct fw_task_repo *j, const char *reason, const char *fmt, const char *a)
{
	snprintf(j->msg, sizeof j->msg, fmt, a);
	snprintf(j->why, sizeof j->why, "%s (%s)", reason, j->msg);
	return 1;
}

/* Appends a copy of a (id and outcome) to the sorted report r.  Returns 0
 * or -1 (out of memory). */
static int report_push(struct fw_report *r, const struct fw_test_result *a)
{
	char *id = strdup(a->id);
	if (!id)
		return -1;
	if (r->n == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 64;
		struct fw_test_result *t = realloc(r->tests, cap * sizeof *t);
		if (!t) {
			free(id);
			return -1;
		}
		r->tests = t;
		r->cap = cap;
	}
	r->tests[r->n++] = (struct fw_test_result){ id, a->outcome, 0, NULL };
	return 0;
}

/* Runs the original suite twice and keeps what passes both times.
 * Returns 0, 1 (unusable) or -1. */
static int baseline(struct fw_task_repo *j, const char *ws)
{
	const struct fw_task_opts *o = j->o;
	struct fw_report *r1 = fw_report_new(), *r2 = fw_report_new();
	char err[512] = "", detail[512] = "";
	int rc = -1;
	j->base_pass = fw_report_new();
	if (!r1 || !r2 || !j->base_pass)
		goto out;
	for (int run = 0; run < 2; run++) {
		int k = fw_suite_run_env(ws, o->test_cmd, o->fmt, o->timeout_s, j->env,
					 run ? r2 : r1, detail, sizeof detail, j->tail,
					 sizeof j->tail, err, sizeof err);
		if (k < 0) {
			rc = unusable(j, "error", "%s", err);
			goto out;
		}
		j->show_tail = k != FW_SUITE_OK;
		if (k == FW_SUITE_TIMEOUT) {
			rc = unusable(j, "suite-timeout",
				      "the original test suite did not finish: %s", detail);
			goto out;
		}
		if (k == FW_SUITE_NO_REPORT) {
			rc = unusable(j, "no-tests", "no tests found: %s", detail);
			goto out;
		}
	}
	/* the report keeps sorted order: r1's is */
	for (size_t i = 0; i < r1->n; i++) {
		const struct fw_test_result *a = &r1->tests[i];
		const struct fw_test_result *b = fw_report_find(r2, a->id);
		if (!b || b->outcome != a->outcome) {
			j->nflaky++;
			continue;
		}
		if (a->outcome != FW_PASS && a->outcome != FW_XFAIL) {
			j->nbad += a->outcome == FW_FAIL || a->outcome == FW_ERROR;
			continue;
		}
		if (report_push(j->base_pass, a) < 0)
			goto out;
	}
	if (fw_report_count(j->base_pass, FW_PASS) == 0) {
		char counts[128];
		snprintf(counts, sizeof counts, "%zu of %zu tests fail or error, %zu flaky",
			 j->nbad, r1->n, j->nflaky);
		j->show_tail = 1;
		rc = unusable(j, "no-passing-test", "no test passes on the original: %s", counts);
		goto out;
	}
	rc = 0;
out:
	fw_report_free(r1);
	fw_report_free(r2);
	return rc;
}

int fw_task_repo_env(const struct fw_env *given, const char *env_store, const char *repo,
		     struct fw_env *own, const struct fw_env **env, char *msg, size_t msglen)
{
	char path[4200], rid[FW_ENV_ID_LEN], id[FW_ENV_ID_LEN];
	struct stat st;
	*env = given;
	if (given)
		return 0;
	snprintf(path, sizeof path, "%s/%s", repo, FW_ENV_RECIPE);
	if (lstat(path, &st) != 0)
		return 0;
	if (fw_env_recipe_id(path, rid, msg, msglen) < 0)
		return -1;
	int k = fw_env_recipe_find(env_store, rid, id, msg, msglen);
	if (k < 0)
		return -1;
	if (k == 0) {
		snprintf(msg, msglen, "the env store %s holds no environment built from its "
			 FW_ENV_RECIPE " (run fw-env build on the repository, or give --env)",
			 env_store);
		return -1;
	}
	if (fw_env_open(own, env_store, id, msg, msglen) < 0)
		return -1;
	*env = own;
	return 0;
}

int fw_task_repo_open(struct fw_task_repo *j, const struct fw_task_opts *o, const char *repo,
		      const char *tmp)
{
	char err[512] = "", ws[4200], ref[64];
	int rc = -1, dirty = 0;

	memset(j, 0, sizeof *j);
	j->o = o;
	j->repo = repo;
	j->tmp = tmp;
	struct fw_store *s = fw_store_open(o->store, 1, err, sizeof err);
	if (!s)
		return unusable(j, "error", "%s", err);
	if (fw_store_import(s, repo, "HEAD", j->tree, j->base, &dirty, err, sizeof err) < 0) {
		rc = unusable(j, "import-failed", "%s", err);
		goto out;
	}
	if (dirty && !o->allow_dirty) {
		rc = unusable(j, "dirty", "%s", "work tree has uncommitted changes (commit them, "
			      "or --allow-dirty to use HEAD as committed)");
		goto out;
	}
	if (fw_task_repo_env(o->env, o->env_store, repo, &j->own_env, &j->env, err,
			     sizeof err) < 0) {
		rc = unusable(j, "env-missing", "%s", err);
		goto out;
	}
	snprintf(ref, sizeof ref, "base/%s", j->tree);
	snprintf(ws, sizeof ws, "%s/orig", tmp);
	if (fw_store_keep(s, ref, j->tree, err, sizeof err) < 0 ||
	    fw_workspace_create(s, j->tree, ws, NULL, NULL, err, sizeof err) < 0 ||
	    fw_ctags(ws, o->lang, &j->syms, err, sizeof err) < 0 ||
	    load_texts(j, s, err, sizeof err) < 0) {
		rc = unusable(j, "error", "%s", err);
		goto out;
	}
	if ((rc = baseline(j, ws)) != 0)
		goto out;
	fw_rmtree(ws);
	rc = make_candidates(j);
out:
	fw_store_free(s);
	return rc;
}

void fw_task_repo_release(struct fw_task_repo *j)
{
	if (!j)
		return;
	for (size_t i = 0; i < j->nc; i++)
		fw_buf_free(&j->c[i].rec);
	free(j->c);
	for (size_t i = 0; i < j->nfiles; i++) {
		free((char *)j->files[i].path);
		free((char *)j->files[i].data);
	}
	free(j->files);
	fw_symbols_release(&j->syms);
	fw_report_free(j->base_pass);
	memset(j, 0, sizeof *j);
}
