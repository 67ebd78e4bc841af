/*
 * rollout — run a policy on task records in the clean room and write what
 * it did as rollout records.  See rollout(1).
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_agent_tools.h"
#include "fw_cli.h"
#include "fw_env.h"
#include "fw_history.h"
#include "fw_json.h"
#include "fw_mp.h"
#include "fw_policy.h"
#include "fw_rollout.h"
#include "fw_store.h"
#include "fw_stream.h"
#include "kernels_dev.h"

static const char usage_text[] =
	"usage: rollout --policy builtin:DIR | http:URL | exec:CMD [--model NAME] [--store DIR]\n"
	"               [--mode fill | agent [--tools]]\n"
	"               [--samples K] [--seed S] [--temp T] [--top-p P] [--top-k K]\n"
	"               [--max-tokens N] [--context BYTES] [--max-steps N] [-j N] [--shard K/N]\n"
	"               [--allow HOST ...]\n"
	"               [--mount PATH ...] [--env DIR | ID] [--env-store DIR]\n"
	"               [--timeout SEC] [--ignore-stop] [--no-time]\n"
	"               [--progress] [--device cpu|cuda[:N]] [-z] [-o OUT] [FILE ...]\n"
	"       rollout --print-tools\n"
	"       rollout -h | --help | --version\n";

static const struct fw_opt_doc options[] = {
	{ "--policy SPEC", "the policy: builtin:DIR, http:URL or exec:CMD" },
	{ "--model NAME", "http: the model name sent to the server" },
	{ "--store DIR", "the task store" },
	{ "--mode fill | agent", "the episode of a builtin or http policy (default fill)" },
	{ "--tools", "agent: offer the tool-calling tools" },
	{ "--print-tools", "print the tools of --tools as the JSON array sent to servers, and exit" },
	{ "--samples K", "rollouts per task (default 1)" },
	{ "--seed S", "base seed (default 0)" },
	{ "--temp T", "sampling temperature" },
	{ "--top-p P", "nucleus sampling mass" },
	{ "--top-k K", "sample among the K likeliest tokens" },
	{ "--max-tokens N", "fill: tokens generated at most" },
	{ "--context BYTES", "fill: bytes of context around the site" },
	{ "--max-steps N", "agent: steps at most" },
	{ "-j N", "tasks run at once (1 to 64)" },
	{ "--shard K/N", "run only the tasks whose id hashes to K modulo N" },
	{ "--allow HOST", "exec and agent: a host the sandbox may reach" },
	{ "--mount PATH", "exec and agent: a path mounted read-only in the sandbox" },
	{ "--env DIR | ID", "exec and agent: the environment the episode runs in" },
	{ "--env-store DIR", "exec and agent: where environments are found" },
	{ "--timeout SEC", "exec and agent: wall-clock limit of one episode" },
	{ "--ignore-stop", "fill: generate past the stop sequence" },
	{ "--no-time", "leave time out" },
	{ "--progress", "a progress meter on standard error even when it is not a terminal" },
	{ "--device cpu|cuda[:N]", "where builtin policies run" },
	{ "-z", "compress the output with zstd" },
	{ "-o OUT", "write to OUT (replaced atomically) instead of standard output" },
	{ "-h, --help", "print this help and exit" },
	{ "--version", "print the version and exit" },
	{ NULL, NULL },
};

enum backend { B_BUILTIN, B_EXEC, B_HTTP };

struct opts {
	const char *policy, *arg, *store, *out, *model;
	enum backend backend;
	uint64_t samples, seed, jobs, max_tokens, shard_k, shard_n, context;
	double temp, top_p, timeout_s;
	int top_k, no_time, progress, level, ignore_stop, agent, tools;
	uint64_t max_steps;
	const char **allow, **mounts;
	size_t nallow, nmounts;
	const char *env, *env_store; /* --env (in place of task.env), --env-store */
	char **files;
	int nfiles;
};

/* One input record and what became of it. */
struct job {
	uint8_t *rec;
	size_t n;
	const char *file;
	uint64_t index, offset;
	int is_task;
	struct fw_buf out; /* the records written for it */
	int failed;        /* records with an error */
	char err[512];     /* the first error, for the diagnostic */
};

/* A worker's own policy and task store. */
struct worker {
	const struct opts *o;
	struct fw_builtin *b;
	struct fw_http *h;
	char load_err[512];
	struct fw_store *st;
	char *st_path;
	struct job *jobs;
	size_t njobs;
	size_t *next;
	pthread_mutex_t *mu;
};

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

/* Appends one rollout record to j->out. */
static int emit(const struct opts *o, struct job *j, struct fw_mpv task, const char *tid,
		const struct episode *e)
{
	struct fw_buf tb = { 0 };
	struct fw_field del = { "solution", 8, { NULL, 0 } };
	msgpack_packer pk;
	char id[17];
	int n = 12 + (e->error != NULL) + !o->no_time + e->nextra;

	if (fw_rec_set(&tb, task, &del, 1))
		return -1;
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
	msgpack_pack_map(&pk, o->backend == B_EXEC ? 3 : 6 + (o->backend == B_HTTP && o->model) + o->tools);
	fw_pack_cstr(&pk, "backend");
	fw_pack_cstr(&pk, o->backend == B_BUILTIN ? "builtin" : o->backend == B_HTTP ? "http" : "exec");
	fw_pack_cstr(&pk, o->backend == B_BUILTIN ? "ckpt" : o->backend == B_HTTP ? "url" : "cmd");
	fw_pack_cstr(&pk, o->arg);
	if (o->backend == B_HTTP && o->model) {
		fw_pack_cstr(&pk, "model");
		fw_pack_cstr(&pk, o->model);
	}
	if (o->tools) {
		/* the agent called tools (fw_agent_tools.h), not bash blocks */
		fw_pack_cstr(&pk, "tools");
		msgpack_pack_true(&pk);
	}
	fw_pack_cstr(&pk, "seed");
	msgpack_pack_uint64(&pk, o->seed);
	if (o->backend != B_EXEC) {
		fw_pack_cstr(&pk, "temp");
		msgpack_pack_double(&pk, o->temp);
		fw_pack_cstr(&pk, "top_p");
		msgpack_pack_double(&pk, o->top_p);
		fw_pack_cstr(&pk, "top_k");
		msgpack_pack_int(&pk, o->top_k);
	}
	fw_pack_cstr(&pk, "mode");
	fw_pack_cstr(&pk, o->backend == B_EXEC ? "exec" : o->agent ? "agent" : "fill");
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
	return 0;
}

/* Emits o->samples error records for a task that could not be run. */
static void emit_errors(struct worker *w, struct job *j, struct fw_mpv task, const char *tid,
			const char *msg)
{
	for (int k = 0; k < (int)w->o->samples; k++) {
		struct episode e = { .sample = k, .stop = "error", .error = msg };
		e.seed = fw_rollout_seed(w->o->seed, tid, strlen(tid), k);
		emit(w->o, j, task, tid, &e);
	}
}

static struct fw_store *store_for(struct worker *w, const char *path, char *err, size_t errlen)
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

static const char *read_task(const struct opts *o, struct fw_mpv t, struct task_in *ti)
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
static void run_fill(struct worker *w, struct job *j, struct fw_mpv task, const char *tid,
		     const struct task_in *ti)
{
	const struct opts *o = w->o;
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
			fw_completion_clear(&c[k]);
	free(c);
	free(seeds);
	free(src);
	fw_tok_ids_release(&pids);
}

/* The environment of task into *e (caller frees): --env's, else the
 * task's `env`; NULL when it has none.  Returns 0, or -1 with the reason
 * in err (an environment missing from the env store). */
static int task_env(const struct opts *o, struct fw_mpv task, const char *store,
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

/* --policy exec:CMD. */
static void run_exec(struct worker *w, struct job *j, struct fw_mpv task, const char *tid,
		     const struct task_in *ti)
{
	const struct opts *o = w->o;
	char err[1024];
	struct fw_store *st;
	struct fw_buf tb = { 0 }, js = { 0 };
	struct fw_exec_opts eo = { o->arg, o->mounts, o->allow, o->timeout_s, 0, NULL, NULL };
	struct fw_context_mount cm = { 0 };
	struct fw_env *env = NULL;

	if (!(st = store_for(w, ti->store, err, sizeof err))) {
		emit_errors(w, j, task, tid, err);
		return;
	}
	if (task_env(o, task, ti->store, &env, err, sizeof err)) {
		emit_errors(w, j, task, tid, err);
		return;
	}
	eo.env = env;
	/* the task's context[] files, read-only at FW_CONTEXT_DIR */
	if (fw_context_mount(&cm, st, task, o->mounts, err, sizeof err)) {
		emit_errors(w, j, task, tid, err);
		goto out;
	}
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
		fw_exec_result_clear(&r);
	}
out:
	fw_context_unmount(&cm);
	fw_buf_free(&tb);
	fw_buf_free(&js);
	free(env);
}

/* --policy builtin: --mode agent. */
static void run_agent(struct worker *w, struct job *j, struct fw_mpv task, const char *tid,
		      const struct task_in *ti)
{
	const struct opts *o = w->o;
	char err[1024];
	struct fw_store *st;
	struct fw_agent_opts ao = { { (float)o->temp, (float)o->top_p, o->top_k },
				    (int)o->max_steps, (int)o->max_tokens, o->timeout_s, 60,
				    2048, 2048, w->h, o->mounts, o->allow, NULL, NULL, o->tools };
	struct fw_context_mount cm = { 0 };
	struct fw_env *env = NULL;

	if (!w->b && !w->h) {
		emit_errors(w, j, task, tid, w->load_err);
		return;
	}
	if (!(st = store_for(w, ti->store, err, sizeof err))) {
		emit_errors(w, j, task, tid, err);
		return;
	}
	if (task_env(o, task, ti->store, &env, err, sizeof err)) {
		emit_errors(w, j, task, tid, err);
		return;
	}
	ao.env = env;
	/* the task's context[] files, read-only at FW_CONTEXT_DIR */
	if (fw_context_mount(&cm, st, task, o->mounts, err, sizeof err)) {
		fw_context_unmount(&cm);
		free(env);
		emit_errors(w, j, task, tid, err);
		return;
	}
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
			fw_agent_result_clear(&rs[k]);
	free(rs);
	free(seeds);
	free(errs);
	free(ok);
	fw_context_unmount(&cm);
	free(env);
}

static void run_job(struct worker *w, struct job *j)
{
	struct fw_mpv rec = { j->rec, j->n }, task;
	char tid[128];
	struct task_in ti;
	const char *why;

	if (!j->is_task) {
		fw_buf_append(&j->out, j->rec, j->n);
		return;
	}
	task = rec;
	if (!get_str(task, "id", tid, sizeof tid))
		snprintf(tid, sizeof tid, "%016llx", (unsigned long long)fw_hash64(j->rec, j->n));
	if ((why = read_task(w->o, task, &ti))) {
		emit_errors(w, j, task, tid, why);
		return;
	}
	if (w->o->backend != B_EXEC && w->o->agent)
		run_agent(w, j, task, tid, &ti);
	else if (w->o->backend != B_EXEC)
		run_fill(w, j, task, tid, &ti);
	else
		run_exec(w, j, task, tid, &ti);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	for (;;) {
		pthread_mutex_lock(w->mu);
		size_t i = (*w->next)++;
		pthread_mutex_unlock(w->mu);
		if (i >= w->njobs)
			break;
		run_job(w, &w->jobs[i]);
	}
	return NULL;
}

static int is_task(struct fw_mpv rec)
{
	struct fw_mpv k;

	return fw_mp_get(rec, "kind", &k) == 1 && fw_mp_str_eq(k, "task", 4);
}

/* Runs the batch, writes its records in input order, frees them. */
static int flush_batch(struct worker *ws, int nw, struct job *jobs, size_t n,
		       struct fw_writer *out, int *status)
{
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	pthread_t th[64];
	size_t next = 0;
	int nt = 0;

	for (int i = 0; i < nw; i++) {
		ws[i].jobs = jobs;
		ws[i].njobs = n;
		ws[i].next = &next;
		ws[i].mu = &mu;
	}
	if (nw == 1 || n == 1) {
		worker_main(&ws[0]);
	} else {
		for (int i = 0; i < nw && (size_t)i < n; i++)
			if (!pthread_create(&th[nt], NULL, worker_main, &ws[i]))
				nt++;
		if (!nt)
			worker_main(&ws[0]);
		for (int i = 0; i < nt; i++)
			pthread_join(th[i], NULL);
	}
	int rc = 0;
	for (size_t i = 0; i < n; i++) {
		struct job *j = &jobs[i];
		if (j->failed) {
			fw_warn_rec(j->file, j->index, j->offset, "%d of %d samples failed: %s",
				    j->failed, (int)ws[0].o->samples, j->err);
			*status = FW_EXIT_DATA;
		}
		if (!rc && j->out.n && fw_writer_put(out, j->out.p, j->out.n)) {
			fw_warn("write error: %s", fw_writer_error(out));
			rc = -1;
		}
		free(j->rec);
		fw_buf_free(&j->out);
	}
	if (!rc && fw_writer_flush(out)) {
		fw_warn("write error: %s", fw_writer_error(out));
		rc = -1;
	}
	return rc;
}

static int rollout_main(struct opts *o)
{
	static char *stdin_only[] = { "-" };
	char **files = o->nfiles ? o->files : stdin_only;
	int nfiles = o->nfiles ? o->nfiles : 1, status = FW_EXIT_OK, nw = (int)o->jobs;
	char err[1024];
	struct worker ws[64];
	size_t cap = (size_t)nw * 4, n = 0;
	struct job *jobs = calloc(cap, sizeof *jobs);
	struct fw_writer *out;
	struct fw_progress prog;
	uint64_t nrec = 0;

	if (!jobs)
		return FW_EXIT_DATA;
	memset(ws, 0, sizeof ws);
	for (int i = 0; i < nw; i++) {
		ws[i].o = o;
		if (o->backend == B_HTTP &&
		    !(ws[i].h = fw_http_new(o->arg, o->model,
					    getenv("FW_API_KEY") ? "FW_API_KEY" : "OPENAI_API_KEY",
					    o->timeout_s, 3, ws[i].load_err, sizeof ws[i].load_err))) {
			fw_warn("%s", ws[i].load_err);
			status = FW_EXIT_DATA;
			break;
		}
		if (o->backend == B_BUILTIN &&
		    !(ws[i].b = fw_builtin_load(o->arg, ws[i].load_err, sizeof ws[i].load_err))) {
			/* every record says why; the first failure is enough */
			fw_warn("%s", ws[i].load_err);
			for (int k = i + 1; k < nw; k++) {
				ws[k].o = o;
				memcpy(ws[k].load_err, ws[i].load_err, sizeof ws[i].load_err);
			}
			status = FW_EXIT_DATA;
			break;
		}
	}
	if (!(out = fw_writer_open(o->out, o->level, err, sizeof err))) {
		fw_warn("%s", err);
		status = FW_EXIT_DATA;
		goto done;
	}
	fw_progress_start(&prog, o->progress);
	for (int f = 0; f < nfiles; f++) {
		struct fw_reader *r = fw_reader_open(files[f], NULL, err, sizeof err);
		struct fw_rec rec;
		int rc;

		if (!r) {
			fw_warn("%s", err);
			status = FW_EXIT_DATA;
			continue;
		}
		while ((rc = fw_reader_next(r, &rec)) != 0) {
			if (rc < 0) {
				/* one diagnostic, then the next file: input that
				 * is not records is not read value by value */
				fw_warn_reader(r);
				status = FW_EXIT_DATA;
				break;
			}
			int task = is_task(rec.v);
			if (task && o->shard_n && !fw_shard_keep(rec.v, o->shard_k, o->shard_n))
				continue;
			struct job *j = &jobs[n];
			memset(j, 0, sizeof *j);
			if (!(j->rec = malloc(rec.v.n))) {
				fw_warn("out of memory");
				status = FW_EXIT_DATA;
				break;
			}
			memcpy(j->rec, rec.v.p, rec.v.n);
			j->n = rec.v.n;
			j->file = fw_reader_name(r);
			j->index = rec.index;
			j->offset = rec.offset;
			j->is_task = task;
			if (++n == cap) {
				if (flush_batch(ws, nw, jobs, n, out, &status)) {
					fw_reader_close(r);
					fw_writer_abort(out);
					out = NULL;
					status = FW_EXIT_DATA;
					goto done;
				}
				n = 0;
			}
			fw_progress_tick(&prog, ++nrec, fw_reader_bytes_in(r));
		}
		/* names point into the reader: run what it gave before closing */
		if (n && flush_batch(ws, nw, jobs, n, out, &status)) {
			fw_reader_close(r);
			fw_writer_abort(out);
			out = NULL;
			status = FW_EXIT_DATA;
			goto done;
		}
		n = 0;
		fw_reader_close(r);
	}
	fw_progress_end(&prog);
	if (fw_writer_close(out, err, sizeof err)) {
		fw_warn("%s", err);
		status = FW_EXIT_DATA;
	}
done:
	for (int i = 0; i < nw; i++) {
		fw_builtin_free(ws[i].b);
		fw_http_free(ws[i].h);
		fw_store_free(ws[i].st);
		free(ws[i].st_path);
	}
	free(jobs);
	return status;
}

static int usage_error(const char *fmt, const char *arg)
{
	return fw_usage_error(usage_text, fmt, arg);
}

static int push(const char ***v, size_t *n, const char *s)
{
	const char **p = realloc(*v, sizeof(*p) * (*n + 2));

	if (!p)
		return -1;
	p[(*n)++] = s;
	p[*n] = NULL;
	*v = p;
	return 0;
}

int main(int argc, char **argv)
{
	fw_cli_init("rollout");
	fw_usage_init(usage_text, options);
	struct opts o = { .samples = 1, .jobs = 1, .max_tokens = 256, .temp = 1.0, .top_p = 1.0,
			  .timeout_s = 600, .level = -1, .max_steps = 20 };
	enum { O_POLICY = 256, O_STORE, O_MODE, O_SAMPLES, O_SEED, O_TEMP, O_TOP_P, O_TOP_K,
	       O_MAX_TOKENS, O_CONTEXT, O_SHARD, O_ALLOW, O_MOUNT, O_TIMEOUT, O_NO_TIME, O_PROGRESS,
	       O_IGNORE_STOP, O_MAX_STEPS, O_MODEL, O_DEVICE, O_VERSION, O_ENV, O_ENV_STORE, O_TOOLS,
	       O_PRINT_TOOLS };
	static const struct option longopts[] = {
		{ "policy", required_argument, NULL, O_POLICY },
		{ "store", required_argument, NULL, O_STORE },
		{ "mode", required_argument, NULL, O_MODE },
		{ "samples", required_argument, NULL, O_SAMPLES },
		{ "seed", required_argument, NULL, O_SEED },
		{ "temp", required_argument, NULL, O_TEMP },
		{ "top-p", required_argument, NULL, O_TOP_P },
		{ "top-k", required_argument, NULL, O_TOP_K },
		{ "max-tokens", required_argument, NULL, O_MAX_TOKENS },
		{ "context", required_argument, NULL, O_CONTEXT },
		{ "jobs", required_argument, NULL, 'j' },
		{ "shard", required_argument, NULL, O_SHARD },
		{ "allow", required_argument, NULL, O_ALLOW },
		{ "mount", required_argument, NULL, O_MOUNT },
		{ "env", required_argument, NULL, O_ENV },
		{ "env-store", required_argument, NULL, O_ENV_STORE },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "no-time", no_argument, NULL, O_NO_TIME },
		{ "ignore-stop", no_argument, NULL, O_IGNORE_STOP },
		{ "tools", no_argument, NULL, O_TOOLS },
		{ "print-tools", no_argument, NULL, O_PRINT_TOOLS },
		{ "max-steps", required_argument, NULL, O_MAX_STEPS },
		{ "model", required_argument, NULL, O_MODEL },
		{ "device", required_argument, NULL, O_DEVICE },
		{ "progress", no_argument, NULL, O_PROGRESS },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, O_VERSION },
		{ NULL, 0, NULL, 0 },
	};
	int ch;
	uint64_t u;
	const char *device = NULL;

	while ((ch = getopt_long(argc, argv, "j:o:zh", longopts, NULL)) != -1) {
		switch (ch) {
		case O_POLICY: o.policy = optarg; break;
		case O_DEVICE: device = optarg; break;
		case O_STORE: o.store = optarg; break;
		case O_MODE:
			if (!strcmp(optarg, "agent"))
				o.agent = 1;
			else if (strcmp(optarg, "fill"))
				return usage_error("unknown mode '%s' (fill, agent)", optarg);
			break;
		case O_MAX_STEPS:
			if (fw_parse_u64(optarg, &o.max_steps, 0) || o.max_steps > 100000)
				return usage_error("bad step count '%s'", optarg);
			break;
		case O_SAMPLES:
			if (fw_parse_u64(optarg, &o.samples, 0) || o.samples < 1 || o.samples > 1024)
				return usage_error("bad sample count '%s' (1..1024)", optarg);
			break;
		case O_SEED:
			if (fw_parse_u64(optarg, &o.seed, 0))
				return usage_error("bad seed '%s'", optarg);
			break;
		case O_TEMP:
			if (fw_parse_double(optarg, &o.temp) || !(o.temp >= 0))
				return usage_error("bad temperature '%s'", optarg);
			break;
		case O_TOP_P:
			if (fw_parse_double(optarg, &o.top_p) || !(o.top_p > 0 && o.top_p <= 1))
				return usage_error("bad top-p '%s' (0 < P <= 1)", optarg);
			break;
		case O_TOP_K:
			if (fw_parse_u64(optarg, &u, 0) || u > 1u << 24)
				return usage_error("bad top-k '%s'", optarg);
			o.top_k = (int)u;
			break;
		case O_CONTEXT:
			if (fw_parse_u64(optarg, &o.context, 0) || o.context < 1 ||
			    o.context > 1u << 30)
				return usage_error("bad --context '%s'", optarg);
			break;
		case O_MAX_TOKENS:
			if (fw_parse_u64(optarg, &o.max_tokens, 0) || o.max_tokens < 1 ||
			    o.max_tokens > 1u << 20)
				return usage_error("bad token count '%s'", optarg);
			break;
		case 'j':
			if (fw_parse_u64(optarg, &o.jobs, 0) || o.jobs < 1 || o.jobs > 64)
				return usage_error("bad job count '%s' (1..64)", optarg);
			break;
		case O_SHARD:
			if (fw_parse_shard(optarg, &o.shard_k, &o.shard_n))
				return usage_error("bad shard '%s' (want K/N, 0 <= K < N)", optarg);
			break;
		case O_ALLOW:
			if (push(&o.allow, &o.nallow, optarg))
				return FW_EXIT_DATA;
			break;
		case O_MOUNT:
			if (push(&o.mounts, &o.nmounts, optarg))
				return FW_EXIT_DATA;
			break;
		case O_ENV: o.env = optarg; break;
		case O_ENV_STORE: o.env_store = optarg; break;
		case O_TIMEOUT:
			if (fw_parse_double(optarg, &o.timeout_s) || !(o.timeout_s > 0))
				return usage_error("bad timeout '%s'", optarg);
			break;
		case O_NO_TIME: o.no_time = 1; break;
		case O_MODEL: o.model = optarg; break;
		case O_IGNORE_STOP: o.ignore_stop = 1; break;
		case O_TOOLS: o.tools = 1; break;
		case O_PRINT_TOOLS:
			/* the tools an agent with --tools is given, as sent */
			puts(fw_agent_tools_json);
			return fw_close_stdout() ? FW_EXIT_DATA : 0;
		case O_PROGRESS: o.progress = 1; break;
		case 'o': o.out = optarg; break;
		case 'z': o.level = 3; break;
		case 'h': fw_help(); return fw_close_stdout() ? FW_EXIT_DATA : 0;
		case O_VERSION: fw_print_version(); return fw_close_stdout() ? FW_EXIT_DATA : 0;
		default: fputs(usage_text, stderr); return FW_EXIT_USAGE;
		}
	}
	if (!o.policy)
		return usage_error("%s", "--policy is required");
	if (!strncmp(o.policy, "builtin:", 8) && o.policy[8]) {
		o.backend = B_BUILTIN;
		o.arg = o.policy + 8;
	} else if (!strncmp(o.policy, "exec:", 5) && o.policy[5]) {
		o.backend = B_EXEC;
		o.arg = o.policy + 5;
	} else if (!strncmp(o.policy, "http:", 5) && o.policy[5]) {
		o.backend = B_HTTP;
		o.arg = o.policy + 5;
	} else {
		return usage_error("unknown policy '%s' (builtin:DIR, http:URL, exec:CMD)", o.policy);
	}
	if (o.tools && !o.agent)
		return usage_error("%s", "--tools needs --mode agent");
	if (o.agent && o.backend == B_EXEC)
		return usage_error("%s", "--mode agent needs a builtin or http policy");
	if (o.model && o.backend != B_HTTP)
		return usage_error("%s", "--model needs an http policy");
	if (device && o.backend != B_BUILTIN)
		return usage_error("%s", "--device needs a builtin policy");
	if (o.backend == B_BUILTIN) {
		char derr[256];

		if (fw_dev_select(device, derr, sizeof(derr)) < 0) {
			fw_warn("%s", derr);
			return FW_EXIT_DATA;
		}
	}
	o.files = argv + optind;
	o.nfiles = argc - optind;
	int status = rollout_main(&o);
	free(o.allow);
	free(o.mounts);
	if (fw_close_stdout() < 0)
		status = FW_EXIT_DATA;
	return status;
}
