/*
 * fw_serve_req.c — a request's fields into a job: the fields each endpoint
 * reads (any other refused by name), sampling, stop strings and ids,
 * log-probs, tools and tool_choice, the prompt (chat messages rendered with
 * the model's template, content parts joined, or a prompt as text or ids)
 * and the context it must fit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_model.h"
#include "fw_rollout.h"
#include "fw_serve_int.h"
#include "fw_tok.h"
#include "fw_toolcall.h"

/* Fields each endpoint reads; any other is refused by name. */
static const char *const completion_fields[] = {
	"model", "prompt", "max_tokens", "max_completion_tokens", "temperature", "top_p",
	"top_k", "n", "seed", "stop", "stop_token_ids", "stream", "stream_options", "logprobs",
	"echo", "user", "prompt_logprobs", "frequency_penalty", "presence_penalty", "logit_bias",
	"best_of", "suffix", "ignore_eos", NULL
};
static const char *const chat_fields[] = {
	"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p",
	"top_k", "n", "seed", "stop", "stop_token_ids", "stream", "stream_options", "logprobs",
	"top_logprobs", "user", "frequency_penalty", "presence_penalty", "logit_bias", "tools",
	"tool_choice", "parallel_tool_calls", "response_format", "store", "ignore_eos", NULL
};

/* A request field serve does not act on, or acts on only at its neutral
 * value; msg says which (buf holds it).  Returns 0 when rq can be served
 * as asked, else -1 with *field the name at fault. */
int serve_unsupported(json_t *rq, int chat, const char **field, char *buf, size_t len)
{
	const char *const *known = chat ? chat_fields : completion_fields;
	const char *k;
	json_t *v;

	json_object_foreach(rq, k, v) {
		int i = 0;
		while (known[i] && strcmp(known[i], k))
			i++;
		if (!known[i]) {
			snprintf(buf, len, "'%s' is not supported", k);
			return *field = k, -1;
		}
		if (json_is_null(v))
			continue;
		int neutral = 1;
		if (!strcmp(k, "frequency_penalty") || !strcmp(k, "presence_penalty"))
			neutral = json_is_number(v) && json_number_value(v) == 0;
		else if (!strcmp(k, "logit_bias"))
			neutral = json_is_object(v) && json_object_size(v) == 0;
		else if (!strcmp(k, "best_of"))
			neutral = json_is_integer(v) && json_integer_value(v) == 1;
		else if (!strcmp(k, "suffix"))
			neutral = json_is_string(v) && json_string_length(v) == 0;
		else if (!strcmp(k, "store"))
			neutral = json_is_false(v);
		else if (!strcmp(k, "response_format"))
			neutral = json_is_object(v) &&
				  json_is_string(json_object_get(v, "type")) &&
				  !strcmp(json_string_value(json_object_get(v, "type")), "text");
		if (!neutral) {
			snprintf(buf, len, "'%s' is not supported (only its default)", k);
			return *field = k, -1;
		}
	}
	return 0;
}

/* The sampling fields of a request; -1 with msg on a bad value.  *given
 * (may be NULL) is set when the request names max_tokens, *seeded when it
 * names a seed. */
static int sampling(json_t *rq, struct fw_sampler *s, int *max_tokens, uint64_t *seed, int *n,
		    int *given, int *seeded, const char **msg)
{
	json_t *v;

	if (given)
		*given = 0;
	*seeded = 0;
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
		/* vLLM's -1 is no truncation, as 0 is */
		if (!json_is_integer(v) || json_integer_value(v) < -1)
			return *msg = "'top_k' must be an integer >= -1", -1;
		s->top_k = json_integer_value(v) < 0 ? 0 : (int)json_integer_value(v);
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
		*seeded = 1;
	}
	if ((v = json_object_get(rq, "n")) && !json_is_null(v)) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 64)
			return *msg = "'n' must be an integer in 1..64", -1;
		*n = (int)json_integer_value(v);
	}
	return 0;
}

/*
 * Checks that a prompt of P tokens and the completion asked for fit the
 * model's context (max_position_embeddings, W), as vLLM does: a prompt that
 * leaves no room (P > W, or P = W with tokens to generate) and a max_tokens
 * beyond W - P are refused with HTTP 400 and vLLM's words; a request that
 * names no max_tokens gets 16, or W - P when less.  The count to decode is
 * written back into rq.  Returns 0, or -1 with the refusal in r.
 */
int serve_fit(struct arm *a, json_t *rq, size_t P, struct fw_serve_reply *r)
{
	struct fw_sampler s;
	int M, n, given, seeded;
	uint64_t seed;
	const char *msg;
	long W = a->b->m->cfg.max_pos;
	char buf[512];

	if (sampling(rq, &s, &M, &seed, &n, &given, &seeded, &msg))
		return 0; /* the caller reports it */
	if ((long)P > W || ((long)P == W && M > 0)) {
		snprintf(buf, sizeof buf,
			 "This model's maximum context length is %ld tokens. However, your request "
			 "has %zu input tokens. Please reduce the length of the input messages.",
			 W, P);
		serve_refuse(a->srv, r, buf, NULL);
		return -1;
	}
	if ((long)P + M > W) {
		if (given) {
			snprintf(buf, sizeof buf,
				 "'max_tokens' or 'max_completion_tokens' is too large: %d. This "
				 "model's maximum context length is %ld tokens and your request has "
				 "%zu input tokens (%d > %ld - %zu).",
				 M, W, P, M, W, P);
			serve_refuse(a->srv, r, buf, NULL);
			return -1;
		}
		M = (int)(W - (long)P);
	}
	json_object_del(rq, "max_completion_tokens");
	json_object_set_new(rq, "max_tokens", json_integer(M));
	return 0;
}

/* The text of a message's content: a string, null, or an array of parts
 * of which only {"type": "text"} ones are read.  Returns a buffer (free)
 * with *len, or NULL with msg (buf) saying why. */
static char *content_text(json_t *content, size_t *len, char *buf, size_t blen)
{
	struct fw_buf b = { 0 };
	json_t *p;
	size_t i;

	if (json_is_string(content) || json_is_null(content) || !content) {
		const char *s = json_is_string(content) ? json_string_value(content) : "";
		size_t n = json_is_string(content) ? json_string_length(content) : 0;
		if (fw_buf_append(&b, s, n) || fw_buf_append(&b, "", 1))
			goto oom;
		*len = n;
		return (char *)b.p;
	}
	if (!json_is_array(content)) {
		snprintf(buf, blen, "a message's 'content' must be a string or an array of parts");
		return NULL;
	}
	json_array_foreach(content, i, p) {
		const char *type = json_string_value(json_object_get(p, "type"));
		json_t *t = json_object_get(p, "text");
		if (!type || strcmp(type, "text") || !json_is_string(t)) {
			snprintf(buf, blen, "content parts of type '%s' are not supported (only "
				 "'text')", type ? type : "(none)");
			fw_buf_free(&b);
			return NULL;
		}
		if (fw_buf_append(&b, json_string_value(t), json_string_length(t)))
			goto oom;
	}
	if (fw_buf_append(&b, "", 1))
		goto oom;
	*len = b.n - 1;
	return (char *)b.p;
oom:
	fw_buf_free(&b);
	snprintf(buf, blen, "out of memory");
	return NULL;
}

/* What a chat request asks of tools: TOOLS_NONE (no tools, or
 * tool_choice "none"), _AUTO, _REQUIRED or _NAMED (*name); -1 with msg on
 * a bad value. */
int serve_tool_mode(json_t *rq, const char **name, const char **msg)
{
	json_t *tools = json_object_get(rq, "tools"), *tc = json_object_get(rq, "tool_choice"), *t;
	size_t i;

	*name = NULL;
	if (!tools || json_is_null(tools)) {
		if (tc && !json_is_null(tc) &&
		    !(json_is_string(tc) && !strcmp(json_string_value(tc), "none")))
			return *msg = "'tool_choice' needs 'tools'", -1;
		return TOOLS_NONE;
	}
	if (!json_is_array(tools))
		return *msg = "'tools' must be an array", -1;
	json_array_foreach(tools, i, t) {
		const char *type = json_string_value(json_object_get(t, "type"));
		json_t *f = json_object_get(t, "function");
		if (!type || strcmp(type, "function") || !json_is_object(f) ||
		    !json_is_string(json_object_get(f, "name")))
			return *msg = "each of 'tools' must be {\"type\": \"function\", "
				      "\"function\": {\"name\", ...}}", -1;
	}
	if (!json_array_size(tools))
		return TOOLS_NONE;
	if (!tc || json_is_null(tc))
		return TOOLS_AUTO;
	if (json_is_string(tc)) {
		const char *s = json_string_value(tc);
		if (!strcmp(s, "none"))
			return TOOLS_NONE;
		if (!strcmp(s, "auto"))
			return TOOLS_AUTO;
		if (!strcmp(s, "required"))
			return TOOLS_REQUIRED;
		return *msg = "'tool_choice' must be \"none\", \"auto\", \"required\" or a "
			      "function", -1;
	}
	*name = json_string_value(json_object_get(json_object_get(tc, "function"), "name"));
	if (!*name)
		return *msg = "'tool_choice' must be \"none\", \"auto\", \"required\" or "
			      "{\"type\": \"function\", \"function\": {\"name\"}}", -1;
	json_array_foreach(tools, i, t)
		if (!strcmp(json_string_value(json_object_get(json_object_get(t, "function"),
							      "name")), *name))
			return TOOLS_NAMED;
	return *msg = "'tool_choice' names a function that is not in 'tools'", -1;
}

/*
 * The prompt of a request as token ids: the rendered chat of "messages"
 * (chat; with its tools when mode is not TOOLS_NONE, and the start of a
 * call, *prefix, for a required or named one), or "prompt" as ids or text
 * (a BOS first when the tokenizer has one and special is set).  Returns 0,
 * or -1 with the error in r.
 */
int serve_prompt_ids(struct arm *a, json_t *rq, int chat, int special, int mode,
		     const char *tool, char **prefix, struct fw_tok_ids *ids,
		     struct fw_serve_reply *r)
{
	char err[512];

	if (prefix)
		*prefix = NULL;
	if (chat) {
		json_t *msgs = json_object_get(rq, "messages"), *m;
		size_t i, nm = json_array_size(msgs);
		struct fw_chat_turn *t = calloc(nm ? nm : 1, sizeof *t);
		char **texts = calloc(nm ? nm : 1, sizeof *texts);
		struct fw_chat_call **calls = calloc(nm ? nm : 1, sizeof *calls);
		int tmpl = a->tmpl, rc = -1;
		const char *msg = NULL;
		if (!json_is_array(msgs) || nm == 0 || !t || !texts || !calls) {
			msg = "'messages' must be a non-empty array";
			goto chat_out;
		}
		if (tmpl < 0) {
			msg = "the model's tokenizer has no chat template";
			goto chat_out;
		}
		json_array_foreach(msgs, i, m) {
			json_t *tc = json_object_get(m, "tool_calls"), *c;
			size_t j;
			t[i].role = json_string_value(json_object_get(m, "role"));
			if (!t[i].role) {
				msg = "a message has no 'role'";
				goto chat_out;
			}
			if (!strcmp(t[i].role, "developer"))
				t[i].role = "system";
			if (!(texts[i] = content_text(json_object_get(m, "content"), &t[i].len, err,
						      sizeof err))) {
				msg = err;
				goto chat_out;
			}
			t[i].text = texts[i];
			if (json_array_size(tc)) {
				if (!(calls[i] = calloc(json_array_size(tc), sizeof **calls))) {
					msg = "out of memory";
					goto chat_out;
				}
				json_array_foreach(tc, j, c) {
					json_t *f = json_object_get(c, "function");
					calls[i][j].name = json_string_value(json_object_get(f, "name"));
					calls[i][j].args =
						json_string_value(json_object_get(f, "arguments"));
					if (!calls[i][j].name) {
						msg = "a tool call has no 'function.name'";
						goto chat_out;
					}
				}
				t[i].calls = calls[i];
				t[i].ncalls = json_array_size(tc);
			}
		}
		if (mode == TOOLS_NONE) {
			rc = fw_chat_render(a->b->t, (enum fw_chat_template)tmpl, t, nm, 1, ids, err,
					    sizeof err);
		} else {
			char *tj = json_dumps(json_object_get(rq, "tools"), JSON_COMPACT);
			rc = tj ? fw_tools_render(a->b->t, (enum fw_chat_template)tmpl, tj,
						  strlen(tj), t, nm, ids, err, sizeof err)
				: -1;
			free(tj);
			if (!rc && mode != TOOLS_AUTO) {
				*prefix = fw_toolcall_prefix((enum fw_chat_template)tmpl,
							     mode == TOOLS_NAMED ? tool : NULL);
				if (!*prefix || fw_tok_encode(a->b->t, *prefix, strlen(*prefix), 0,
							      0, ids))
					rc = -1;
			}
		}
		if (rc)
			msg = err;
chat_out:
		for (i = 0; i < nm; i++) {
			if (texts)
				free(texts[i]);
			if (calls)
				free(calls[i]);
		}
		free(texts);
		free(calls);
		free(t);
		if (msg) {
			serve_refuse(a->srv, r, msg, "messages");
			if (prefix) {
				free(*prefix);
				*prefix = NULL;
			}
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
				serve_refuse(a->srv, r, "'prompt' ids must be integers below the "
					     "vocabulary size", "prompt");
				return -1;
			}
			if (fw_tok_ids_push(ids, (int32_t)id, 0))
				goto oom;
		}
	} else if (!json_is_string(p)) {
		serve_refuse(a->srv, r, "'prompt' must be a string or an array of token ids",
			     "prompt");
		return -1;
	}
	if (json_is_string(p) &&
	    ((bos >= 0 && fw_tok_ids_push(ids, bos, 0)) ||
	     fw_tok_encode(a->b->t, json_string_value(p), json_string_length(p), 0, 0, ids)))
		goto oom;
	return 0;
oom:
	serve_fail(a->srv, r, 500, "server_error", "out of memory");
	return -1;
}

/* Builds the job of a request from its fields.  Returns it, or NULL with
 * msg (buf) and *field set. */
struct job *serve_make_job(struct arm *a, json_t *rq, const struct want *w,
			   struct fw_tok_ids *ids, const char **field, char *buf, size_t blen)
{
	struct job *j = calloc(1, sizeof *j);
	uint64_t seed;
	int seeded;
	const char *msg;
	json_t *v, *x;
	size_t i;

	if (!j)
		goto oom;
	pthread_cond_init(&j->cv, NULL);
	j->stream = w->stream;
	if (sampling(rq, &j->s, &j->max_tokens, &seed, &j->n, NULL, &seeded, &msg)) {
		snprintf(buf, blen, "%s", msg);
		goto bad;
	}
	if (j->n > a->S) {
		snprintf(buf, blen, "'n' is %d; this server decodes %d sequences at most", j->n,
			 a->S);
		*field = "n";
		goto bad;
	}
	v = json_object_get(rq, w->chat ? "top_logprobs" : "logprobs");
	if (v && !json_is_null(v) && !(w->chat ? 0 : json_is_boolean(v))) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > MAX_TOP) {
			snprintf(buf, blen, "'%s' must be an integer in 0..%d",
				 w->chat ? "top_logprobs" : "logprobs", MAX_TOP);
			*field = w->chat ? "top_logprobs" : "logprobs";
			goto bad;
		}
		j->ntop = (int)json_integer_value(v);
		if (w->chat && j->ntop && !w->lp) {
			snprintf(buf, blen, "'top_logprobs' needs 'logprobs': true");
			*field = "top_logprobs";
			goto bad;
		}
	}
	v = json_object_get(rq, "stop");
	if (json_is_string(v) || json_is_array(v)) {
		size_t nv = json_is_string(v) ? 1 : json_array_size(v);
		for (i = 0; i < nv; i++) {
			x = json_is_string(v) ? v : json_array_get(v, i);
			if (!json_is_string(x) || !json_string_length(x) || i >= MAX_STOPS) {
				snprintf(buf, blen, "'stop' must be a string or up to %d non-empty "
					 "strings", MAX_STOPS);
				*field = "stop";
				goto bad;
			}
			j->stoplen[j->nstops] = json_string_length(x);
			if (!(j->stops[j->nstops++] = strdup(json_string_value(x))))
				goto oom;
		}
	} else if (v && !json_is_null(v)) {
		snprintf(buf, blen, "'stop' must be a string or an array of strings");
		*field = "stop";
		goto bad;
	}
	v = json_object_get(rq, "ignore_eos");
	if (v && !json_is_null(v) && !json_is_boolean(v)) {
		snprintf(buf, blen, "'ignore_eos' must be a boolean");
		*field = "ignore_eos";
		goto bad;
	}
	j->ignore_eos = json_is_true(v);
	v = json_object_get(rq, "stop_token_ids");
	if (json_is_array(v) && json_array_size(v)) {
		if (!(j->stop_ids = malloc(sizeof(int32_t) * json_array_size(v))))
			goto oom;
		json_array_foreach(v, i, x) {
			if (!json_is_integer(x) || json_integer_value(x) < 0 ||
			    json_integer_value(x) >= a->b->m->cfg.vocab) {
				snprintf(buf, blen, "'stop_token_ids' must be ids below the "
					 "vocabulary size");
				*field = "stop_token_ids";
				goto bad;
			}
			j->stop_ids[j->nstop_ids++] = (int32_t)json_integer_value(x);
		}
	} else if (v && !json_is_null(v) && !json_is_array(v)) {
		snprintf(buf, blen, "'stop_token_ids' must be an array of ids");
		*field = "stop_token_ids";
		goto bad;
	}
	if (w->tools != TOOLS_NONE) {
		j->hold = fw_toolcall_marker((enum fw_chat_template)a->tmpl);
		j->hold_json = !j->hold;
	}
	if (!(j->ch = calloc((size_t)j->n, sizeof *j->ch)) ||
	    !(j->rng = calloc((size_t)j->n, sizeof *j->rng)))
		goto oom;
	if (!seeded)
		seed = serve_fresh(a->srv);
	/* choice k draws from seed k of the request: the first from the
	 * seed itself, so that a client that derives per-sample seeds gets
	 * exactly its stream */
	for (int k = 0; k < j->n; k++) {
		uint64_t sk = k == 0 ? seed : fw_rollout_seed(seed, "", 0, k);
		j->rng[k] = sk ? sk : 1;
	}
	int cap = j->max_tokens > 0 ? j->max_tokens : 1;
	for (int k = 0; k < j->n; k++) {
		struct choice *c = &j->ch[k];
		c->cap = cap;
		if (!(c->tok = malloc(sizeof(int32_t) * (size_t)cap)) ||
		    !(c->lp = malloc(sizeof(float) * (size_t)cap)) ||
		    !(c->tend = malloc(sizeof(size_t) * (size_t)cap)) ||
		    (j->ntop && (!(c->top_id = malloc(sizeof(int32_t) * (size_t)cap * j->ntop)) ||
				 !(c->top_lp = malloc(sizeof(float) * (size_t)cap * j->ntop)))))
			goto oom;
		if (w->prefix && fw_buf_append(&c->text, w->prefix, strlen(w->prefix)))
			goto oom;
		c->len = c->text.n;
	}
	/* the ids move to the job; their mask is not needed */
	j->ids = ids->ids;
	j->nids = ids->n;
	free(ids->mask);
	memset(ids, 0, sizeof *ids);
	return j;
oom:
	snprintf(buf, blen, "out of memory");
	*field = NULL;
bad:
	if (j)
		serve_job_free(j);
	return NULL;
}
