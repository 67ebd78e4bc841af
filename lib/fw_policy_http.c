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

#include "fw_mp.h"
#include "fw_policy.h"

struct fw_http {
	CURL *c;
	char *url, *model, *auth;
	double timeout_s;
	int retries;
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
	if (asprintf(&h->url, "%.*s/completions", (int)bl, base) < 0 ||
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
	free(h->model);
	free(h->auth);
	free(h);
}

static void nap(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (time_t)s) * 1e9) };

	nanosleep(&ts, NULL);
}

/* POSTs body; fills *resp and *status.  Returns 0, or -1 with err after the
 * retries are spent. */
static int post(struct fw_http *h, const char *body, struct fw_buf *resp, long *status,
		char *err, size_t errlen)
{
	struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
	double wait = 0.25;
	int rc = -1;

	if (h->auth)
		hd = curl_slist_append(hd, h->auth);
	for (int attempt = 0;; attempt++) {
		CURLcode cc;

		fw_buf_reset(resp);
		curl_easy_reset(h->c);
		curl_easy_setopt(h->c, CURLOPT_URL, h->url);
		curl_easy_setopt(h->c, CURLOPT_HTTPHEADER, hd);
		curl_easy_setopt(h->c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(h->c, CURLOPT_WRITEFUNCTION, on_body);
		curl_easy_setopt(h->c, CURLOPT_WRITEDATA, resp);
		curl_easy_setopt(h->c, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(h->c, CURLOPT_TIMEOUT_MS, (long)(h->timeout_s * 1000));
		curl_easy_setopt(h->c, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
		cc = curl_easy_perform(h->c);
		*status = 0;
		if (cc == CURLE_OK)
			curl_easy_getinfo(h->c, CURLINFO_RESPONSE_CODE, status);
		int again = cc != CURLE_OK || *status == 429 || *status >= 500;
		if (!again) {
			rc = 0;
			break;
		}
		if (attempt >= h->retries) {
			if (cc != CURLE_OK)
				snprintf(err, errlen, "%s: %s", h->url, curl_easy_strerror(cc));
			else
				snprintf(err, errlen, "%s: HTTP %ld: %.200s", h->url, *status,
					 resp->p ? (const char *)resp->p : "");
			break;
		}
		nap(wait);
		wait *= 2;
	}
	curl_slist_free_all(hd);
	return rc;
}

int fw_http_complete(struct fw_http *h, const char *prompt, size_t len, uint64_t seed,
		     const struct fw_sampler *s, int max_tokens, struct fw_completion *out,
		     char *err, size_t errlen)
{
	json_t *rq = json_pack("{s:s%,s:i,s:f,s:f,s:I,s:i}", "prompt", prompt, len, "max_tokens",
			       max_tokens, "temperature", (double)s->temp, "top_p",
			       (double)s->top_p, "seed", (json_int_t)seed,
			       "logprobs", 1);
	struct fw_buf resp = { 0 };
	char *body = NULL;
	long status;
	json_t *doc = NULL, *ch, *v;
	int rc = -1;

	memset(out, 0, sizeof *out);
	out->keep = -1;
	if (!rq) {
		snprintf(err, errlen, "prompt is not valid UTF-8");
		return -1;
	}
	if (s->top_k > 0)
		json_object_set_new(rq, "top_k", json_integer(s->top_k));
	if (h->model)
		json_object_set_new(rq, "model", json_string(h->model));
	if (!(body = json_dumps(rq, JSON_COMPACT))) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if (post(h, body, &resp, &status, err, errlen))
		goto out;
	json_error_t je;
	doc = json_loadb(resp.p ? (const char *)resp.p : "", resp.n, JSON_ALLOW_NUL, &je);
	if (status != 200) {
		const char *m = json_string_value(json_object_get(json_object_get(doc, "error"),
								  "message"));
		snprintf(err, errlen, "%s: HTTP %ld: %.200s", h->url, status,
			 m ? m : resp.p ? (const char *)resp.p : "");
		goto out;
	}
	ch = json_array_get(json_object_get(doc, "choices"), 0);
	if (!json_is_string(v = json_object_get(ch, "text"))) {
		snprintf(err, errlen, "%s: the answer is not a completion: %.120s", h->url,
			 resp.p ? (const char *)resp.p : "");
		goto out;
	}
	out->len = json_string_length(v);
	if (!(out->text = malloc(out->len + 1)))
		goto oom;
	memcpy(out->text, json_string_value(v), out->len + 1);
	out->stop = json_is_string(json_object_get(ch, "finish_reason")) &&
			    !strcmp(json_string_value(json_object_get(ch, "finish_reason")), "stop")
		    ? "eos" : "max-tokens";
	json_t *ids = json_object_get(ch, "token_ids"), *lps = json_object_get(ch,
										  "token_logprobs_all");
	if (!json_is_array(lps))
		lps = json_object_get(json_object_get(ch, "logprobs"), "token_logprobs");
	size_t n = json_is_array(ids) ? json_array_size(ids) : json_array_size(lps);
	if (n) {
		out->tokens = calloc(n, sizeof *out->tokens);
		out->logprobs = calloc(n, sizeof *out->logprobs);
		if (!out->tokens || !out->logprobs)
			goto oom;
		for (size_t i = 0; i < n; i++) {
			out->tokens[i] = (int32_t)json_integer_value(json_array_get(ids, i));
			out->logprobs[i] = (float)json_number_value(json_array_get(lps, i));
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
		fw_completion_clear(out);
	json_decref(rq);
	json_decref(doc);
	free(body);
	fw_buf_free(&resp);
	return rc;
}
