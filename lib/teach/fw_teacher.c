/*
 * fw_teacher.c — teachers (a builtin checkpoint or an OpenAI-compatible
 * server) that score sequences and complete a prompt with one line of text.
 * What to ask them and what a hint is belongs to teach (fw_teach_hint.c).
 * See fw_teach.h.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <jansson.h>

#include "fw_base.h"
#include "fw_policy.h"
#include "fw_rollout.h"
#include "fw_teach.h"

struct fw_teacher {
	struct fw_builtin *b;   /* builtin, or NULL */
	struct fw_kvscore *ks;  /* builtin: its scorer, made on first use */
	struct fw_http *h;      /* http: completions (hints) */
	CURL *c;                /* http: scoring requests */
	char *url, *model;      /* http: BASE/completions, the model or NULL */
	double timeout_s;
	int retries;
};

struct fw_teacher *fw_teacher_open(const char *spec, double timeout_s, int retries, char *err,
				   size_t errlen)
{
	struct fw_teacher *T = calloc(1, sizeof *T);

	if (!T) {
		fw_seterr(err, errlen, "out of memory");
		return NULL;
	}
	if (!strncmp(spec, "builtin:", 8) && spec[8]) {
		if (!(T->b = fw_builtin_load(spec + 8, err, errlen))) {
			free(T);
			return NULL;
		}
		return T;
	}
	if (strncmp(spec, "http:", 5) || !spec[5]) {
		fw_seterr(err, errlen, "want builtin:DIR or http:URL, not '%s'", spec);
		free(T);
		return NULL;
	}
	const char *base = spec + 5, *hash = strchr(base, '#');
	size_t bl = hash ? (size_t)(hash - base) : strlen(base);
	char *b = NULL;

	while (bl && base[bl - 1] == '/')
		bl--;
	T->timeout_s = timeout_s;
	T->retries = retries;
	if (!(b = strndup(base, bl)) || (hash && hash[1] && !(T->model = strdup(hash + 1))) ||
	    asprintf(&T->url, "%s/completions", b) < 0) {
		T->url = NULL;
		free(b);
		fw_seterr(err, errlen, "out of memory");
		fw_teacher_free(T);
		return NULL;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	if (!(T->c = curl_easy_init()) ||
	    !(T->h = fw_http_new(b, T->model, NULL, timeout_s, retries, err, errlen))) {
		if (!T->c)
			fw_seterr(err, errlen, "cannot start libcurl");
		free(b);
		fw_teacher_free(T);
		return NULL;
	}
	free(b);
	return T;
}

void fw_teacher_free(struct fw_teacher *T)
{
	if (!T)
		return;
	fw_kvscore_free(T->ks);
	fw_builtin_free(T->b);
	fw_http_free(T->h);
	if (T->c)
		curl_easy_cleanup(T->c);
	free(T->url);
	free(T->model);
	free(T);
}

const struct fw_tok *fw_teacher_tok(const struct fw_teacher *T)
{
	return T->b ? T->b->t : NULL;
}

int fw_teacher_max_pos(const struct fw_teacher *T)
{
	return T->b ? T->b->m->cfg.max_pos : 0;
}

/* ---- prefix-shared scoring ------------------------------------------------- */

/* The positions one scoring pass runs (fw_gen_new_rows): large enough for
 * good matrix shapes and few kernel calls, small enough that the row
 * buffers stay a fraction of the cache. */
enum { ROWS = 256 };

struct fw_kvscore {
	struct fw_model *m;
	struct fw_gen *g;   /* one sequence of maxT positions, or NULL */
	int maxT;
	int32_t *pre;       /* the prefix whose cache g holds (npre ids) */
	long npre, cap;
	int32_t *tgt;       /* targets of the part after the prefix */
	long tcap;
};

struct fw_kvscore *fw_kvscore_new(struct fw_model *m, char *err, size_t errlen)
{
	struct fw_kvscore *s = calloc(1, sizeof *s);

	if (!s) {
		fw_seterr(err, errlen, "out of memory");
		return NULL;
	}
	s->m = m;
	return s;
}

void fw_kvscore_free(struct fw_kvscore *s)
{
	if (!s)
		return;
	fw_gen_free(s->g);
	free(s->pre);
	free(s->tgt);
	free(s);
}

/* Grows a to hold n ids.  0, or -1 when out of memory. */
static int grow_ids(int32_t **a, long *cap, long n)
{
	int32_t *p;

	if (n <= *cap)
		return 0;
	if (!(p = realloc(*a, sizeof(int32_t) * (size_t)n)))
		return -1;
	*a = p;
	*cap = n;
	return 0;
}

int fw_kvscore_run(struct fw_kvscore *s, const int32_t *seq, long N, long P, float *logp,
		   char *err, size_t errlen)
{
	return fw_kvscore_run_topk(s, seq, N, P, logp, 0, NULL, NULL, err, errlen);
}

int fw_kvscore_run_topk(struct fw_kvscore *s, const int32_t *seq, long N, long P, float *logp,
			int K, int32_t *tk_ids, float *tk_lp, char *err, size_t errlen)
{
	int max_pos = s->m->cfg.max_pos;
	long keep = 0;

	if (N < 2 || N > max_pos || P < 0 || P >= N) {
		fw_seterr(err, errlen, "cannot score %ld tokens from %ld (the model takes %d)", N, P,
		       max_pos);
		return -1;
	}
	if (!s->g || s->maxT < N) {
		/* room for this sequence and some growth: a cache of
		 * max_position_embeddings can be far larger than rollouts */
		long want = (N + 1023) / 1024 * 1024;

		if (want < 2L * s->maxT)
			want = 2L * s->maxT;
		if (want > max_pos)
			want = max_pos;
		fw_gen_free(s->g);
		s->npre = 0;
		s->maxT = 0;
		if (!(s->g = fw_gen_new_rows(s->m, 1, (int)want, ROWS, err, errlen)))
			return -1;
		s->maxT = (int)want;
	}
	/* What of the cached prefix serves: all of it when it is this very
	 * prefix; else its common start, down to a multiple of ROWS, where
	 * its passes end as a fresh run's would. */
	while (keep < P && keep < s->npre && s->pre[keep] == seq[keep])
		keep++;
	if (!(keep == P && s->npre == P))
		keep = keep / ROWS * ROWS;
	if (grow_ids(&s->pre, &s->cap, P) || grow_ids(&s->tgt, &s->tcap, N - P)) {
		fw_seterr(err, errlen, "out of memory");
		return -1;
	}
	s->npre = 0;
	if (fw_gen_truncate(s->g, 0, (int)keep, err, errlen) ||
	    (P > keep && fw_gen_score(s->g, 0, seq + keep, NULL, (int)(P - keep), NULL, err,
				      errlen)))
		return -1;
	if (P)
		memcpy(s->pre, seq, sizeof(int32_t) * (size_t)P);
	s->npre = P;
	for (long i = P; i < N; i++)
		s->tgt[i - P] = i + 1 < N ? seq[i + 1] : -1;
	memset(logp, 0, sizeof(float) * (size_t)P);
	return fw_gen_score_topk(s->g, 0, seq + P, s->tgt, (int)(N - P), logp + P, K,
				 K > 0 ? tk_ids + P * K : NULL, K > 0 ? tk_lp + P * K : NULL, err,
				 errlen);
}

/* The builtin's scoring: through its kvscore, made on first use. */
static int score_builtin(struct fw_teacher *T, const int32_t *seq, long N, long P, float *logp,
			 int K, int32_t *tk_ids, float *tk_lp, char *err, size_t errlen)
{
	if (!T->ks && !(T->ks = fw_kvscore_new(T->b->m, err, errlen)))
		return -1;
	return fw_kvscore_run_topk(T->ks, seq, N, P, logp, K, tk_ids, tk_lp, err, errlen);
}

static size_t on_body(char *p, size_t sz, size_t n, void *ctx)
{
	return fw_buf_append(ctx, p, sz * n) ? 0 : sz * n;
}

static void nap(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (time_t)s) * 1e9) };

	nanosleep(&ts, NULL);
}

/* POSTs body to T->url; *resp gets the answer, *status its HTTP status.
 * Unreachable servers, 429 and 5xx are retried.  0, or -1 with err. */
static int post(struct fw_teacher *T, const char *body, struct fw_buf *resp, long *status,
		char *err, size_t errlen)
{
	struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
	double wait = 0.25;
	int rc = -1;

	for (int attempt = 0;; attempt++) {
		CURLcode cc;

		fw_buf_reset(resp);
		curl_easy_reset(T->c);
		curl_easy_setopt(T->c, CURLOPT_URL, T->url);
		curl_easy_setopt(T->c, CURLOPT_HTTPHEADER, hd);
		curl_easy_setopt(T->c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(T->c, CURLOPT_WRITEFUNCTION, on_body);
		curl_easy_setopt(T->c, CURLOPT_WRITEDATA, resp);
		curl_easy_setopt(T->c, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(T->c, CURLOPT_TIMEOUT_MS, (long)(T->timeout_s * 1000));
		curl_easy_setopt(T->c, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
		cc = curl_easy_perform(T->c);
		*status = 0;
		if (cc == CURLE_OK)
			curl_easy_getinfo(T->c, CURLINFO_RESPONSE_CODE, status);
		if (cc == CURLE_OK && *status != 429 && *status < 500) {
			rc = 0;
			break;
		}
		if (attempt >= T->retries) {
			if (cc != CURLE_OK)
				fw_seterr(err, errlen, "%s: %s", T->url, curl_easy_strerror(cc));
			else
				fw_seterr(err, errlen, "%s: HTTP %ld: %.*s", T->url, *status,
				       (int)(resp->n < 200 ? resp->n : 200),
				       resp->p ? (const char *)resp->p : "");
			break;
		}
		nap(wait);
		wait *= 2;
	}
	curl_slist_free_all(hd);
	return rc;
}

int fw_teacher_parse_scores(const char *body, size_t len, const int32_t *seq, long N,
			    float *logp, char *err, size_t errlen)
{
	json_error_t je;
	json_t *doc = json_loadb(body, len, 0, &je), *ch, *lps, *ids;
	int rc = -1;

	if (!doc) {
		fw_seterr(err, errlen, "the answer is not JSON: %s", je.text);
		return -1;
	}
	ch = json_array_get(json_object_get(doc, "choices"), 0);
	if ((lps = json_object_get(ch, "prompt_logprobs")) && json_is_array(lps)) {
		/* vLLM: one {id: {logprob, rank, decoded_token}} per prompt token */
		if ((long)json_array_size(lps) != N) {
			fw_seterr(err, errlen, "the answer scores %zu tokens, not %ld",
			       json_array_size(lps), N);
			goto out;
		}
		for (long i = 1; i < N; i++) {
			char key[16];
			json_t *e;

			snprintf(key, sizeof key, "%d", (int)seq[i]);
			e = json_object_get(json_object_get(json_array_get(lps, (size_t)i), key),
					    "logprob");
			if (!json_is_number(e)) {
				fw_seterr(err, errlen, "prompt_logprobs[%ld] has no log-prob of id %d", i,
				       (int)seq[i]);
				goto out;
			}
			logp[i - 1] = (float)json_number_value(e);
		}
	} else {
		lps = json_object_get(json_object_get(ch, "logprobs"), "token_logprobs");
		if (!json_is_array(lps)) {
			fw_seterr(err, errlen, "the answer has no prompt log-probs: %.*s",
			       (int)(len < 120 ? len : 120), body);
			goto out;
		}
		if ((long)json_array_size(lps) != N) {
			fw_seterr(err, errlen, "the answer scores %zu tokens, not %ld",
			       json_array_size(lps), N);
			goto out;
		}
		/* a server that says which ids it scored must have scored ours */
		if ((ids = json_object_get(ch, "token_ids")) && json_is_array(ids)) {
			if ((long)json_array_size(ids) != N)
				goto mismatch;
			for (long i = 0; i < N; i++)
				if (json_integer_value(json_array_get(ids, (size_t)i)) != seq[i])
					goto mismatch;
		}
		for (long i = 1; i < N; i++) {
			json_t *e = json_array_get(lps, (size_t)i);

			if (!json_is_number(e)) {
				fw_seterr(err, errlen, "token_logprobs[%ld] is not a number", i);
				goto out;
			}
			logp[i - 1] = (float)json_number_value(e);
		}
	}
	logp[N - 1] = 0;
	rc = 0;
	goto out;
mismatch:
	fw_seterr(err, errlen, "the answer scores other ids than those sent");
out:
	json_decref(doc);
	return rc;
}

static int score_http(struct fw_teacher *T, const int32_t *seq, long N, float *logp, char *err,
		      size_t errlen)
{
	json_t *rq = json_object(), *p = json_array();
	struct fw_buf resp = { 0 };
	char *body = NULL;
	long status;
	int rc = -1;

	if (!rq || !p)
		goto oom;
	for (long i = 0; i < N; i++)
		if (json_array_append_new(p, json_integer(seq[i])))
			goto oom;
	json_object_set_new(rq, "prompt", p);
	p = NULL;
	json_object_set_new(rq, "max_tokens", json_integer(0));
	json_object_set_new(rq, "echo", json_true());
	json_object_set_new(rq, "logprobs", json_integer(1));
	json_object_set_new(rq, "prompt_logprobs", json_integer(1));
	json_object_set_new(rq, "temperature", json_integer(0));
	if (T->model)
		json_object_set_new(rq, "model", json_string(T->model));
	if (!(body = json_dumps(rq, JSON_COMPACT)))
		goto oom;
	if (post(T, body, &resp, &status, err, errlen))
		goto out;
	/* the answer as a string */
	if (fw_buf_append(&resp, "", 1))
		goto oom;
	resp.n--;
	if (status != 200) {
		json_error_t je;
		json_t *doc = json_loadb(resp.p ? (const char *)resp.p : "", resp.n, 0, &je);
		const char *m = json_string_value(json_object_get(json_object_get(doc, "error"),
								  "message"));

		fw_seterr(err, errlen, "%s: HTTP %ld: %.200s", T->url, status,
		       m ? m : resp.p ? (const char *)resp.p : "");
		json_decref(doc);
		goto out;
	}
	if (fw_teacher_parse_scores(resp.p ? (const char *)resp.p : "", resp.n, seq, N, logp, err,
				    errlen)) {
		char why[400];

		snprintf(why, sizeof why, "%s", err);
		fw_seterr(err, errlen, "%s: %s", T->url, why);
		goto out;
	}
	rc = 0;
	goto out;
oom:
	fw_seterr(err, errlen, "out of memory");
out:
	json_decref(p);
	json_decref(rq);
	free(body);
	fw_buf_free(&resp);
	return rc;
}

int fw_teacher_score_from(struct fw_teacher *T, const int32_t *seq, long N, long P,
			  float *logp, char *err, size_t errlen)
{
	if (N < 2) {
		fw_seterr(err, errlen, "nothing to score");
		return -1;
	}
	if (P < 0 || P >= N) {
		fw_seterr(err, errlen, "a prefix of %ld tokens in %ld", P, N);
		return -1;
	}
	if (T->b)
		return score_builtin(T, seq, N, P, logp, 0, NULL, NULL, err, errlen);
	if (score_http(T, seq, N, logp, err, errlen))
		return -1;
	memset(logp, 0, sizeof(float) * (size_t)P);
	return 0;
}

int fw_teacher_score_topk(struct fw_teacher *T, const int32_t *seq, long N, long P,
			  float *logp, int K, int32_t *tk_ids, float *tk_lp, char *err,
			  size_t errlen)
{
	if (!T->b) {
		fw_seterr(err, errlen, "top-k credit needs a builtin teacher");
		return -1;
	}
	if (N < 2 || P < 0 || P >= N) {
		fw_seterr(err, errlen, "cannot score %ld tokens from %ld", N, P);
		return -1;
	}
	return score_builtin(T, seq, N, P, logp, K, tk_ids, tk_lp, err, errlen);
}

int fw_teacher_score(struct fw_teacher *T, const int32_t *seq, long N, float *logp, char *err,
		     size_t errlen)
{
	return fw_teacher_score_from(T, seq, N, 0, logp, err, errlen);
}

/* Where a hint's line ends: the first newline after a non-blank byte. */
static long hint_end(const char *s, size_t n)
{
	size_t i = 0;

	while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
		i++;
	for (; i < n; i++)
		if (s[i] == '\n')
			return (long)i;
	return -1;
}

static long cut_line(void *ctx, const char *text, size_t n)
{
	(void)ctx;
	return hint_end(text, n);
}

int fw_teacher_hint(struct fw_teacher *T, const char *prompt, size_t len, uint64_t seed,
		    float temp, int max_tokens, size_t max_bytes, char **hint, char *err,
		    size_t errlen)
{
	struct fw_sampler s = { temp, 1, 0 };
	struct fw_completion c = { 0 };
	size_t n, b = 0, fl;
	long e;
	int rc;

	*hint = NULL;
	if (!seed)
		seed = 1;
	rc = T->b ? fw_builtin_complete(T->b, prompt, len, 1, &seed, &s, max_tokens, cut_line,
					NULL, NULL, &c, err, errlen)
		  : fw_http_complete(T->h, prompt, len, seed, &s, max_tokens, &c, err, errlen);
	if (rc)
		return -1;
	n = c.len;
	if ((e = hint_end(c.text, n)) >= 0)
		n = (size_t)e;
	while (b < n && (c.text[b] == ' ' || c.text[b] == '\t' || c.text[b] == '\n' ||
			 c.text[b] == '\r'))
		b++;
	while (n > b && (c.text[n - 1] == ' ' || c.text[n - 1] == '\t' || c.text[n - 1] == '\r'))
		n--;
	if (max_bytes && n - b > max_bytes) {
		n = b + max_bytes;
		while (n > b && ((unsigned char)c.text[n] & 0xc0) == 0x80)
			n--;
	}
	if (n == b) {
		fw_seterr(err, errlen, "the teacher wrote an empty hint");
		fw_completion_release(&c);
		return -1;
	}
	*hint = fw_utf8_fix(c.text + b, n - b, &fl);
	fw_completion_release(&c);
	if (!*hint) {
		fw_seterr(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}
