/*
 * fw_serve.c — the server: checkpoints by name, request routing, the API
 * key, the completion and tokenize endpoints, replies and their counts.
 * See fw_serve.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "fw_base.h"
#include "fw_model.h"
#include "fw_serve_int.h"
#include "fw_tok.h"
#include "fw_toolcall.h"

const unsigned fw_serve_codes[NCODES] = { 200, 400, 401, 404, 405, 413, 500 };
const double fw_serve_buckets[NBUCKET] = { 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
					   1, 2.5, 5, 10, 30, 60 };

double serve_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A fresh 64-bit number: response ids, tool call ids and the seeds of
 * requests that name none.  Cannot fail. */
uint64_t serve_fresh(struct fw_serve *s)
{
	return fw_mix64(s->fresh_base + __atomic_add_fetch(&s->fresh_ctr, 1, __ATOMIC_RELAXED));
}

void serve_count(struct fw_serve *s, unsigned status)
{
	size_t i = 0;

	while (i < NCODES && fw_serve_codes[i] != status)
		i++;
	pthread_mutex_lock(&s->stat_mu);
	s->by_code[i]++;
	pthread_mutex_unlock(&s->stat_mu);
}

int serve_reply(struct fw_serve *s, struct fw_serve_reply *r, unsigned status, json_t *j)
{
	char *t = json_dumps(j, JSON_COMPACT);

	json_decref(j);
	if (!t)
		return -1;
	r->status = status;
	r->ctype = "application/json";
	r->body = t;
	r->len = strlen(t);
	serve_count(s, status);
	return 0;
}

int serve_fail(struct fw_serve *s, struct fw_serve_reply *r, unsigned status, const char *type,
	       const char *msg)
{
	return serve_reply(s, r, status,
			   json_pack("{s:{s:s,s:s}}", "error", "message", msg, "type", type));
}

/* vLLM's answer to a request it refuses: HTTP 400 and this error object. */
int serve_refuse(struct fw_serve *s, struct fw_serve_reply *r, const char *msg,
		 const char *param)
{
	return serve_reply(s, r, 400,
			   json_pack("{s:{s:s,s:s,s:s?,s:i}}", "error", "message", msg, "type",
				     "BadRequestError", "param", param, "code", 400));
}

/* After a function that answered a refusal into r: 0, or -1 when the
 * refusal itself ran out of memory. */
static int answered(const struct fw_serve_reply *r)
{
	return r->status ? 0 : -1;
}

static struct arm *find_arm(struct fw_serve *s, json_t *req)
{
	const char *m = json_string_value(json_object_get(req, "model"));

	if (!m)
		return s->narms == 1 ? &s->arms[0] : NULL;
	for (int i = 0; i < s->narms; i++)
		if (!strcmp(s->arms[i].name, m))
			return &s->arms[i];
	return NULL;
}

struct fw_serve *fw_serve_new(const char *api_key, char *err, size_t errlen)
{
	struct fw_serve *s = calloc(1, sizeof *s);
	struct timespec ts;

	if (!s || (api_key && !(s->api_key = strdup(api_key)))) {
		free(s);
		fw_seterr(err, errlen, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&s->stat_mu, NULL);
	clock_gettime(CLOCK_REALTIME, &ts);
	s->fresh_base = fw_mix64((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^
			(uint64_t)getpid();
	return s;
}

#define MAX_ARMS 64 /* checkpoints of one server */

int fw_serve_add(struct fw_serve *s, const char *name, const char *dir, int max_seqs,
		 char *err, size_t errlen)
{
	struct arm *a;

	if (max_seqs < 1 || max_seqs > 1024) {
		fw_seterr(err, errlen, "bad sequence count %d (1 to 1024)", max_seqs);
		return -1;
	}
	/* allocated once: each engine holds its arm's address */
	if (!s->arms && !(s->arms = calloc(MAX_ARMS, sizeof *s->arms))) {
		fw_seterr(err, errlen, "out of memory");
		return -1;
	}
	if (s->narms == MAX_ARMS) {
		fw_seterr(err, errlen, "more than %d checkpoints", MAX_ARMS);
		return -1;
	}
	a = &s->arms[s->narms];
	memset(a, 0, sizeof *a);
	a->srv = s;
	a->name = name;
	a->dir = dir;
	a->S = max_seqs;
	if (!(a->b = fw_builtin_load(dir, err, errlen)))
		return -1;
	a->tmpl = fw_chat_detect(a->b->t);
	if (!(a->g = fw_gen_new(a->b->m, a->S, a->b->m->cfg.max_pos, err, errlen))) {
		char why[256];
		snprintf(why, sizeof why, "%s", err);
		fw_seterr(err, errlen, "%s: %s", dir, why);
		fw_builtin_free(a->b);
		return -1;
	}
	if (serve_engine_start(a, err, errlen)) {
		fw_gen_free(a->g);
		fw_builtin_free(a->b);
		return -1;
	}
	s->narms++;
	return 0;
}

void fw_serve_stop(struct fw_serve *s)
{
	s->stop = 1;
	for (int i = 0; i < s->narms; i++)
		serve_engine_stop(&s->arms[i]);
}

void fw_serve_free(struct fw_serve *s)
{
	if (!s)
		return;
	fw_serve_stop(s);
	for (int i = 0; i < s->narms; i++) {
		struct arm *a = &s->arms[i];
		for (int q = 0; q < a->nq; q++)
			serve_job_drop(a, a->queue[q], 1);
		free(a->queue);
		free(a->seqs);
		free(a->next);
		free(a->lps);
		free(a->tid);
		free(a->tlp);
		free(a->scratch);
		pthread_mutex_destroy(&a->mu);
		pthread_cond_destroy(&a->work);
		fw_gen_free(a->g);
		fw_builtin_free(a->b);
	}
	free(s->arms);
	free(s->api_key);
	pthread_mutex_destroy(&s->stat_mu);
	free(s);
}

void fw_serve_reply_release(struct fw_serve_reply *r)
{
	if (!r)
		return;
	free(r->body);
	r->body = NULL;
	r->len = 0;
}

/* ---- endpoints ----------------------------------------------------------- */

static json_t *model_json(const struct arm *a)
{
	return json_pack("{s:s,s:s,s:I,s:s,s:i}", "id", a->name, "object", "model", "created",
			 (json_int_t)0, "owned_by", "flywheel", "max_model_len",
			 a->b->m->cfg.max_pos);
}


static int completions(struct fw_serve *s, json_t *rq, int chat, struct fw_serve_reply *r)
{
	struct arm *a = find_arm(s, rq);
	struct fw_tok_ids ids = { 0 };
	struct want w = { 0 };
	const char *field = NULL, *msg = NULL, *tool = NULL;
	char buf[512];
	json_t *v;

	if (serve_unsupported(rq, chat, &field, buf, sizeof buf))
		return serve_refuse(s, r, buf, field);
	if (!a)
		return serve_fail(s, r, 404, "invalid_request_error", "no such model");
	w.chat = chat;
	v = json_object_get(rq, "stream");
	if (v && !json_is_null(v) && !json_is_boolean(v))
		return serve_refuse(s, r, "'stream' must be a boolean", "stream");
	w.stream = json_is_true(v);
	v = json_object_get(rq, "stream_options");
	if (v && !json_is_null(v)) {
		const char *k;
		json_t *x;
		if (!json_is_object(v))
			return serve_refuse(s, r, "'stream_options' must be an object",
					    "stream_options");
		json_object_foreach(v, k, x)
			if (strcmp(k, "include_usage")) {
				snprintf(buf, sizeof buf, "'stream_options.%s' is not supported", k);
				return serve_refuse(s, r, buf, "stream_options");
			}
		if (!w.stream)
			return serve_refuse(s, r, "'stream_options' needs 'stream': true",
					    "stream_options");
		w.usage = json_is_true(json_object_get(v, "include_usage"));
	}
	v = json_object_get(rq, "logprobs");
	w.lp = chat ? json_is_true(v) : json_is_integer(v) || json_is_true(v);
	w.echo = !chat && json_is_true(json_object_get(rq, "echo"));
	v = json_object_get(rq, "prompt_logprobs");
	w.prompt_lp = v && !json_is_null(v);
	if (chat) {
		if ((w.tools = serve_tool_mode(rq, &tool, &msg)) < 0)
			return serve_refuse(s, r, msg, "tools");
		w.single_call = json_is_false(json_object_get(rq, "parallel_tool_calls"));
	}
	if (serve_prompt_ids(a, rq, chat, 1, w.tools, tool, &w.prefix, &ids, r)) {
		fw_tok_ids_release(&ids);
		return answered(r);
	}
	if (!chat && ids.n == 0 && fw_tok_ids_push(&ids, a->b->stop[0] >= 0 ? a->b->stop[0] : 0, 0)) {
		fw_tok_ids_release(&ids);
		free(w.prefix);
		return serve_fail(s, r, 500, "server_error", "out of memory");
	}
	if (serve_fit(a, rq, ids.n, r) < 0) {
		fw_tok_ids_release(&ids);
		free(w.prefix);
		return answered(r);
	}
	struct job *j = serve_make_job(a, rq, &w, &ids, &field, buf, sizeof buf);
	fw_tok_ids_release(&ids);
	if (!j) {
		free(w.prefix);
		return field || strcmp(buf, "out of memory")
			? serve_refuse(s, r, buf, field)
			: serve_fail(s, r, 500, "server_error", buf);
	}
	if (w.prompt_lp && !(w.echo && j->max_tokens == 0)) {
		serve_job_free(j);
		free(w.prefix);
		return serve_refuse(s, r, "'prompt_logprobs' is served with 'echo': true and "
					 "'max_tokens': 0 only", "prompt_logprobs");
	}
	snprintf(w.id, sizeof w.id, "%s-%016llx", chat ? "chatcmpl" : "cmpl",
		 (unsigned long long)serve_fresh(s));
	w.created = (long)time(NULL);
	j->score = w.echo && j->max_tokens == 0;
	if (j->max_tokens == 0 && !j->score) {
		/* nothing to decode: every choice is empty */
		for (int k = 0; k < j->n; k++)
			j->ch[k].finish = "length", j->ch[k].done = 1;
		j->finished = 1;
		j->refs = 1;
	} else if (serve_submit(a, j)) {
		serve_job_free(j);
		free(w.prefix);
		return serve_fail(s, r, 500, "server_error", "out of memory");
	}
	if (w.stream && !j->score) {
		if (!(r->stream = serve_stream_new(a, j, &w))) {
			pthread_mutex_lock(&a->mu);
			j->cancelled = 1;
			pthread_mutex_unlock(&a->mu);
			serve_job_drop(a, j, 0);
			free(w.prefix);
			return -1;
		}
		r->status = 200;
		r->ctype = "text/event-stream";
		serve_count(s, 200);
		return 0;
	}
	serve_wait_done(a, j);
	int rc;
	if (j->failed)
		rc = serve_fail(s, r, 500, "server_error", j->err);
	else
		rc = serve_reply(s, r, 200, j->score ? serve_score_answer(a, j, &w)
						      : serve_answer(a, j, &w));
	serve_job_drop(a, j, 0);
	free(w.prefix);
	return rc;
}

/* POST /tokenize, as vLLM answers it: the ids of "prompt" (a BOS first
 * unless "add_special_tokens" is false) or of the rendered "messages",
 * their count and the model's context. */
static int tokenize(struct fw_serve *s, json_t *rq, struct fw_serve_reply *r)
{
	struct arm *a = find_arm(s, rq);
	struct fw_tok_ids ids = { 0 };
	const char *tool = NULL, *msg = NULL;
	char *prefix = NULL;
	int chat = json_object_get(rq, "messages") != NULL, mode = TOOLS_NONE;
	json_t *t;

	if (!a)
		return serve_fail(s, r, 404, "invalid_request_error", "no such model");
	if (chat && (mode = serve_tool_mode(rq, &tool, &msg)) < 0)
		return serve_refuse(s, r, msg, "tools");
	if (serve_prompt_ids(a, rq, chat, !json_is_false(json_object_get(rq, "add_special_tokens")),
			     mode, tool, &prefix, &ids, r)) {
		fw_tok_ids_release(&ids);
		return answered(r);
	}
	free(prefix);
	t = json_array();
	for (size_t i = 0; t && i < ids.n; i++)
		json_array_append_new(t, json_integer(ids.ids[i]));
	fw_tok_ids_release(&ids);
	return serve_reply(s, r, 200, json_pack("{s:i,s:i,s:o}", "count", (int)json_array_size(t),
						 "max_model_len", a->b->m->cfg.max_pos,
						 "tokens", t));
}


int fw_serve_open_path(const char *url)
{
	return !strcmp(url, "/health") || !strcmp(url, "/metrics");
}

/* 1 when the Authorization header h carries the server's API key (or
 * none is set). */
static int authorized(const struct fw_serve *s, const char *h)
{
	size_t n;

	if (!s->api_key)
		return 1;
	if (!h || strncasecmp(h, "Bearer ", 7))
		return 0;
	h += 7;
	n = strlen(s->api_key);
	/* the same time whatever prefix matches */
	unsigned d = strlen(h) != n;
	for (size_t i = 0; i < n; i++)
		d |= (unsigned)(h[i < strlen(h) ? i : 0] ^ s->api_key[i]);
	return d == 0;
}

static int unauthorized(struct fw_serve *s, struct fw_serve_reply *r)
{
	return serve_reply(s, r, 401,
			   json_pack("{s:{s:s,s:s,s:n,s:s}}", "error", "message",
				     "a missing or wrong API key (send Authorization: Bearer KEY)",
				     "type", "invalid_request_error", "param", "code",
				     "invalid_api_key"));
}

static int get(struct fw_serve *s, const char *url, struct fw_serve_reply *r)
{
	if (!strcmp(url, "/health"))
		return serve_reply(s, r, 200, json_pack("{s:s}", "status", "ok"));
	if (!strcmp(url, "/metrics")) {
		struct fw_buf b = { 0 };
		if (serve_metrics(s, &b)) {
			fw_buf_free(&b);
			return -1;
		}
		r->status = 200;
		r->ctype = "text/plain; version=0.0.4";
		r->body = (char *)b.p;
		r->len = b.n;
		serve_count(s, 200);
		return 0;
	}
	if (!strcmp(url, "/v1/models")) {
		json_t *d = json_array();
		for (int i = 0; i < s->narms; i++)
			json_array_append_new(d, model_json(&s->arms[i]));
		return serve_reply(s, r, 200, json_pack("{s:s,s:o}", "object", "list", "data", d));
	}
	if (!strncmp(url, "/v1/models/", 11)) {
		for (int i = 0; i < s->narms; i++)
			if (!strcmp(url + 11, s->arms[i].name))
				return serve_reply(s, r, 200, model_json(&s->arms[i]));
		return serve_fail(s, r, 404, "invalid_request_error", "no such model");
	}
	return serve_fail(s, r, 404, "invalid_request_error", "no such path");
}

int fw_serve_handle(struct fw_serve *s, const struct fw_serve_request *rq,
		    struct fw_serve_reply *r)
{
	memset(r, 0, sizeof *r);
	if (!strcmp(rq->method, "GET")) {
		if (!fw_serve_open_path(rq->url) && !authorized(s, rq->auth))
			return unauthorized(s, r);
		return get(s, rq->url, r);
	}
	if (strcmp(rq->method, "POST"))
		return serve_fail(s, r, 405, "invalid_request_error", "method not allowed");
	if (!authorized(s, rq->auth))
		return unauthorized(s, r);
	if (rq->too_big)
		return serve_fail(s, r, 413, "invalid_request_error", "request body too large");
	json_error_t je;
	json_t *j = json_loadb(rq->body ? rq->body : "", rq->n, 0, &je);
	if (!json_is_object(j)) {
		json_decref(j);
		return serve_fail(s, r, 400, "invalid_request_error",
				  "the body is not a JSON object");
	}
	int rc;
	if (!strcmp(rq->url, "/v1/completions"))
		rc = completions(s, j, 0, r);
	else if (!strcmp(rq->url, "/v1/chat/completions"))
		rc = completions(s, j, 1, r);
	else if (!strcmp(rq->url, "/tokenize"))
		rc = tokenize(s, j, r);
	else
		rc = serve_fail(s, r, 404, "invalid_request_error", "no such path");
	json_decref(j);
	return rc;
}
