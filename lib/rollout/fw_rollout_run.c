/*
 * fw_rollout_run.c — the rollouts of a task record: fill episodes, agent
 * episodes and exec runs of the policy, each written as a rollout record.
 * See fw_rollout.h and rollout(1).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fw_agent_tools.h"
#include "fw_base.h"
#include "fw_cli.h" /* fw_now() */
#include "fw_env.h"
#include "fw_history.h" /* fw_context_mount() */
#include "fw_json.h"
#include "fw_mp.h"
#include "fw_policy.h"
#include "fw_rollout.h"
#include "fw_rollout_run.h"
#include "fw_store.h"

/* A string field of map m, NUL-terminated in buf, or NULL. */
static const char *get_str(struct fw_mpv m, const char *key, char *buf, size_t cap)
{
	struct fw_mpv v;
	const char *s;
	size_t n;

	if (fw_mp_get(m, key, &v) != 1 || fw_mp_str(v, &s, &n) || n >= cap || memchr(s, 0, n))
		return NULL;
	memcpy(buf, s, n);
	buf[n] = '\0';
	return buf;
}

/* What an episode produced, for the record. */
struct episode {
	int sample;
	uint64_t seed;
	struct fw_buf turns; /* msgpack array */
	const char *patch;
	struct fw_buf events; /* msgpack array, may be empty (then []) */
	struct fw_buf extra;  /* msgpack pairs appended to the record */
	int nextra;
	const char *stop;
	const char *error;    /* NULL or a message */
	double time;
};

/* A record that memory ran out packing: counted as a failed sample, not
 * written.  Returns -1. */
static int lost(struct fw_rollout_out *j)
{
	if (!j->failed++)
		snprintf(j->err, sizeof j->err, "out of memory packing the rollout record");
	return -1;
}

/* Appends one rollout record to j->out; on running out of memory, none
 * (lost()).  Returns 0 or -1. */
static int emit(const struct fw_rollout_cfg *o, struct fw_rollout_out *j, struct fw_mpv task, const char *tid,
		const struct episode *e)
{
	struct fw_buf tb = { 0 };
	struct fw_field del = { "solution", 8, { NULL, 0 } };
	msgpack_packer pk;
	char id[17];
	int n = 12 + (e->error != NULL) + !o->no_time + e->nextra;
	size_t start = j->out.n;

	if (fw_rec_set(&tb, task, &del, 1))
		return lost(j);
	fw_rollout_id(id, tid, strlen(tid), o->policy, o->seed, e->sample);
	fw_buf_packer(&pk, &j->out);
	msgpack_pack_map(&pk, (size_t)n);
	fw_pack_cstr(&pk, "kind");
	fw_pack_cstr(&pk, "rollout");
	fw_pack_cstr(&pk, "id");
	fw_pack_cstr(&pk, id);
	fw_pack_cstr(&pk, "v");
	msgpack_pack_int(&pk, 1);
	fw_pack_cstr(&pk, "task");
	fw_buf_append(&j->out, tb.p, tb.n);
	fw_buf_free(&tb);
	fw_pack_cstr(&pk, "policy");
	msgpack_pack_map(&pk, o->backend == FW_POLICY_EXEC ? 3
					 : 6 + (o->backend == FW_POLICY_HTTP && o->model) + o->tools +
						   (o->tool_defs != NULL));
	fw_pack_cstr(&pk, "backend");
	fw_pack_cstr(&pk, o->backend == FW_POLICY_BUILTIN ? "builtin" : o->backend == FW_POLICY_HTTP ? "http" : "exec");
	fw_pack_cstr(&pk, o->backend == FW_POLICY_BUILTIN ? "ckpt" : o->backend == FW_POLICY_HTTP ? "url" : "cmd");
	fw_pack_cstr(&pk, o->arg);
	if (o->backend == FW_POLICY_HTTP && o->model) {
		fw_pack_cstr(&pk, "model");
		fw_pack_cstr(&pk, o->model);
	}
	if (o->tools) {
		/* the agent called tools (fw_agent_tools.h), not bash blocks */
		fw_pack_cstr(&pk, "tools");
		msgpack_pack_true(&pk);
	}
	if (o->tool_defs) {
		fw_pack_cstr(&pk, "tool_defs");
		fw_pack_text(&pk, o->tool_defs, strlen(o->tool_defs));
	}
	fw_pack_cstr(&pk, "seed");
	msgpack_pack_uint64(&pk, o->seed);
	if (o->backend != FW_POLICY_EXEC) {
		fw_pack_cstr(&pk, "temp");
		msgpack_pack_double(&pk, o->temp);
		fw_pack_cstr(&pk, "top_p");
		msgpack_pack_double(&pk, o->top_p);
		fw_pack_cstr(&pk, "top_k");
		msgpack_pack_int(&pk, o->top_k);
	}
	fw_pack_cstr(&pk, "mode");
	fw_pack_cstr(&pk, o->backend == FW_POLICY_EXEC ? "exec" : o->agent ? "agent" : "fill");
	fw_pack_cstr(&pk, "sample");
	msgpack_pack_int(&pk, e->sample);
	fw_pack_cstr(&pk, "seed");
	msgpack_pack_uint64(&pk, e->seed);
	fw_pack_cstr(&pk, "turns");
	if (e->turns.n)
		fw_buf_append(&j->out, e->turns.p, e->turns.n);
	else
		msgpack_pack_array(&pk, 0);
	fw_pack_cstr(&pk, "patch");
	fw_pack_cstr(&pk, e->patch ? e->patch : "");
	fw_pack_cstr(&pk, "events");
	if (e->events.n)
		fw_buf_append(&j->out, e->events.p, e->events.n);
	else
		msgpack_pack_array(&pk, 0);
	fw_pack_cstr(&pk, "stop");
	fw_pack_cstr(&pk, e->stop);
	if (e->nextra)
		fw_buf_append(&j->out, e->extra.p, e->extra.n);
	if (!o->no_time) {
		fw_pack_cstr(&pk, "time");
		msgpack_pack_double(&pk, (double)(long long)(e->time * 1000 + 0.5) / 1000);
	}
	if (e->error) {
		/* messages may quote what a server or agent sent */
		size_t en;
		char *fixed = fw_utf8_fix(e->error, strlen(e->error), &en);
		fw_pack_cstr(&pk, "error");
		fw_pack_str(&pk, fixed ? fixed : "", fixed ? en : 0);
		if (!j->failed++)
			snprintf(j->err, sizeof j->err, "%s", fixed ? fixed : "");
		free(fixed);
	}
	/* the episode's parts, packed apart, failed as the record would */
	if (e->turns.failed || e->events.failed || e->extra.failed)
		j->out.failed = 1;
	if (fw_buf_packed(&j->out, start) < 0) {
		j->failed -= e->error != NULL;
		return lost(j);
	}
	return 0;
}

/* Emits o->samples error records for a task that could not be run. */
static void emit_errors(struct fw_rollout_worker *w, struct fw_rollout_out *j, struct fw_mpv task, const char *tid,
			const char *msg)
{
	for (int k = 0; k < (int)w->o->samples; k++) {
		struct episode e = { .sample = k, .stop = "error", .error = msg };
		e.seed = fw_rollout_seed(w->o->seed, tid, strlen(tid), k);
		emit(w->o, j, task, tid, &e);
	}
}

static struct fw_store *store_for(struct fw_rollout_worker *w, const char *path, char *err, size_t errlen)
{
	if (w->st && !strcmp(w->st_path, path))
		return w->st;
	fw_store_free(w->st);
	free(w->st_path);
	w->st_path = NULL;
	if (!(w->st = fw_store_open(path, 0, err, errlen)))
		return NULL;
	if (!(w->st_path = strdup(path))) {
		fw_store_free(w->st);
		w->st = NULL;
		snprintf(err, errlen, "out of memory");
	}
	return w->st;
}

static long cut_cb(void *ctx, const char *text, size_t n)
{
	return fw_fill_cut(ctx, text, n);
}

/* Packs {role, text[, tokens][, logprobs]} into b. */
static void pack_turn(struct fw_buf *b, const char *role, const char *text, size_t n,
		      const int32_t *tok, const float *lp, size_t nt)
{
	msgpack_packer pk;

	fw_buf_packer(&pk, b);
	msgpack_pack_map(&pk, 2 + (tok != NULL) + (lp != NULL));
	fw_pack_cstr(&pk, "role");
	fw_pack_cstr(&pk, role);
	fw_pack_cstr(&pk, "text");
	fw_pack_str(&pk, text, n);
	if (tok) {
		fw_pack_cstr(&pk, "tokens");
		msgpack_pack_array(&pk, nt);
		for (size_t i = 0; i < nt; i++)
			msgpack_pack_int32(&pk, tok[i]);
	}
	if (!lp)
		return;
	fw_pack_cstr(&pk, "logprobs");
	msgpack_pack_array(&pk, nt);
	for (size_t i = 0; i < nt; i++)
		msgpack_pack_float(&pk, lp[i]);
}

/* The fields of a task an episode needs. */
struct task_in {
	char id[128], tree[64], store[4096], path[4096], lang[32], strategy[64];
	int start;
	const char *prompt;
	size_t plen;
};

static const char *read_task(const struct fw_rollout_cfg *o, struct fw_mpv t, struct task_in *ti)
{
	struct fw_mpv v, tg;
	int64_t start;

	if (!get_str(t, "tree", ti->tree, sizeof ti->tree) || strlen(ti->tree) != 40)
		return "task has no 'tree' (40 hex digits)";
	if (o->store)
		snprintf(ti->store, sizeof ti->store, "%s", o->store);
	else if (!get_str(t, "store", ti->store, sizeof ti->store))
		return "no task store (give --store, or a task with 'store')";
	if (fw_mp_get(t, "prompt", &v) != 1 || fw_mp_str(v, &ti->prompt, &ti->plen))
		return "task has no 'prompt'";
	if (!get_str(t, "strategy", ti->strategy, sizeof ti->strategy))
		ti->strategy[0] = '\0';
	ti->path[0] = ti->lang[0] = '\0';
	ti->start = 0;
	if (fw_mp_get(t, "targets", &v) == 1) {
		struct fw_mp_iter it;
		if (fw_mp_iter_init(&it, v) > 0 && fw_mp_iter_next(&it, &tg) == 1) {
			get_str(tg, "path", ti->path, sizeof ti->path);
			get_str(tg, "lang", ti->lang, sizeof ti->lang);
			if (fw_mp_get(tg, "start", &v) == 1 && !fw_mp_int(v, &start) &&
			    start > 0 && start < 1 << 30)
				ti->start = (int)start;
		}
	}
	return NULL;
}

/* --policy builtin: --mode fill. */
static void run_fill(struct fw_rollout_worker *w, struct fw_rollout_out *j, struct fw_mpv task, const char *tid,
		     const struct task_in *ti)
{
	const struct fw_rollout_cfg *o = w->o;
	int K = (int)o->samples;
	char err[1024];
	char *src = NULL;
	size_t len;
	struct fw_fill_site site;
	struct fw_completion *c = calloc((size_t)K, sizeof *c);
	uint64_t *seeds = calloc((size_t)K, sizeof *seeds);
	struct fw_tok_ids pids = { 0 };
	struct fw_sampler s = { (float)o->temp, (float)o->top_p, o->top_k };
	struct fw_store *st;
	double t0 = fw_now();

	if (!c || !seeds) {
		emit_errors(w, j, task, tid, "out of memory");
		goto out;
	}
	if (!w->b && !w->h) {
		emit_errors(w, j, task, tid, w->load_err);
		goto out;
	}
	if (strcmp(ti->strategy, "stub-body") || !ti->path[0] || !ti->start) {
		emit_errors(w, j, task, tid, "fill mode needs a stub-body task with a target");
		goto out;
	}
	if (!(st = store_for(w, ti->store, err, sizeof err)) ||
	    fw_store_read(st, ti->tree, ti->path, &src, &len, err, sizeof err) ||
	    fw_fill_locate(src, len, ti->lang, ti->start, &site, err, sizeof err)) {
		emit_errors(w, j, task, tid, err);
		goto out;
	}
	for (int k = 0; k < K; k++)
		seeds[k] = fw_rollout_seed(o->seed, tid, strlen(tid), k);
	/* --context: the last bytes before the stub, from a line's start */
	size_t from = 0;
	if (o->context && site.a > o->context) {
		from = site.a - o->context;
		while (from < site.a && src[from - 1] != '\n')
			from++;
	}
	if (w->h) {
		/* a server decodes what it is asked: the cut comes after */
		for (int k = 0; k < K; k++)
			if (fw_http_complete(w->h, src + from, site.a - from, seeds[k], &s,
					     (int)o->max_tokens, &c[k],
					     err, sizeof err)) {
				emit_errors(w, j, task, tid, err);
				goto out;
			} else if (!o->ignore_stop) {
				c[k].keep = fw_fill_cut(&site, c[k].text, c[k].len);
			}
	} else if (fw_builtin_complete(w->b, src + from, site.a - from, K, seeds, &s,
				       (int)o->max_tokens,
				       o->ignore_stop ? NULL : cut_cb, &site, &pids, c, err,
				       sizeof err)) {
		emit_errors(w, j, task, tid, err);
		goto out;
	}
	double each = (fw_now() - t0) / K;
	for (int k = 0; k < K; k++) {
		struct episode e = { .sample = k, .seed = seeds[k], .stop = c[k].stop };
		if (o->ignore_stop)
			c[k].keep = fw_fill_cut(&site, c[k].text, c[k].len);
		size_t keep = c[k].keep >= 0 ? (size_t)c[k].keep : c[k].len, nl, kl, fl;
		/* model output may be any bytes; records and patches hold text */
		char *kept = fw_utf8_fix(c[k].text, keep, &kl);
		char *full = fw_utf8_fix(c[k].text, c[k].len, &fl);
		char *patch = NULL, *ptxt, *nt = kept ? fw_fill_apply(&site, src, len, kept, kl, &nl)
						    : NULL;
		size_t pn;
		msgpack_packer pk;

		if (!nt || fw_file_patch(ti->path, src, len, nt, nl, &patch, err, sizeof err)) {
			e.stop = "error";
			e.error = nt ? err : "out of memory";
		}
		e.patch = patch;
		/* the prompt as the policy saw it (cut to the model's context) */
		char *raw = w->b ? fw_tok_decode(w->b->t, pids.ids, pids.n, FW_TOK_SKIP_SPECIAL, &pn,
						 err, sizeof err)
				 : NULL;
		ptxt = raw ? fw_utf8_fix(raw, pn, &pn) : fw_utf8_fix(src, site.a, &pn);
		free(raw);
		fw_buf_packer(&pk, &e.turns);
		msgpack_pack_array(&pk, 2);
		pack_turn(&e.turns, "user", ptxt ? ptxt : "", ptxt ? pn : 0,
			  w->b ? pids.ids : NULL, NULL, pids.n);
		if (c[k].tokens || !c[k].n) {
			pack_turn(&e.turns, "assistant", full ? full : "", full ? fl : 0, c[k].tokens,
				  c[k].logprobs, (size_t)c[k].n);
		} else {
			/* the server gave log-probs but no ids */
			pack_turn(&e.turns, "assistant", full ? full : "", full ? fl : 0, NULL,
				  c[k].logprobs, (size_t)c[k].n);
		}
		/* the whole sequence for training: prompt then completion */
		fw_buf_packer(&pk, &e.extra);
		if (!w->b)
			goto no_seq;
		fw_pack_cstr(&pk, "tokens");
		msgpack_pack_array(&pk, pids.n + (size_t)c[k].n);
		for (size_t i = 0; i < pids.n; i++)
			msgpack_pack_int32(&pk, pids.ids[i]);
		for (int i = 0; i < c[k].n; i++)
			msgpack_pack_int32(&pk, c[k].tokens[i]);
		fw_pack_cstr(&pk, "mask");
		msgpack_pack_array(&pk, pids.n + (size_t)c[k].n);
		for (size_t i = 0; i < pids.n + (size_t)c[k].n; i++)
			msgpack_pack_int(&pk, i >= pids.n);
		e.nextra = 2;
no_seq:
		e.time = each;
		emit(o, j, task, tid, &e);
		fw_buf_free(&e.turns);
		fw_buf_free(&e.extra);
		free(ptxt);
		free(patch);
		free(nt);
		free(kept);
		free(full);
	}
out:
	if (c)
		for (int k = 0; k < K; k++)
			fw_completion_release(&c[k]);
	free(c);
	free(seeds);
	free(src);
	fw_tok_ids_release(&pids);
}

/* The environment of task into *e (caller frees): --env's, else the
 * task's `env`; NULL when it has none.  Returns 0, or -1 with the reason
 * in err (an environment missing from the env store). */
static int task_env(const struct fw_rollout_cfg *o, struct fw_mpv task, const char *store,
		    struct fw_env **e, char *err, size_t errlen)
{
	char id[128], es[4096];
	const char *arg = o->env ? o->env : get_str(task, "env", id, sizeof id);

	*e = NULL;
	if (!arg)
		return 0;
	if (!(*e = malloc(sizeof **e))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (fw_env_store_path(o->env_store, store, es, sizeof es, err, errlen) ||
	    fw_env_open_arg(*e, es, arg, err, errlen)) {
		free(*e);
		*e = NULL;
		return -1;
	}
	return 0;
}

/* What a task's clean-room episodes are given: its store, its environment
 * (task.env) and its context[] files, mounted read-only at FW_CONTEXT_DIR.
 * On failure the task's error records are written and NULL returned, with
 * nothing left to release. */
static struct fw_store *episode_inputs(struct fw_rollout_worker *w, struct fw_rollout_out *j,
				       struct fw_mpv task, const char *tid, const struct task_in *ti,
				       struct fw_env **env, struct fw_context_mount *cm)
{
	char err[1024];
	struct fw_store *st;

	*env = NULL;
	if (!(st = store_for(w, ti->store, err, sizeof err)) ||
	    task_env(w->o, task, ti->store, env, err, sizeof err)) {
		emit_errors(w, j, task, tid, err);
		return NULL;
	}
	if (fw_context_mount(cm, st, task, w->o->mounts, err, sizeof err)) {
		fw_context_unmount(cm);
		free(*env);
		*env = NULL;
		emit_errors(w, j, task, tid, err);
		return NULL;
	}
	return st;
}

/* --policy exec:CMD. */
static void run_exec(struct fw_rollout_worker *w, struct fw_rollout_out *j, struct fw_mpv task, const char *tid,
		     const struct task_in *ti)
{
	const struct fw_rollout_cfg *o = w->o;
	char err[1024];
	struct fw_store *st;
	struct fw_buf tb = { 0 }, js = { 0 };
	struct fw_exec_opts eo = { o->arg, o->mounts, o->allow, o->timeout_s, 0, NULL, NULL };
	struct fw_context_mount cm = { 0 };
	struct fw_env *env = NULL;

	if (!(st = episode_inputs(w, j, task, tid, ti, &env, &cm)))
		return;
	eo.env = env;
	eo.mounts = cm.binds;
	/* the agent gets what a policy may see: no solution, no host path */
	if (fw_task_for_policy(&tb, task) ||
	    fw_json_from_mp(&js, (struct fw_mpv){ tb.p, tb.n }, err, sizeof err) ||
	    fw_buf_append(&js, "", 1)) {
		emit_errors(w, j, task, tid, "task does not convert to JSON");
		goto out;
	}
	for (int k = 0; k < (int)o->samples; k++) {
		struct fw_exec_result r;
		struct episode e = { .sample = k };
		char msg[1100];
		double t0 = fw_now();

		e.seed = fw_rollout_seed(o->seed, tid, strlen(tid), k);
		if (fw_exec_episode(&eo, st, ti->tree, ti->prompt, ti->plen, (char *)js.p, e.seed, k,
				    &r, err, sizeof err)) {
			e.stop = "error";
			e.error = err;
			emit(o, j, task, tid, &e);
			continue;
		}
		e.time = fw_now() - t0;
		e.stop = r.stop;
		e.patch = r.patch;
		msgpack_packer pk;
		if (r.turns.n) {
			e.turns = r.turns;
		} else {
			fw_buf_packer(&pk, &e.turns);
			msgpack_pack_array(&pk, 1);
			pack_turn(&e.turns, "user", ti->prompt, ti->plen, NULL, NULL, 0);
		}
		fw_buf_packer(&pk, &e.events);
		msgpack_pack_array(&pk, r.run.nevents + (r.run.cause != FW_SANDBOX_OK) +
					    r.left_out.n);
		for (size_t i = 0; i < r.run.nevents; i++) {
			const char *d = r.run.events[i].detail ? r.run.events[i].detail : "";
			msgpack_pack_map(&pk, 3);
			fw_pack_cstr(&pk, "kind");
			fw_pack_cstr(&pk, r.run.events[i].kind);
			fw_pack_cstr(&pk, "detail");
			fw_pack_text(&pk, d, strlen(d));
			fw_pack_cstr(&pk, "at");
			msgpack_pack_double(&pk, r.run.events[i].at_s);
		}
		if (r.run.cause != FW_SANDBOX_OK) {
			msgpack_pack_map(&pk, 3);
			fw_pack_cstr(&pk, "kind");
			fw_pack_cstr(&pk, "limit");
			fw_pack_cstr(&pk, "detail");
			fw_pack_cstr(&pk, fw_sandbox_cause_name(r.run.cause));
			fw_pack_cstr(&pk, "at");
			msgpack_pack_double(&pk, r.run.wall_s);
		}
		/* files the host did not take into the patch */
		for (size_t i = 0; i < r.left_out.n; i++) {
			msgpack_pack_map(&pk, 3);
			fw_pack_cstr(&pk, "kind");
			fw_pack_cstr(&pk, "left-out");
			fw_pack_cstr(&pk, "detail");
			fw_pack_text(&pk, r.left_out.v[i], strlen(r.left_out.v[i]));
			fw_pack_cstr(&pk, "at");
			msgpack_pack_double(&pk, r.run.wall_s);
		}
		/* what the agent printed: where its failed attempts show */
		fw_buf_packer(&pk, &e.extra);
		fw_pack_cstr(&pk, "output");
		msgpack_pack_map(&pk, 4);
		fw_pack_cstr(&pk, "exit");
		msgpack_pack_int(&pk, r.run.exit_code);
		const struct fw_sandbox_output *so[2] = { &r.run.out, &r.run.err };
		for (int i = 0; i < 2; i++) {
			size_t hn;
			char *h = fw_head_tail(so[i]->data ? so[i]->data : "", so[i]->len, 4096, 4096,
					       &hn);
			fw_pack_cstr(&pk, i ? "stderr" : "stdout");
			fw_pack_text(&pk, h ? h : "", h ? hn : 0);
			free(h);
		}
		fw_pack_cstr(&pk, "truncated");
		if (r.run.out.truncated || r.run.err.truncated)
			msgpack_pack_true(&pk);
		else
			msgpack_pack_false(&pk);
		e.nextra = 1;
		if (r.traj_error[0]) {
			fw_pack_cstr(&pk, "traj_error");
			fw_pack_text(&pk, r.traj_error, strlen(r.traj_error));
			e.nextra++;
		}
		if (strcmp(r.stop, "exit")) {
			if (r.run.cause == FW_SANDBOX_OK)
				snprintf(msg, sizeof msg, "agent exited with status %d", r.run.exit_code);
			else if (r.run.cause == FW_SANDBOX_KILLED)
				snprintf(msg, sizeof msg, "agent killed by signal %d", r.run.signal);
			else
				snprintf(msg, sizeof msg, "agent stopped by the %s limit after %.1f s",
					 fw_sandbox_cause_name(r.run.cause), r.run.wall_s);
			e.error = msg;
		}
		emit(o, j, task, tid, &e);
		if (e.turns.p != r.turns.p)
			fw_buf_free(&e.turns);
		fw_buf_free(&e.events);
		fw_buf_free(&e.extra);
		fw_exec_result_release(&r);
	}
out:
	fw_context_unmount(&cm);
	fw_buf_free(&tb);
	fw_buf_free(&js);
	free(env);
}

/* --policy builtin: --mode agent. */
static void run_agent(struct fw_rollout_worker *w, struct fw_rollout_out *j, struct fw_mpv task, const char *tid,
		      const struct task_in *ti)
{
	const struct fw_rollout_cfg *o = w->o;
	char err[1024];
	struct fw_store *st;
	struct fw_agent_opts ao = { { (float)o->temp, (float)o->top_p, o->top_k },
				    (int)o->max_steps, (int)o->max_tokens, o->timeout_s, 60,
				    2048, 2048, w->h, o->mounts, o->allow, NULL, NULL, o->tools,
				    o->toolset };
	struct fw_context_mount cm = { 0 };
	struct fw_env *env = NULL;

	if (!w->b && !w->h) {
		emit_errors(w, j, task, tid, w->load_err);
		return;
	}
	if (!(st = episode_inputs(w, j, task, tid, ti, &env, &cm)))
		return;
	ao.env = env;
	ao.mounts = cm.binds;
	int K = (int)o->samples;
	struct fw_agent_result *rs = calloc((size_t)K, sizeof *rs);
	uint64_t *seeds = calloc((size_t)K, sizeof *seeds);
	char *errs = calloc((size_t)K, sizeof err);
	int *ok = calloc((size_t)K, sizeof *ok);
	double t0 = fw_now(), each;

	if (!rs || !seeds || !errs || !ok) {
		emit_errors(w, j, task, tid, "out of memory");
		goto out;
	}
	for (int k = 0; k < K; k++)
		seeds[k] = fw_rollout_seed(o->seed, tid, strlen(tid), k);
	if (w->b) {
		/* the samples share the prefill of the chat's prefix */
		if (fw_agent_group(w->b, &ao, st, ti->tree, ti->prompt, ti->plen, K, seeds, rs, err,
				   sizeof err)) {
			emit_errors(w, j, task, tid, err);
			goto out;
		}
		for (int k = 0; k < K; k++)
			ok[k] = 1;
	} else {
		for (int k = 0; k < K; k++)
			ok[k] = !fw_agent_episode(NULL, &ao, st, ti->tree, ti->prompt, ti->plen,
						  seeds[k], &rs[k], errs + k * sizeof err, sizeof err);
	}
	each = (fw_now() - t0) / K;
	for (int k = 0; k < K; k++) {
		struct episode e = { .sample = k, .seed = seeds[k], .time = each };
		msgpack_packer pk;

		if (!ok[k]) {
			e.stop = "error";
			e.error = errs + k * sizeof err;
			emit(o, j, task, tid, &e);
			continue;
		}
		e.stop = rs[k].stop;
		e.patch = rs[k].patch;
		e.turns = rs[k].turns;
		e.events = rs[k].events;
		fw_buf_packer(&pk, &e.extra);
		fw_pack_cstr(&pk, "steps");
		msgpack_pack_int(&pk, rs[k].steps);
		e.nextra = 1;
		emit(o, j, task, tid, &e);
		fw_buf_free(&e.extra);
	}
out:
	if (rs)
		for (int k = 0; k < K; k++)
			fw_agent_result_release(&rs[k]);
	free(rs);
	free(seeds);
	free(errs);
	free(ok);
	fw_context_unmount(&cm);
	free(env);
}

int fw_rollout_task(struct fw_rollout_worker *w, const uint8_t *p, size_t n,
		    struct fw_rollout_out *j)
{
	struct fw_mpv task = { p, n };
	char tid[128];
	struct task_in ti;
	const char *why;

	if (!get_str(task, "id", tid, sizeof tid))
		snprintf(tid, sizeof tid, "%016llx", (unsigned long long)fw_hash64(p, n));
	if ((why = read_task(w->o, task, &ti))) {
		emit_errors(w, j, task, tid, why);
		return j->failed;
	}
	if (w->o->backend != FW_POLICY_EXEC && w->o->agent)
		run_agent(w, j, task, tid, &ti);
	else if (w->o->backend != FW_POLICY_EXEC)
		run_fill(w, j, task, tid, &ti);
	else
		run_exec(w, j, task, tid, &ti);
	return j->failed;
}

void fw_rollout_worker_release(struct fw_rollout_worker *w)
{
	if (!w)
		return;
	fw_builtin_free(w->b);
	fw_http_free(w->h);
	fw_store_free(w->st);
	free(w->st_path);
	w->b = NULL;
	w->h = NULL;
	w->st = NULL;
	w->st_path = NULL;
}

int fw_rollout_cfg_policy(struct fw_rollout_cfg *c)
{
	static const struct {
		const char *prefix;
		enum fw_policy_backend backend;
	} kinds[] = {
		{ "builtin:", FW_POLICY_BUILTIN },
		{ "exec:", FW_POLICY_EXEC },
		{ "http:", FW_POLICY_HTTP },
	};
	for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
		size_t n = strlen(kinds[i].prefix);
		if (!strncmp(c->policy, kinds[i].prefix, n) && c->policy[n]) {
			c->backend = kinds[i].backend;
			c->arg = c->policy + n;
			return 0;
		}
	}
	return -1;
}

int fw_rollout_workers_load(struct fw_rollout_worker *ws, int n, const struct fw_rollout_cfg *c,
			    char *err, size_t errlen)
{
	const char *key = getenv("FW_API_KEY") ? "FW_API_KEY" : "OPENAI_API_KEY";
	for (int i = 0; i < n; i++)
		ws[i].o = c;
	for (int i = 0; i < n; i++) {
		struct fw_rollout_worker *w = &ws[i];
		if (c->backend == FW_POLICY_HTTP)
			w->h = fw_http_new(c->arg, c->model, key, c->timeout_s, 3, w->load_err,
					   sizeof w->load_err);
		else if (c->backend == FW_POLICY_BUILTIN)
			w->b = fw_builtin_load(c->arg, w->load_err, sizeof w->load_err);
		else
			continue;
		if (w->h || w->b)
			continue;
		/* every record says why; the first failure is enough */
		for (int k = i + 1; k < n; k++)
			memcpy(ws[k].load_err, w->load_err, sizeof w->load_err);
		fw_seterr(err, errlen, "%s", w->load_err);
		return -1;
	}
	return 0;
}

struct fw_rollout_job *fw_rollout_job_new(struct fw_mpv rec, int is_task, const char *file,
					  uint64_t index, uint64_t offset)
{
	struct fw_rollout_job *j = calloc(1, sizeof *j);
	if (!j)
		return NULL;
	if (fw_buf_append(&j->in, rec.p, rec.n) < 0) {
		free(j);
		return NULL;
	}
	j->file = file;
	j->index = index;
	j->offset = offset;
	j->is_task = is_task;
	return j;
}

void fw_rollout_job_free(struct fw_rollout_job *j)
{
	if (!j)
		return;
	fw_buf_release(&j->in);
	fw_buf_release(&j->r.out);
	free(j);
}

void fw_rollout_job_run(struct fw_rollout_worker *w, struct fw_rollout_job *j)
{
	if (!j->is_task)
		fw_buf_append(&j->r.out, j->in.p, j->in.n);
	else
		fw_rollout_task(w, j->in.p, j->in.n, &j->r);
}
