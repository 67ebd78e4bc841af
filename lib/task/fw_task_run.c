/*
 * fw_task_run.c — a repository's candidates on the shared ordered pool,
 * the tasks of the finished prefix, the stores a run opens, the
 * repositories of the operands and the run over them.  See fw_task_run.h.
 */
#include "fw_task_run.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fw_cli.h"
#include "fw_report.h"
#include "fw_stream.h"

/* One validation run: the pool's callbacks share it. */
struct run {
	struct fw_task_repo *j;
	uint64_t max, kept, ndone;
	struct fw_progress prog;
	int failed;
	char msg[512];
};

/* A worker's own store handle, or why it has none. */
struct worker {
	struct fw_store *s;
	char err[512];
};

static void *worker_init(void *arg)
{
	struct run *R = arg;
	struct worker *w = calloc(1, sizeof *w);
	if (w)
		w->s = fw_store_open(R->j->o->store, 0, w->err, sizeof w->err);
	return w;
}

static void worker_fini(void *state, void *arg)
{
	struct worker *w = state;
	(void)arg;
	if (w)
		fw_store_free(w->s);
	free(w);
}

/* A job is a candidate, validated with the worker's store. */
static int work(void *state, void *job, void *arg)
{
	struct worker *w = state;
	struct run *R = arg;
	struct fw_task_cand *c = job;
	if (!w || !w->s) {
		snprintf(c->detail, sizeof c->detail, "%s", w ? w->err : "out of memory");
		return FW_TASK_ERROR;
	}
	return (int)fw_task_validate(R->j, w->s, (size_t)(c - R->j->c));
}

/* In order: the outcome kept, the meter ticked; the first failure, or the
 * max-th task, stops the pool (the candidates in flight are dropped, so
 * they stay not done and outside the finished prefix). */
static int done(void *job, int rc, void *arg)
{
	struct run *R = arg;
	struct fw_task_cand *c = job;
	c->reason = (enum fw_task_reason)rc;
	c->done = 1;
	fw_progress_tick(&R->prog, ++R->ndone, 0);
	if (rc == FW_TASK_ERROR) {
		R->failed = 1;
		snprintf(R->msg, sizeof R->msg, "%s", c->detail);
		return -1;
	}
	if (rc == FW_TASK_KEPT && R->max && ++R->kept >= R->max)
		return -1;
	return 0;
}

int fw_task_repo_validate(struct fw_task_repo *j, int workers, uint64_t max, int progress,
			  char *msg, size_t msglen)
{
	struct run R = { .j = j, .max = max };
	struct fw_pool_conf pc = { .workers = workers, .worker_init = worker_init,
				   .worker_fini = worker_fini, .work = work, .done = done,
				   .arg = &R };
	fw_progress_start(&R.prog, progress);
	struct fw_pool *P = fw_pool_new(&pc);
	if (!P) {
		fw_progress_end(&R.prog);
		fw_seterr(msg, msglen, "cannot start a worker thread");
		return -1;
	}
	for (size_t i = 0; i < j->nc; i++)
		if (fw_pool_submit(P, &j->c[i]) < 0)
			break;
	fw_pool_finish(P);
	fw_pool_free(P);
	fw_progress_end(&R.prog);
	if (R.failed)
		fw_seterr(msg, msglen, "%s", R.msg);
	return R.failed ? -1 : 0;
}

int fw_task_repo_results(const struct fw_task_repo *j, uint64_t max, struct fw_task_tally *t,
			 int (*kept)(void *arg, const struct fw_task_cand *c),
			 void (*rejected)(void *arg, const struct fw_task_cand *c), void *arg)
{
	uint64_t k = 0;
	for (size_t i = 0; i < j->nc && j->c[i].done; i++) {
		if (max && k >= max)
			break;
		const struct fw_task_cand *c = &j->c[i];
		t->cand++;
		if (c->reason == FW_TASK_KEPT) {
			int r = kept(arg, c);
			if (r)
				return r;
			k++;
			t->ok++;
			continue;
		}
		t->why[c->reason]++;
		if (rejected)
			rejected(arg, c);
	}
	return 0;
}

int fw_task_run_open(struct fw_task_opts *t, const char *env_arg, struct fw_env *env,
		     char **store_abs, char *env_store, size_t env_store_len, char *err,
		     size_t errlen)
{
	struct fw_store *s = fw_store_open(t->store, 1, err, errlen);
	if (!s)
		return -1;
	fw_store_free(s);
	if (!(*store_abs = realpath(t->store, NULL))) {
		fw_seterr(err, errlen, "%s", strerror(errno));
		return -1;
	}
	t->store_abs = *store_abs;
	/* the environment: named once, the same for every repository */
	if (fw_env_store_path(t->env_store, *store_abs, env_store, env_store_len, err, errlen) < 0)
		return -1;
	t->env_store = env_store;
	if (env_arg) {
		char id[FW_ENV_ID_LEN];
		if (fw_env_resolve(t->env_store, env_arg, id, err, errlen) < 0 ||
		    fw_env_open(env, t->env_store, id, err, errlen) < 0)
			return -1;
		t->env = env;
	}
	return 0;
}

int fw_task_run_history(struct fw_history_opts *h, const struct fw_task_opts *t,
			const char *repo, fw_history_emit_fn emit, fw_history_note_fn note,
			void *ctx, struct fw_history_tally *tally, char *err, size_t errlen)
{
	h->test_cmd = t->test_cmd;
	h->fmt = t->fmt;
	h->timeout_s = t->timeout_s;
	h->shard_k = t->shard_k;
	h->shard_n = t->shard_n;
	h->store = t->store;
	h->store_abs = t->store_abs;
	struct fw_env *own = malloc(sizeof *own);
	int rc = -1;
	if (!own)
		fw_seterr(err, errlen, "out of memory");
	else if (fw_task_repo_env(t->env, t->env_store, repo, own, &h->env, err, errlen) == 0)
		rc = fw_history_run(h, repo, emit, note, ctx, tally, err, errlen);
	free(own);
	return rc;
}

/* Appends ", NAME N" for each reason (": " before the first) to buf. */
static void reasons(char *buf, size_t len, const uint64_t *why, int n,
		    const char *(*name)(int r))
{
	for (int r = 0; r < n; r++) {
		size_t l = strlen(buf);
		snprintf(buf + l, len > l ? len - l : 0, "%s %s %llu", r ? "," : ":", name(r),
			 (unsigned long long)why[r]);
	}
}

static const char *task_reason(int r)
{
	return fw_task_reason_name((enum fw_task_reason)r);
}

static const char *history_reason(int r)
{
	return fw_history_reason_name((enum fw_history_reason)r);
}

void fw_task_tally_format(char *buf, size_t len, const struct fw_task_tally *t)
{
	snprintf(buf, len, "candidates %llu, validated %llu, rejected %llu",
		 (unsigned long long)t->cand, (unsigned long long)t->ok,
		 (unsigned long long)(t->cand - t->ok));
	reasons(buf, len, t->why, FW_TASK_NREASONS, task_reason);
}

void fw_task_history_tally_format(char *buf, size_t len, const struct fw_history_tally *h)
{
	snprintf(buf, len, "history: commits %llu, candidates %llu, validated %llu",
		 (unsigned long long)h->scanned, (unsigned long long)h->candidates,
		 (unsigned long long)h->kept);
	reasons(buf, len, h->why, FW_HIST_NREASONS, history_reason);
}

/* ---- a run over repositories ----------------------------------------------------- */

/* Formats a diagnostic line whole and says it (say NULL: nothing).  When
 * memory runs out, its first 1023 bytes. */
static void sayf(fw_task_say_fn say, void *arg, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void sayf(fw_task_say_fn say, void *arg, const char *fmt, ...)
{
	char small[1024];
	va_list ap;
	if (!say)
		return;
	va_start(ap, fmt);
	int n = vsnprintf(small, sizeof small, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	char *big = n >= (int)sizeof small ? malloc((size_t)n + 1) : NULL;
	if (big) {
		va_start(ap, fmt);
		vsnprintf(big, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	say(arg, big ? big : small);
	free(big);
}

int fw_task_operand_kind(const char *operand)
{
	struct stat sb;
	if (strcmp(operand, "-") == 0)
		return 0;
	if (stat(operand, &sb) < 0)
		return -1;
	return S_ISDIR(sb.st_mode) ? 1 : 0;
}

/* Appends a repository with its command and format to s, all three or
 * none.  Returns 0, or -1 when memory runs out. */
static int source_add(struct fw_task_sources *s, const char *repo, const char *cmd,
		      const char *fmt)
{
	size_t n = s->repos.n;
	if (fw_strlist_add(&s->repos, repo) == 0 && fw_strlist_add(&s->cmds, cmd) == 0 &&
	    fw_strlist_add(&s->fmts, fmt) == 0)
		return 0;
	struct fw_strlist *l[3] = { &s->repos, &s->cmds, &s->fmts };
	for (int i = 0; i < 3; i++)
		while (l[i]->n > n)
			free(l[i]->v[--l[i]->n]);
	return -1;
}

/* The repositories named by the `repo` fields of the record stream at
 * path.  Returns 0, or -1 after a fault. */
static int sources_from_stream(struct fw_task_sources *s, const char *path, fw_task_say_fn warn,
			       void *arg)
{
	char err[256];
	struct fw_reader *r = fw_reader_open(path, NULL, err, sizeof err);
	if (!r) {
		sayf(warn, arg, "%s: %s", path, err);
		return -1;
	}
	struct fw_rec rec;
	int k, rc = 0;
	while ((k = fw_reader_next(r, &rec)) == 1) {
		char *p, *c, *f;
		int got = fw_task_source(rec.v, &p, &c, &f);
		if (got == 1) {
			sayf(warn, arg, "%s: record %llu (byte %llu): no 'repo' string",
			     fw_reader_name(r), (unsigned long long)rec.index + 1,
			     (unsigned long long)rec.offset);
			rc = -1;
			continue;
		}
		if (got < 0 || source_add(s, p, c, f) < 0)
			rc = -1;
		free(p);
		free(c);
		free(f);
	}
	if (k < 0) {
		char where[1024];
		fw_reader_fault(r, where, sizeof where);
		sayf(warn, arg, "%s", where);
		rc = -1;
	}
	fw_reader_close(r);
	return rc;
}

int fw_task_sources_fill(struct fw_task_sources *s, int n, char *const *ops, fw_task_say_fn warn,
			 void *arg)
{
	int rc = 0;
	for (int i = 0; i < n; i++) {
		int kind = fw_task_operand_kind(ops[i]);
		if (kind > 0) {
			if (source_add(s, ops[i], "", "") < 0)
				rc = -1;
		} else if (kind < 0) {
			sayf(warn, arg, "%s: %s", ops[i], strerror(errno));
			rc = -1;
		} else if (sources_from_stream(s, ops[i], warn, arg) < 0) {
			rc = -1;
		}
	}
	return rc;
}

void fw_task_sources_release(struct fw_task_sources *s)
{
	if (!s)
		return;
	fw_strlist_release(&s->repos);
	fw_strlist_release(&s->cmds);
	fw_strlist_release(&s->fmts);
}

/* One repository of a run: what the callbacks of its results and of its
 * history need. */
struct repo_ctx {
	struct fw_task_run *R;
	const struct fw_task_repo *r;
	const char *repo;
};

static int put_task(void *arg, const struct fw_task_cand *c)
{
	struct repo_ctx *x = arg;
	return x->R->emit(x->R->arg, c->rec.p, c->rec.n);
}

static int put_commit(void *ctx, const void *rec, size_t n)
{
	struct repo_ctx *x = ctx;
	return x->R->emit(x->R->arg, rec, n);
}

static void say_rejected(void *arg, const struct fw_task_cand *c)
{
	struct repo_ctx *x = arg;
	if (!x->R->note)
		return;
	int file = c->strategy == FW_DELETE_FILE;
	sayf(x->R->note, x->R->arg, "%s: %s %s%s%s: %s: %s", x->repo,
	     fw_strategy_name(c->strategy), c->path, file ? "" : ":",
	     file ? "" : x->r->syms.v[c->sym].name, fw_task_reason_name(c->reason), c->detail);
}

static void say_commit(void *ctx, const char *hex, const char *subject, enum fw_history_reason r,
		       const char *detail)
{
	struct repo_ctx *x = ctx;
	sayf(x->R->note, x->R->arg, "%s: %.12s %s: %s: %s", x->repo, hex, subject,
	     fw_history_reason_name(r), detail);
}

/* To note: the last lines the test command printed, which say why the
 * original suite cannot be used. */
static void say_tail(const struct fw_task_run *R, const struct fw_task_repo *r, const char *repo)
{
	if (!R->note || !r->show_tail || !r->tail[0])
		return;
	sayf(R->note, R->arg, "%s: the test command's output ends:", repo);
	for (const char *p = r->tail; *p;) {
		const char *e = strchr(p, '\n');
		int n = e ? (int)(e - p) : (int)strlen(p);
		sayf(R->note, R->arg, "%s: | %.*s", repo, n, p);
		p += n + (e != NULL);
	}
}

/* The mutations of repo with options t, up to max tasks (0: no limit).
 * why gets the reason a repository was not used.  Returns 0 or -1. */
static int run_mutations(struct fw_task_run *R, const struct fw_task_opts *t, uint64_t max,
			 const char *repo, char *why, size_t whylen)
{
	struct fw_task_repo r = { 0 };
	struct repo_ctx x = { R, &r, repo };
	char tmp[4096], msg[512];
	int rc = -1;
	if (fw_scratch_make(tmp) < 0) {
		snprintf(why, whylen, "error (cannot make a temporary directory)");
		return -1;
	}
	int k = fw_task_repo_open(&r, t, repo, tmp);
	if (r.nflaky)
		sayf(R->warn, R->arg, "%s: %zu flaky tests (differ between two runs) are excluded",
		     repo, r.nflaky);
	if (r.nbad)
		sayf(R->warn, R->arg, "%s: %zu tests fail on the original and are excluded", repo,
		     r.nbad);
	if (k != 0) {
		sayf(R->warn, R->arg, "%s: %s", repo, k > 0 ? r.msg : "out of memory");
		say_tail(R, &r, repo);
	} else if (fw_task_repo_validate(&r, (int)R->jobs, max, R->progress, msg, sizeof msg) < 0) {
		snprintf(r.why, sizeof r.why, "error (%s)", msg);
		sayf(R->warn, R->arg, "%s: %s", repo, msg);
	} else if (fw_task_repo_results(&r, max, &R->tally, put_task, say_rejected, &x) == 0) {
		rc = 0;
	}
	snprintf(why, whylen, "%s", r.why);
	fw_task_repo_release(&r);
	fw_scratch_remove(tmp);
	return rc;
}

/* The history of repo with options t, up to max tasks (0: no limit).
 * Returns 0 or -1. */
static int run_history(struct fw_task_run *R, const struct fw_task_opts *t, uint64_t max,
		       const char *repo)
{
	struct fw_history_opts h = R->h;
	struct repo_ctx x = { R, NULL, repo };
	char tmp[4096], err[1024];
	if (fw_scratch_make(tmp) < 0)
		return -1;
	h.max = max;
	h.jobs = R->jobs;
	h.tmp = tmp;
	int rc = fw_task_run_history(&h, t, repo, put_commit, say_commit, &x, &R->htally, err,
				     sizeof err);
	if (rc < 0)
		sayf(R->warn, R->arg, "%s: %s", repo, err);
	fw_scratch_remove(tmp);
	return rc;
}

/* One repository of the run, with its own test command and report format
 * ("": the run's).  Returns 0 or -1. */
static int run_repo(struct fw_task_run *R, const char *repo, const char *cmd, const char *fmt)
{
	struct fw_task_opts t = R->t;
	uint64_t max = R->max ? R->max - R->tally.ok - R->htally.kept : 0;
	int st, rc = 0;
	if (cmd[0])
		t.test_cmd = cmd;
	if (fmt[0] && (st = fw_report_format_parse(fmt)) >= 0) {
		t.fmt = (enum fw_report_format)st;
	} else if (fmt[0]) {
		sayf(R->warn, R->arg, "%s: unknown report format '%s' (junit, tap, gotest)", repo,
		     fmt);
		return -1;
	}
	if (!t.test_cmd) {
		sayf(R->warn, R->arg, "%s: no test command (--test-cmd, or a test_cmd field)",
		     repo);
		return -1;
	}
	if (R->history && run_history(R, &t, max, repo) < 0)
		rc = -1;
	if (R->max && R->tally.ok + R->htally.kept >= R->max)
		t.strategies = 0;
	else if (R->max)
		max = R->max - R->tally.ok - R->htally.kept;
	struct fw_task_tally before = R->tally;
	char why[600] = "", line[1400];
	if (t.strategies) {
		if (run_mutations(R, &t, max, repo, why, sizeof why) < 0)
			rc = -1;
		if (why[0])
			snprintf(line, sizeof line, "%s: not used: %s", repo, why);
		else
			snprintf(line, sizeof line, "%s: candidates %llu, validated %llu", repo,
				 (unsigned long long)(R->tally.cand - before.cand),
				 (unsigned long long)(R->tally.ok - before.ok));
		fw_strlist_add(&R->lines, line);
	}
	if (R->flush)
		R->flush(R->arg);
	return rc;
}

int fw_task_run_all(struct fw_task_run *R, const struct fw_task_sources *s)
{
	int rc = 0;
	for (size_t i = 0; i < s->repos.n; i++) {
		if (R->max && R->tally.ok + R->htally.kept >= R->max)
			break;
		if (run_repo(R, s->repos.v[i], s->cmds.v[i], s->fmts.v[i]) < 0)
			rc = -1;
	}
	return rc;
}

void fw_task_run_release(struct fw_task_run *R)
{
	if (R)
		fw_strlist_release(&R->lines);
}
