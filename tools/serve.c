/*
 * serve — flywheel checkpoints behind an OpenAI-compatible HTTP API
 * (libmicrohttpd).  See serve(1).
 *
 * libmicrohttpd is loaded at run time (dlopen), so that the other tools,
 * which all link the same libraries, do not depend on it.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "fw_cli.h"
#include "fw_policy.h"
#include "fw_rollout.h"
#include "kernels_dev.h"

#if !__has_include(<microhttpd.h>)
/* Built where libmicrohttpd-dev is missing: the tool says so. */
int main(void)
{
	fw_cli_init("serve");
	fw_warn("built without libmicrohttpd (install libmicrohttpd-dev and rebuild)");
	return FW_EXIT_DATA;
}
#else
#include <microhttpd.h>

static const char usage_text[] =
	"usage: serve --ckpt NAME=DIR ... [--host ADDR] [--port P] [--max-body BYTES]\n"
	"             [--device cpu|cuda[:N]]\n"
	"       serve -h | --help | --version\n";

/* One checkpoint by name; requests to it take turns. */
struct arm {
	const char *name, *dir;
	struct fw_builtin *b;
	pthread_mutex_t mu;
};

/* The libmicrohttpd calls serve makes, found by dlopen. */
static struct {
	struct MHD_Daemon *(*start_daemon)(unsigned int, uint16_t, MHD_AcceptPolicyCallback, void *,
					   MHD_AccessHandlerCallback, void *, ...);
	void (*stop_daemon)(struct MHD_Daemon *);
	const union MHD_DaemonInfo *(*get_daemon_info)(struct MHD_Daemon *,
							enum MHD_DaemonInfoType, ...);
	struct MHD_Response *(*create_response_from_buffer)(size_t, void *,
							     enum MHD_ResponseMemoryMode);
	enum MHD_Result (*add_response_header)(struct MHD_Response *, const char *, const char *);
	enum MHD_Result (*queue_response)(struct MHD_Connection *, unsigned int,
					  struct MHD_Response *);
	void (*destroy_response)(struct MHD_Response *);
} mhd;

static int load_mhd(void)
{
	static const char *const names[] = { "libmicrohttpd.so.12", "libmicrohttpd.so" };
	void *h = NULL;

	for (size_t i = 0; !h && i < sizeof names / sizeof names[0]; i++)
		h = dlopen(names[i], RTLD_NOW);
	if (!h) {
		fw_warn("cannot load libmicrohttpd: %s", dlerror());
		return -1;
	}
	*(void **)&mhd.start_daemon = dlsym(h, "MHD_start_daemon");
	*(void **)&mhd.stop_daemon = dlsym(h, "MHD_stop_daemon");
	*(void **)&mhd.get_daemon_info = dlsym(h, "MHD_get_daemon_info");
	*(void **)&mhd.create_response_from_buffer = dlsym(h, "MHD_create_response_from_buffer");
	*(void **)&mhd.add_response_header = dlsym(h, "MHD_add_response_header");
	*(void **)&mhd.queue_response = dlsym(h, "MHD_queue_response");
	*(void **)&mhd.destroy_response = dlsym(h, "MHD_destroy_response");
	if (!mhd.start_daemon || !mhd.stop_daemon || !mhd.get_daemon_info ||
	    !mhd.create_response_from_buffer || !mhd.add_response_header || !mhd.queue_response ||
	    !mhd.destroy_response) {
		fw_warn("libmicrohttpd lacks a function serve needs");
		return -1;
	}
	return 0;
}

static struct arm *arms;
static int narms;
static size_t max_body = 8u << 20;

/* A request body being received. */
struct req {
	char *p;
	size_t n;
	int too_big;
};

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT);
	struct MHD_Response *r;
	enum MHD_Result rc;

	json_decref(j);
	if (!s)
		return MHD_NO;
	r = mhd.create_response_from_buffer(strlen(s), s, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(s);
		return MHD_NO;
	}
	mhd.add_response_header(r, "Content-Type", "application/json");
	rc = mhd.queue_response(c, status, r);
	mhd.destroy_response(r);
	return rc;
}

static enum MHD_Result fail(struct MHD_Connection *c, unsigned status, const char *type,
			    const char *msg)
{
	return reply(c, status, json_pack("{s:{s:s,s:s}}", "error", "message", msg, "type", type));
}

static struct arm *find_arm(json_t *req)
{
	const char *m = json_string_value(json_object_get(req, "model"));

	if (!m)
		return narms == 1 ? &arms[0] : NULL;
	for (int i = 0; i < narms; i++)
		if (!strcmp(arms[i].name, m))
			return &arms[i];
	return NULL;
}

/* vLLM's answer to a request it refuses: HTTP 400 and this error object. */
static enum MHD_Result refuse(struct MHD_Connection *c, const char *msg)
{
	return reply(c, MHD_HTTP_BAD_REQUEST,
		     json_pack("{s:{s:s,s:s,s:n,s:i}}", "error", "message", msg, "type",
			       "BadRequestError", "param", "code", 400));
}

/* The sampling fields of a request; -1 with msg on a bad value.  *given
 * (may be NULL) is set when the request names max_tokens. */
static int sampling(json_t *rq, struct fw_sampler *s, int *max_tokens, uint64_t *seed, int *n,
		    int *given, const char **msg)
{
	json_t *v;

	if (given)
		*given = 0;
	s->temp = 1;
	s->top_p = 1;
	s->top_k = 0;
	*max_tokens = 16;
	*seed = 0;
	*n = 1;
	if ((v = json_object_get(rq, "temperature")) && !json_is_null(v)) {
		if (!json_is_number(v) || json_number_value(v) < 0)
			return *msg = "'temperature' must be a number >= 0", -1;
		s->temp = (float)json_number_value(v);
	}
	if ((v = json_object_get(rq, "top_p")) && !json_is_null(v)) {
		if (!json_is_number(v) || !(json_number_value(v) > 0 && json_number_value(v) <= 1))
			return *msg = "'top_p' must be in (0, 1]", -1;
		s->top_p = (float)json_number_value(v);
	}
	if ((v = json_object_get(rq, "top_k")) && !json_is_null(v)) {
		if (!json_is_integer(v) || json_integer_value(v) < 0)
			return *msg = "'top_k' must be an integer >= 0", -1;
		s->top_k = (int)json_integer_value(v);
	}
	if (((v = json_object_get(rq, "max_tokens")) && !json_is_null(v)) ||
	    ((v = json_object_get(rq, "max_completion_tokens")) && !json_is_null(v))) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > 1 << 20)
			return *msg = "'max_tokens' must be an integer >= 0", -1;
		*max_tokens = (int)json_integer_value(v);
		if (given)
			*given = 1;
	}
	if ((v = json_object_get(rq, "seed")) && !json_is_null(v)) {
		if (!json_is_integer(v))
			return *msg = "'seed' must be an integer", -1;
		*seed = (uint64_t)json_integer_value(v);
	}
	if ((v = json_object_get(rq, "n")) && !json_is_null(v)) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 64)
			return *msg = "'n' must be an integer in 1..64", -1;
		*n = (int)json_integer_value(v);
	}
	return 0;
}

/* The text of id as a JSON string (valid UTF-8 whatever the bytes). */
static json_t *piece(const struct fw_tok *t, int32_t id)
{
	size_t n, fn;
	const char *p = fw_tok_piece(t, id, &n);
	char *f = fw_utf8_fix(p ? p : "", p ? n : 0, &fn);
	json_t *j = json_stringn(f ? f : "", f ? fn : 0);

	free(f);
	return j;
}

static const char *finish(const struct fw_completion *c)
{
	return strcmp(c->stop, "eos") ? "length" : "stop";
}

/* The log-prob of each prompt id given the ids before it (lp[0] is not
 * defined and set to 0).  Returns 0 or -1 with err. */
static int score(struct arm *a, const int32_t *ids, size_t n, float *lp, char *err, size_t errlen)
{
	int32_t *tg = malloc(sizeof(int32_t) * n);
	int rc;

	if (!tg) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i + 1 < n; i++)
		tg[i] = ids[i + 1];
	tg[n - 1] = -1;
	pthread_mutex_lock(&a->mu);
	a->b->m->no_grad = 1;
	rc = fw_model_forward(a->b->m, ids, tg, NULL, 1, (int)n, 0, lp + 1, NULL, err, errlen);
	pthread_mutex_unlock(&a->mu);
	lp[0] = 0;
	free(tg);
	return rc;
}

/* Decodes n choices for prompt ids under the request's settings; fills
 * choices (chat: message form).  Returns 0 or -1 with err. */
static int decode(struct arm *a, json_t *rq, const int32_t *ids, size_t nids, int chat,
		  json_t *choices, int *prompt_tokens, int *completion_tokens, int *status,
		  char *err, size_t errlen)
{
	struct fw_sampler s;
	int max_tokens, n, rc = -1;
	uint64_t seed;
	const char *msg;
	json_t *lpv = json_object_get(rq, "logprobs");
	int want_lp = chat ? json_is_true(lpv) : json_is_integer(lpv);

	if (sampling(rq, &s, &max_tokens, &seed, &n, NULL, &msg)) {
		snprintf(err, errlen, "%s", msg);
		*status = MHD_HTTP_BAD_REQUEST;
		return -1;
	}
	*prompt_tokens = (int)nids;
	*completion_tokens = 0;
	int echo = !chat && json_is_true(json_object_get(rq, "echo"));
	float *plp = NULL;
	if (echo) {
		/* lp[i] for ids[i]; forward writes nids values from lp + 1 */
		if (!(plp = calloc(nids + 1, sizeof *plp))) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		if (score(a, ids, nids, plp, err, errlen)) {
			free(plp);
			*status = MHD_HTTP_BAD_REQUEST;
			return -1;
		}
	}
	if (max_tokens == 0 && echo) {
		json_t *toks = json_array(), *lps = json_array(), *all = json_array();
		struct fw_buf txt = { 0 };
		for (size_t i = 0; i < nids; i++) {
			size_t pn;
			const char *pc = fw_tok_piece(a->b->t, ids[i], &pn);
			if (pc && !fw_tok_is_special(a->b->t, ids[i]))
				fw_buf_append(&txt, pc, pn);
			json_array_append_new(toks, piece(a->b->t, ids[i]));
			json_array_append_new(lps, i ? json_real(plp[i]) : json_null());
			json_array_append_new(all, json_integer(ids[i]));
		}
		size_t tl;
		char *t = fw_utf8_fix(txt.p ? (const char *)txt.p : "", txt.n, &tl);
		fw_buf_free(&txt);
		for (int k = 0; k < n; k++)
			json_array_append_new(choices, json_pack("{s:i,s:s%,s:{s:O,s:O},s:s,s:O}", "index",
				k, "text", t ? t : "", t ? tl : 0, "logprobs", "tokens", toks,
				"token_logprobs", lps, "finish_reason", "length", "token_ids", all));
		free(t);
		json_decref(toks);
		json_decref(lps);
		json_decref(all);
		free(plp);
		return 0;
	}
	free(plp);
	if (max_tokens == 0) {
		for (int k = 0; k < n; k++)
			json_array_append_new(choices, chat
				? json_pack("{s:i,s:{s:s,s:s},s:n,s:s}", "index", k, "message", "role",
					    "assistant", "content", "", "logprobs", "finish_reason",
					    "length")
				: json_pack("{s:i,s:s,s:n,s:s}", "index", k, "text", "", "logprobs",
					    "finish_reason", "length"));
		return 0;
	}
	struct fw_completion *c = calloc((size_t)n, sizeof *c);
	uint64_t *seeds = calloc((size_t)n, sizeof *seeds);
	if (!c || !seeds) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	/* choice k draws from seed k of the request: the first from the
	 * seed itself, so that a client that derives per-sample seeds gets
	 * exactly its stream */
	for (int k = 0; k < n; k++)
		seeds[k] = k == 0 ? (seed ? seed : 1) : fw_rollout_seed(seed, "", 0, k);
	pthread_mutex_lock(&a->mu);
	rc = fw_builtin_complete_ids(a->b, ids, nids, n, seeds, &s, max_tokens, NULL, c, err,
				     errlen);
	pthread_mutex_unlock(&a->mu);
	if (rc) {
		*status = MHD_HTTP_BAD_REQUEST;
		goto out;
	}
	for (int k = 0; k < n; k++) {
		size_t tl;
		char *txt = fw_utf8_fix(c[k].text, c[k].len, &tl);
		json_t *ids_j = json_array(), *lp = json_null();
		/* the end token is not text: it ends the choice */
		int nt = c[k].n - (!strcmp(c[k].stop, "eos"));
		for (int i = 0; i < c[k].n; i++)
			json_array_append_new(ids_j, json_integer(c[k].tokens[i]));
		*completion_tokens += c[k].n;
		if (want_lp && chat) {
			json_t *content = json_array();
			for (int i = 0; i < nt; i++)
				json_array_append_new(content, json_pack("{s:o,s:f,s:[]}", "token",
					piece(a->b->t, c[k].tokens[i]), "logprob",
					(double)c[k].logprobs[i], "top_logprobs"));
			lp = json_pack("{s:o}", "content", content);
		} else if (want_lp) {
			json_t *toks = json_array(), *lps = json_array();
			for (int i = 0; i < nt; i++) {
				json_array_append_new(toks, piece(a->b->t, c[k].tokens[i]));
				json_array_append_new(lps, json_real(c[k].logprobs[i]));
			}
			lp = json_pack("{s:o,s:o}", "tokens", toks, "token_logprobs", lps);
		}
		/* token_ids and token_logprobs_all carry every id drawn, end
		 * token included, for clients that train on them */
		json_t *all = json_array();
		for (int i = 0; i < c[k].n; i++)
			json_array_append_new(all, json_real(c[k].logprobs[i]));
		json_t *ch = chat
			? json_pack("{s:i,s:{s:s,s:s%},s:o,s:s,s:o,s:o}", "index", k, "message", "role",
				    "assistant", "content", txt ? txt : "", txt ? tl : 0, "logprobs",
				    lp, "finish_reason", finish(&c[k]), "token_ids", ids_j,
				    "token_logprobs_all", all)
			: json_pack("{s:i,s:s%,s:o,s:s,s:o,s:o}", "index", k, "text", txt ? txt : "",
				    txt ? tl : 0, "logprobs", lp, "finish_reason", finish(&c[k]),
				    "token_ids", ids_j, "token_logprobs_all", all);
		free(txt);
		json_array_append_new(choices, ch);
	}
	rc = 0;
out:
	if (c)
		for (int k = 0; k < n; k++)
			fw_completion_clear(&c[k]);
	free(c);
	free(seeds);
	return rc;
}

/*
 * Checks that a prompt of P tokens and the completion asked for fit the
 * model's context (max_position_embeddings, W), as vLLM does: a prompt that
 * leaves no room (P > W, or P = W with tokens to generate) and a max_tokens
 * beyond W - P are refused with HTTP 400 and vLLM's words; a request that
 * names no max_tokens gets 16, or W - P when less.  The count to decode is
 * written back into rq.  Returns 0, or -1 with the refusal queued and its
 * result in *queued.
 */
static int fit(struct MHD_Connection *con, struct arm *a, json_t *rq, size_t P,
	       enum MHD_Result *queued)
{
	struct fw_sampler s;
	int M, n, given;
	uint64_t seed;
	const char *msg;
	long W = a->b->m->cfg.max_pos;
	char buf[512];

	if (sampling(rq, &s, &M, &seed, &n, &given, &msg))
		return 0; /* decode() reports it */
	if ((long)P > W || ((long)P == W && M > 0)) {
		snprintf(buf, sizeof buf,
			 "This model's maximum context length is %ld tokens. However, your request "
			 "has %zu input tokens. Please reduce the length of the input messages.",
			 W, P);
		*queued = refuse(con, buf);
		return -1;
	}
	if ((long)P + M > W) {
		if (given) {
			snprintf(buf, sizeof buf,
				 "'max_tokens' or 'max_completion_tokens' is too large: %d. This "
				 "model's maximum context length is %ld tokens and your request has "
				 "%zu input tokens (%d > %ld - %zu).",
				 M, W, P, M, W, P);
			*queued = refuse(con, buf);
			return -1;
		}
		M = (int)(W - (long)P);
	}
	json_object_del(rq, "max_completion_tokens");
	json_object_set_new(rq, "max_tokens", json_integer(M));
	return 0;
}

/*
 * The prompt of a request as token ids: the rendered chat of "messages"
 * (chat), or "prompt" as ids or text (a BOS first when the tokenizer has
 * one and special is set).  Returns 0, or -1 with the error queued and its
 * result in *queued.
 */
static int prompt_ids(struct MHD_Connection *con, struct arm *a, json_t *rq, int chat,
		      int special, struct fw_tok_ids *ids, enum MHD_Result *queued)
{
	char err[512];

	if (chat) {
		json_t *msgs = json_object_get(rq, "messages"), *m;
		size_t i, nm = json_array_size(msgs);
		struct fw_chat_turn *t = calloc(nm ? nm : 1, sizeof *t);
		int tmpl = fw_chat_detect(a->b->t);
		if (!json_is_array(msgs) || nm == 0 || !t) {
			free(t);
			*queued = fail(con, MHD_HTTP_BAD_REQUEST, "invalid_request_error",
				       "'messages' must be a non-empty array");
			return -1;
		}
		json_array_foreach(msgs, i, m) {
			json_t *content = json_object_get(m, "content");
			t[i].role = json_string_value(json_object_get(m, "role"));
			t[i].text = json_is_string(content) ? json_string_value(content) : "";
			t[i].len = json_is_string(content) ? json_string_length(content) : 0;
			if (!t[i].role) {
				free(t);
				*queued = fail(con, MHD_HTTP_BAD_REQUEST, "invalid_request_error",
					       "a message has no 'role'");
				return -1;
			}
		}
		int rc = tmpl < 0 ? -1
			 : fw_chat_render(a->b->t, (enum fw_chat_template)tmpl, t, nm, 1, ids,
					  err, sizeof err);
		free(t);
		if (rc) {
			*queued = fail(con, MHD_HTTP_BAD_REQUEST, "invalid_request_error",
				       tmpl < 0 ? "the model's tokenizer has no chat template" : err);
			return -1;
		}
		return 0;
	}
	json_t *p = json_object_get(rq, "prompt"), *x;
	int32_t bos = special ? fw_tok_bos(a->b->t) : -1;
	size_t i;
	/* token ids, the API's other form of a prompt: used as they are */
	if (json_is_array(p) && json_array_size(p) > 0) {
		json_array_foreach(p, i, x) {
			json_int_t id = json_integer_value(x);
			if (!json_is_integer(x) || id < 0 || id >= a->b->m->cfg.vocab) {
				*queued = fail(con, MHD_HTTP_BAD_REQUEST, "invalid_request_error",
					       "'prompt' ids must be integers below the vocabulary size");
				return -1;
			}
			if (fw_tok_ids_push(ids, (int32_t)id, 0))
				goto oom;
		}
	} else if (!json_is_string(p)) {
		*queued = fail(con, MHD_HTTP_BAD_REQUEST, "invalid_request_error",
			       "'prompt' must be a string or an array of token ids");
		return -1;
	}
	if (json_is_string(p) &&
	    ((bos >= 0 && fw_tok_ids_push(ids, bos, 0)) ||
	     fw_tok_encode(a->b->t, json_string_value(p), json_string_length(p), 0, 0, ids)))
		goto oom;
	return 0;
oom:
	*queued = fail(con, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", "out of memory");
	return -1;
}

static enum MHD_Result completions(struct MHD_Connection *con, json_t *rq, int chat)
{
	struct arm *a = find_arm(rq);
	struct fw_tok_ids ids = { 0 };
	char err[512];
	int status = MHD_HTTP_INTERNAL_SERVER_ERROR, pt, ct;
	enum MHD_Result q;
	json_t *choices;

	if (!a)
		return fail(con, MHD_HTTP_NOT_FOUND, "invalid_request_error", "no such model");
	if (prompt_ids(con, a, rq, chat, 1, &ids, &q)) {
		fw_tok_ids_release(&ids);
		return q;
	}
	if (!chat && ids.n == 0 && fw_tok_ids_push(&ids, a->b->stop[0] >= 0 ? a->b->stop[0] : 0, 0)) {
		fw_tok_ids_release(&ids);
		return fail(con, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", "out of memory");
	}
	if (fit(con, a, rq, ids.n, &q) < 0) {
		fw_tok_ids_release(&ids);
		return q;
	}
	choices = json_array();
	if (decode(a, rq, ids.ids, ids.n, chat, choices, &pt, &ct, &status, err, sizeof err)) {
		json_decref(choices);
		fw_tok_ids_release(&ids);
		return fail(con, status, status == MHD_HTTP_BAD_REQUEST ? "invalid_request_error"
									: "server_error", err);
	}
	fw_tok_ids_release(&ids);
	return reply(con, MHD_HTTP_OK,
		     json_pack("{s:s,s:s,s:s,s:o,s:{s:i,s:i,s:i}}", "id", "fw-0", "object",
			       chat ? "chat.completion" : "text_completion", "model", a->name,
			       "choices", choices, "usage", "prompt_tokens", pt,
			       "completion_tokens", ct, "total_tokens", pt + ct));
}

/* POST /tokenize, as vLLM answers it: the ids of "prompt" (a BOS first
 * unless "add_special_tokens" is false) or of the rendered "messages",
 * their count and the model's context. */
static enum MHD_Result tokenize(struct MHD_Connection *con, json_t *rq)
{
	struct arm *a = find_arm(rq);
	struct fw_tok_ids ids = { 0 };
	enum MHD_Result q;
	json_t *t;

	if (!a)
		return fail(con, MHD_HTTP_NOT_FOUND, "invalid_request_error", "no such model");
	if (prompt_ids(con, a, rq, json_object_get(rq, "messages") != NULL,
		       !json_is_false(json_object_get(rq, "add_special_tokens")), &ids, &q)) {
		fw_tok_ids_release(&ids);
		return q;
	}
	t = json_array();
	for (size_t i = 0; t && i < ids.n; i++)
		json_array_append_new(t, json_integer(ids.ids[i]));
	fw_tok_ids_release(&ids);
	return reply(con, MHD_HTTP_OK, json_pack("{s:i,s:i,s:o}", "count", (int)json_array_size(t),
						 "max_model_len", a->b->m->cfg.max_pos,
						 "tokens", t));
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *con, const char *url,
			       const char *method, const char *version, const char *upload,
			       size_t *upload_size, void **state)
{
	struct req *r = *state;

	(void)cls;
	(void)version;
	if (!strcmp(method, "GET")) {
		if (!strcmp(url, "/health"))
			return reply(con, MHD_HTTP_OK, json_pack("{s:s}", "status", "ok"));
		if (!strcmp(url, "/v1/models")) {
			json_t *d = json_array();
			for (int i = 0; i < narms; i++)
				json_array_append_new(d, json_pack("{s:s,s:s,s:s,s:i}", "id",
								   arms[i].name, "object", "model",
								   "owned_by", "flywheel", "max_model_len",
								   arms[i].b->m->cfg.max_pos));
			return reply(con, MHD_HTTP_OK, json_pack("{s:s,s:o}", "object", "list",
								 "data", d));
		}
		return fail(con, MHD_HTTP_NOT_FOUND, "invalid_request_error", "no such path");
	}
	if (strcmp(method, "POST"))
		return fail(con, MHD_HTTP_METHOD_NOT_ALLOWED, "invalid_request_error",
			    "method not allowed");
	if (!r) {
		if (!(r = calloc(1, sizeof *r)))
			return MHD_NO;
		*state = r;
		return MHD_YES;
	}
	if (*upload_size) {
		if (r->n + *upload_size > max_body) {
			r->too_big = 1;
		} else {
			char *p = realloc(r->p, r->n + *upload_size + 1);
			if (!p)
				return MHD_NO;
			memcpy(p + r->n, upload, *upload_size);
			r->p = p;
			r->n += *upload_size;
		}
		*upload_size = 0;
		return MHD_YES;
	}
	if (r->too_big)
		return fail(con, MHD_HTTP_CONTENT_TOO_LARGE, "invalid_request_error",
			    "request body too large");
	json_error_t je;
	json_t *rq = json_loadb(r->p ? r->p : "", r->n, 0, &je);
	if (!json_is_object(rq)) {
		json_decref(rq);
		return fail(con, MHD_HTTP_BAD_REQUEST, "invalid_request_error",
			    "the body is not a JSON object");
	}
	enum MHD_Result rc;
	if (!strcmp(url, "/v1/completions"))
		rc = completions(con, rq, 0);
	else if (!strcmp(url, "/v1/chat/completions"))
		rc = completions(con, rq, 1);
	else if (!strcmp(url, "/tokenize"))
		rc = tokenize(con, rq);
	else
		rc = fail(con, MHD_HTTP_NOT_FOUND, "invalid_request_error", "no such path");
	json_decref(rq);
	return rc;
}

static void done(void *cls, struct MHD_Connection *con, void **state,
		 enum MHD_RequestTerminationCode toe)
{
	struct req *r = *state;

	(void)cls;
	(void)con;
	(void)toe;
	if (r) {
		free(r->p);
		free(r);
		*state = NULL;
	}
}

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "%s: ", fw_prog);
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	fputs(usage_text, stderr);
	return FW_EXIT_USAGE;
}

int main(int argc, char **argv)
{
	fw_cli_init("serve");
	enum { O_CKPT = 256, O_HOST, O_PORT, O_MAX_BODY, O_DEVICE, O_VERSION };
	static const struct option longopts[] = {
		{ "ckpt", required_argument, NULL, O_CKPT },
		{ "device", required_argument, NULL, O_DEVICE },
		{ "host", required_argument, NULL, O_HOST },
		{ "port", required_argument, NULL, O_PORT },
		{ "max-body", required_argument, NULL, O_MAX_BODY },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, O_VERSION },
		{ NULL, 0, NULL, 0 },
	};
	const char *host = "127.0.0.1", *device = NULL;
	uint64_t port = 8000, u;
	int ch;

	arms = calloc((size_t)argc, sizeof *arms);
	if (!arms)
		return FW_EXIT_DATA;
	while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (ch) {
		case O_CKPT: {
			char *eq = strchr(optarg, '=');
			if (!eq || eq == optarg || !eq[1])
				return usage_error("bad checkpoint '%s' (want NAME=DIR)", optarg);
			*eq = '\0';
			for (int i = 0; i < narms; i++)
				if (!strcmp(arms[i].name, optarg))
					return usage_error("checkpoint name '%s' given twice", optarg);
			arms[narms].name = optarg;
			arms[narms++].dir = eq + 1;
			break;
		}
		case O_HOST: host = optarg; break;
		case O_DEVICE: device = optarg; break;
		case O_PORT:
			if (fw_parse_u64(optarg, &port, 0) || port > 65535)
				return usage_error("bad port '%s'", optarg);
			break;
		case O_MAX_BODY:
			if (fw_parse_u64(optarg, &u, 1) || u < 1024)
				return usage_error("bad body size '%s'", optarg);
			max_body = (size_t)u;
			break;
		case 'h': fputs(usage_text, stdout); return fw_close_stdout() ? FW_EXIT_DATA : 0;
		case O_VERSION: fw_print_version(); return fw_close_stdout() ? FW_EXIT_DATA : 0;
		default: fputs(usage_text, stderr); return FW_EXIT_USAGE;
		}
	}
	if (!narms)
		return usage_error("%s", "--ckpt is required");
	if (optind < argc)
		return usage_error("unexpected operand '%s'", argv[optind]);
	struct sockaddr_in sa = { 0 };
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		return usage_error("bad host '%s' (an IPv4 address)", host);
	char err[1024];
	if (load_mhd())
		return FW_EXIT_DATA;
	if (fw_dev_select(device, err, sizeof err) < 0) {
		fw_warn("%s", err);
		return FW_EXIT_DATA;
	}
	for (int i = 0; i < narms; i++) {
		if (!(arms[i].b = fw_builtin_load(arms[i].dir, err, sizeof err))) {
			fw_warn("%s", err);
			return FW_EXIT_DATA;
		}
		pthread_mutex_init(&arms[i].mu, NULL);
	}
	struct MHD_Daemon *d = mhd.start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG,
		0, NULL, NULL, handler, NULL, MHD_OPTION_SOCK_ADDR, &sa,
		MHD_OPTION_NOTIFY_COMPLETED, done, NULL, MHD_OPTION_CONNECTION_TIMEOUT, 120u,
		MHD_OPTION_END);
	if (!d) {
		fw_warn("cannot listen on %s:%llu", host, (unsigned long long)port);
		return FW_EXIT_DATA;
	}
	const union MHD_DaemonInfo *info = mhd.get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	/* the address on stdout, so that a script that asked for port 0 learns
	 * the one it got */
	printf("http://%s:%u\n", host, info ? info->port : (unsigned)port);
	fflush(stdout);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	while (!stop)
		pause();
	mhd.stop_daemon(d);
	for (int i = 0; i < narms; i++)
		fw_builtin_free(arms[i].b);
	free(arms);
	return fw_close_stdout() ? FW_EXIT_DATA : FW_EXIT_OK;
}
#endif
