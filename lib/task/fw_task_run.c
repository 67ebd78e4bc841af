/*
 * fw_task_run.c — a repository's candidates on the shared ordered pool,
 * the tasks of the finished prefix, the stores a run opens.  See
 * fw_task_run.h.
 */
#include "fw_task_run.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fw_cli.h"

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
