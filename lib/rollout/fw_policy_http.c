/*
 * fw_policy_http.c — the http policy: completions from an OpenAI-compatible
 * server over libcurl.  See fw_policy.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <jansson.h>

#include "fw_json.h"
#include "fw_mp.h"
#include "fw_policy.h"

struct fw_http {
	CURL *c;
	char *url, *chat_url, *models_url, *tokenize_url, *model, *auth;
	double timeout_s;
	int retries;
	long ctx;       /* the server's context in tokens; 0 not asked yet, -1 unknown */
	int no_tokenize; /* the server has no /tokenize */
};

static size_t on_body(char *p, size_t sz, size_t n, void *ctx)
{
	return fw_buf_append(ctx, p, sz * n) ? 0 : sz * n;
}

struct fw_http *fw_http_new(const char *base, const char *model, const char *key_env,
			    double timeout_s, int retries, char *err, size_t errlen)
{
	struct fw_http *h = calloc(1, sizeof *h);
	const char *key = key_env ? getenv(key_env) : NULL;
	size_t bl = strlen(base);

	curl_global_init(CURL_GLOBAL_DEFAULT);
	if (!h || !(h->c = curl_easy_init())) {
		snprintf(err, errlen, "cannot start libcurl");
		free(h);
		return NULL;
	}
	while (bl && base[bl - 1] == '/')
		bl--;
	/* vLLM's /tokenize is at the server's root, beside /v1 */
	size_t rl = bl >= 3 && !memcmp(base + bl - 3, "/v1", 3) ? bl - 3 : bl;
	if (asprintf(&h->url, "%.*s/completions", (int)bl, base) < 0 ||
	    asprintf(&h->chat_url, "%.*s/chat/completions", (int)bl, base) < 0 ||
	    asprintf(&h->models_url, "%.*s/models", (int)bl, base) < 0 ||
	    asprintf(&h->tokenize_url, "%.*s/tokenize", (int)rl, base) < 0 ||
	    (model && !(h->model = strdup(model))) ||
	    (key && *key && asprintf(&h->auth, "Authorization: Bearer %s", key) < 0)) {
		snprintf(err, errlen, "out of memory");
		fw_http_free(h);
		return NULL;
	}
	h->timeout_s = timeout_s;
	h->retries = retries;
	return h;
}

void fw_http_free(struct fw_http *h)
{
	if (!h)
		return;
	if (h->c)
		curl_easy_cleanup(h->c);
	free(h->url);
	free(h->chat_url);
	free(h->models_url);
	free(h->tokenize_url);
	free(h->model);
	free(h->auth);
	free(h);
}

/* How much of a server's answer an error message quotes, in bytes. */
enum { QUOTE_MAX = 200, QUOTE_BUF = 4 * QUOTE_MAX + 1 };

/*
 * Writes into q (QUOTE_BUF bytes, NUL-terminated) the first bytes, at most
 * max, of a server's answer p[0..n) for an error message, and returns q.
 * The answer is any bytes and the buffer that holds it is not
 * NUL-terminated, so n bounds the copy.  Valid UTF-8 is kept as it is, a
 * character that max would cut is left out whole, and the rest (newlines,
 * other control characters, bytes that are not UTF-8) is escaped as \n,
 * \r, \t or \xHH, byte by byte, so that the message stays one printable
 * line.
 */
static const char *quote(char q[QUOTE_BUF], const void *p, size_t n, size_t max)
{
	const uint8_t *b = p;
	size_t o = 0, end = n < max ? n : max;

	if (end > QUOTE_MAX)
		end = QUOTE_MAX;
	for (size_t i = 0; b && i < end;) {
		uint8_t c = b[i];
		size_t k = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3
			 : (c & 0xf8) == 0xf0 ? 4 : 0;

		/* C1 controls (U+0080 to U+009F) are valid UTF-8 but not text */
		if (k > 1 && i + k <= n && fw_utf8_valid(b + i, k) &&
		    !(c == 0xc2 && b[i + 1] < 0xa0)) {
			if (i + k > end)
				break; /* a character the limit cuts */
			memcpy(q + o, b + i, k);
			o += k;
			i += k;
			continue;
		}
		if (k == 1 && c >= 0x20 && c != 0x7f)
			q[o++] = (char)c;
		else if (c == '\n' || c == '\r' || c == '\t')
			o += (size_t)snprintf(q + o, 3, "\\%c", c == '\n' ? 'n' : c == '\r' ? 'r' : 't');
		else
			o += (size_t)snprintf(q + o, 5, "\\x%02x", c);
		i++;
	}
	q[o] = '\0';
	return q;
}

static void nap(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (time_t)s) * 1e9) };

	nanosleep(&ts, NULL);
}

/* POSTs body (GETs when body is NULL); fills *resp and *status.  Returns
 * 0, or -1 with err after the retries are spent. */
static int post(struct fw_http *h, const char *url, const char *body, struct fw_buf *resp,
		long *status, char *err, size_t errlen)
{
	struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
	char q[QUOTE_BUF];
	double wait = 0.25;
	int rc = -1;

	if (h->auth)
		hd = curl_slist_append(hd, h->auth);
	for (int attempt = 0;; attempt++) {
		CURLcode cc;

		fw_buf_reset(resp);
		curl_easy_reset(h->c);
		curl_easy_setopt(h->c, CURLOPT_URL, url);
		curl_easy_setopt(h->c, CURLOPT_HTTPHEADER, hd);
		if (body)
			curl_easy_setopt(h->c, CURLOPT_POSTFIELDS, body);
		else
			curl_easy_setopt(h->c, CURLOPT_HTTPGET, 1L);
		curl_easy_setopt(h->c, CURLOPT_WRITEFUNCTION, on_body);
		curl_easy_setopt(h->c, CURLOPT_WRITEDATA, resp);
		curl_easy_setopt(h->c, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(h->c, CURLOPT_TIMEOUT_MS, (long)(h->timeout_s * 1000));
		curl_easy_setopt(h->c, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
		cc = curl_easy_perform(h->c);
		*status = 0;
		if (cc == CURLE_OK)
			curl_easy_getinfo(h->c, CURLINFO_RESPONSE_CODE, status);
		/* 501 (a method the server lacks) will not change on retry */
		int again = cc != CURLE_OK || *status == 429 || (*status >= 500 && *status != 501);
		if (!again) {
			rc = 0;
			break;
		}
		if (attempt >= h->retries) {
			if (cc != CURLE_OK)
				snprintf(err, errlen, "%s: %s", url, curl_easy_strerror(cc));
			else
				snprintf(err, errlen, "%s: HTTP %ld: %s", url, *status,
					 quote(q, resp->p, resp->n, QUOTE_MAX));
			break;
		}
		nap(wait);
		wait *= 2;
	}
	curl_slist_free_all(hd);
	return rc;
}

/* Sends rq (a completions or chat request, consumed) and reads choice 0
 * into out. */
static int request(struct fw_http *h, int chat, json_t *rq, const struct fw_sampler *s,
		   uint64_t seed, int max_tokens, struct fw_completion *out, char *err,
		   size_t errlen)
{
	const char *url = chat ? h->chat_url : h->url;
	struct fw_buf resp = { 0 };
	char *body = NULL, q[QUOTE_BUF];
	long status;
	json_t *doc = NULL, *ch, *v;
	int rc = -1;

	memset(out, 0, sizeof *out);
	out->keep = -1;
	json_object_set_new(rq, "max_tokens", json_integer(max_tokens));
	json_object_set_new(rq, "temperature", json_real(s->temp));
	json_object_set_new(rq, "top_p", json_real(s->top_p));
	json_object_set_new(rq, "seed", json_integer((json_int_t)seed));
	json_object_set_new(rq, "logprobs", chat ? json_true() : json_integer(1));
	if (s->top_k > 0)
		json_object_set_new(rq, "top_k", json_integer(s->top_k));
	if (h->model)
		json_object_set_new(rq, "model", json_string(h->model));
	if (!(body = json_dumps(rq, JSON_COMPACT))) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if (post(h, url, body, &resp, &status, err, errlen))
		goto out;
	json_error_t je;
	doc = json_loadb(resp.p ? (const char *)resp.p : "", resp.n, JSON_ALLOW_NUL, &je);
	if (status != 200) {
		json_t *m = json_object_get(json_object_get(doc, "error"), "message");

		snprintf(err, errlen, "%s: HTTP %ld: %s", url, status,
			 json_is_string(m) ? quote(q, json_string_value(m), json_string_length(m),
						    QUOTE_MAX)
					   : quote(q, resp.p, resp.n, QUOTE_MAX));
		goto out;
	}
	ch = json_array_get(json_object_get(doc, "choices"), 0);
	v = chat ? json_object_get(json_object_get(ch, "message"), "content")
		 : json_object_get(ch, "text");
	json_t *tcs = chat ? json_object_get(json_object_get(ch, "message"), "tool_calls") : NULL;
	if (json_is_array(tcs) && json_array_size(tcs)) {
		json_t *calls = json_array(), *tc;
		size_t i;
		json_array_foreach(tcs, i, tc)
		{
			json_t *fn = json_object_get(tc, "function"), *args = json_object_get(fn, "arguments");
			json_t *id = json_object_get(tc, "id");
			const char *name = json_string_value(json_object_get(fn, "name"));
			char idb[32];
			if (!name) {
				json_decref(calls);
				snprintf(err, errlen, "%s: tool call %zu has no function name", url, i + 1);
				goto out;
			}
			snprintf(idb, sizeof idb, "call_%zu", i);
			char *as = json_is_string(args) ? strdup(json_string_value(args))
				   : json_dumps(args ? args : json_object(), JSON_COMPACT);
			json_array_append_new(calls, json_pack("{s:s,s:s,s:s}", "id",
							       json_is_string(id) ? json_string_value(id) : idb,
							       "name", name, "args", as ? as : "{}"));
			free(as);
		}
		out->calls = json_dumps(calls, JSON_COMPACT);
		json_decref(calls);
		if (!out->calls)
			goto oom;
		/* a reply that is only tool calls has a null content */
		if (!json_is_string(v)) {
			if (!(out->text = strdup("")))
				goto oom;
			out->len = 0;
			out->stop = "eos";
			goto tokens;
		}
	}
	if (!json_is_string(v)) {
		snprintf(err, errlen, "%s: the answer is not a completion: %s", url,
			 quote(q, resp.p, resp.n, 120));
		goto out;
	}
	out->len = json_string_length(v);
	if (!(out->text = malloc(out->len + 1)))
		goto oom;
	memcpy(out->text, json_string_value(v), out->len + 1);
	out->stop = json_is_string(json_object_get(ch, "finish_reason")) &&
			    !strcmp(json_string_value(json_object_get(ch, "finish_reason")), "stop")
		    ? "eos" : "max-tokens";
	if (out->calls)
		out->stop = "eos";
tokens:;
	json_t *ids = json_object_get(ch, "token_ids"), *lps = json_object_get(ch,
										  "token_logprobs_all");
	json_t *content = NULL;
	if (!json_is_array(lps) && chat)
		content = json_object_get(json_object_get(ch, "logprobs"), "content");
	else if (!json_is_array(lps))
		lps = json_object_get(json_object_get(ch, "logprobs"), "token_logprobs");
	size_t n = json_is_array(ids) ? json_array_size(ids)
		   : content ? json_array_size(content) : json_array_size(lps);
	if (n) {
		out->tokens = calloc(n, sizeof *out->tokens);
		out->logprobs = calloc(n, sizeof *out->logprobs);
		if (!out->tokens || !out->logprobs)
			goto oom;
		for (size_t i = 0; i < n; i++) {
			out->tokens[i] = (int32_t)json_integer_value(json_array_get(ids, i));
			out->logprobs[i] = (float)json_number_value(
				content ? json_object_get(json_array_get(content, i), "logprob")
					: json_array_get(lps, i));
		}
		out->n = (int)n;
	}
	/* without ids only the log-probs are known */
	if (!json_is_array(ids)) {
		free(out->tokens);
		out->tokens = NULL;
	}
	rc = 0;
	goto out;
oom:
	snprintf(err, errlen, "out of memory");
out:
	if (rc)
		fw_completion_release(out);
	json_decref(rq);
	json_decref(doc);
	free(body);
	fw_buf_free(&resp);
	return rc;
}

void fw_http_set_context(struct fw_http *h, long n)
{
	h->ctx = n > 0 ? n : -1;
}

/* POSTs rq (not consumed) to url, or GETs url when rq is NULL, and parses
 * a 200 answer.  Returns the document (json_decref) or NULL on any failure:
 * what this reads is an aid, and its absence is not an error. */
static json_t *ask(struct fw_http *h, const char *url, json_t *rq)
{
	struct fw_buf resp = { 0 };
	char *body = rq ? json_dumps(rq, JSON_COMPACT) : NULL, err[256];
	long status = 0;
	json_t *doc = NULL;
	json_error_t je;

	if ((!rq || body) && post(h, url, body, &resp, &status, err, sizeof err) == 0 &&
	    status == 200)
		doc = json_loadb(resp.p ? (const char *)resp.p : "", resp.n, 0, &je);
	if (status == 404 || status == 405)
		h->no_tokenize |= url == h->tokenize_url;
	free(body);
	fw_buf_free(&resp);
	return doc;
}

/* The server's context in tokens: max_model_len of the model's entry in
 * BASE/models (the first entry when no model is named), as vLLM and
 * serve(1) report it; asked once.  -1 when the server does not say. */
static long context(struct fw_http *h)
{
	if (h->ctx)
		return h->ctx;
	h->ctx = -1;
	json_t *doc = ask(h, h->models_url, NULL), *m;
	size_t i;
	json_array_foreach(json_object_get(doc, "data"), i, m) {
		const char *id = json_string_value(json_object_get(m, "id"));
		json_t *w = json_object_get(m, "max_model_len");
		if (h->model && (!id || strcmp(id, h->model)))
			continue;
		if (json_is_integer(w) && json_integer_value(w) > 0)
			h->ctx = (long)json_integer_value(w);
		break;
	}
	json_decref(doc);
	return h->ctx;
}

/* The ids the server makes of rq's "prompt" or "messages" (its /tokenize,
 * with add_special_tokens as given for a prompt), in a new array that *ids
 * takes (json_decref).  Returns the count, or -1 when the server does not
 * tell. */
static long count(struct fw_http *h, json_t *rq, int special, json_t **ids)
{
	json_t *doc, *t;
	long n = -1;

	*ids = NULL;
	if (h->no_tokenize)
		return -1;
	json_t *q = json_deep_copy(rq);
	if (!q)
		return -1;
	if (h->model)
		json_object_set_new(q, "model", json_string(h->model));
	if (json_object_get(q, "prompt"))
		json_object_set_new(q, "add_special_tokens", json_boolean(special));
	doc = ask(h, h->tokenize_url, q);
	json_decref(q);
	t = json_object_get(doc, "tokens");
	if (json_is_array(t)) {
		n = (long)json_array_size(t);
		*ids = json_incref(t);
	}
	json_decref(doc);
	return n;
}

/*
 * Fits a completions prompt to the server's context W the way the builtin
 * policy fits its own (fw_builtin_complete): *max_tokens at most W / 2,
 * and a prompt too long keeps its last tokens after the BOS, sent as ids.
 * rq holds "prompt" as text and is changed in place.  Does nothing when
 * the server tells neither its context nor a prompt's tokens.
 */
static void fit_prompt(struct fw_http *h, json_t *rq, int *max_tokens)
{
	long W = context(h);
	json_t *with = NULL, *bare = NULL, *ids;

	if (W <= 0)
		return;
	if (*max_tokens > W / 2)
		*max_tokens = (int)(W / 2);
	long n = count(h, rq, 1, &with);
	if (n < 0 || n + *max_tokens <= W)
		goto out;
	long nb = count(h, rq, 0, &bare);
	if (nb < 0)
		goto out;
	int bos = n == nb + 1; /* the server puts a BOS first */
	long room = W - *max_tokens - bos;
	if (room < 0)
		room = 0;
	if (!(ids = json_array()))
		goto out;
	if (bos)
		json_array_append(ids, json_array_get(with, 0));
	for (long i = nb > room ? nb - room : 0; i < nb; i++)
		json_array_append(ids, json_array_get(bare, (size_t)i));
	json_object_set_new(rq, "prompt", ids);
out:
	json_decref(with);
	json_decref(bare);
}

int fw_http_complete(struct fw_http *h, const char *prompt, size_t len, uint64_t seed,
		     const struct fw_sampler *s, int max_tokens, struct fw_completion *out,
		     char *err, size_t errlen)
{
	json_t *rq = json_pack("{s:s%}", "prompt", prompt, len);

	if (!rq) {
		memset(out, 0, sizeof *out);
		snprintf(err, errlen, "prompt is not valid UTF-8");
		return -1;
	}
	fit_prompt(h, rq, &max_tokens);
	return request(h, 0, rq, s, seed, max_tokens, out, err, errlen);
}

int fw_http_chat(struct fw_http *h, const char *const *roles, const char *const *texts,
		 const size_t *lens, size_t n, uint64_t seed, const struct fw_sampler *s,
		 int max_tokens, struct fw_completion *out, char *err, size_t errlen)
{
	json_t *msgs = json_array();

	for (size_t i = 0; msgs && i < n; i++) {
		json_t *m = json_pack("{s:s,s:s%}", "role", roles[i], "content", texts[i], lens[i]);
		if (!m || json_array_append_new(msgs, m)) {
			json_decref(msgs);
			msgs = NULL;
		}
	}
	if (!msgs) {
		memset(out, 0, sizeof *out);
		snprintf(err, errlen, "a message is not valid UTF-8");
		return -1;
	}
	return fw_http_chat_msgs(h, msgs, NULL, seed, s, max_tokens, out, err, errlen);
}

int fw_http_chat_msgs(struct fw_http *h, void *msgs, const char *tools_json, uint64_t seed,
		      const struct fw_sampler *s, int max_tokens, struct fw_completion *out,
		      char *err, size_t errlen)
{
	json_t *rq = json_pack("{s:o}", "messages", (json_t *)msgs), *ids;
	if (rq && tools_json) {
		json_error_t je;
		json_t *tools = json_loads(tools_json, 0, &je);
		if (!json_is_array(tools)) {
			json_decref(tools);
			json_decref(rq);
			memset(out, 0, sizeof *out);
			snprintf(err, errlen, "the tools are not a JSON array: %s", je.text);
			return -1;
		}
		json_object_set_new(rq, "tools", tools);
	}
	long W = context(h), P = W > 0 && rq ? count(h, rq, 1, &ids) : -1;
	if (P >= 0) {
		json_decref(ids);
		/* what the builtin agent does: a chat that fills the context
		 * ends the episode, and a reply gets what is left */
		if (P >= W) {
			json_decref(rq);
			memset(out, 0, sizeof *out);
			snprintf(err, errlen, "the chat's %ld tokens fill the server's context of %ld",
				 P, W);
			return -1;
		}
		if (max_tokens > W - P)
			max_tokens = (int)(W - P);
	}
	return request(h, 1, rq, s, seed, max_tokens, out, err, errlen);
}
