/*
 * fw_tok_chat.c — ChatML (Qwen) and Llama 3 chat templates over fw_tok.
 *
 * The templates are written out in C rather than interpreted from a Jinja
 * chat_template: a rendering is segments of text (encoded without matching
 * special tokens) and special tokens, each with the mask value that says
 * whether the policy produced it.
 */
#include "fw_base.h"
#include "fw_tok.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct render {
	const struct fw_tok *t;
	struct fw_tok_ids *out;
	char *err;
	size_t errlen;
	char *buf; /* scratch text */
	size_t n, cap;
};

static void seterr(struct render *R, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void seterr(struct render *R, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fw_vseterr(R->err, R->errlen, fmt, ap);
	va_end(ap);
}

static int special(struct render *R, const char *name, int mask)
{
	int32_t id = fw_tok_id(R->t, name);

	if (id < 0) {
		seterr(R, "the tokenizer has no %s token", name);
		return -1;
	}
	if (fw_tok_ids_push(R->out, id, mask) < 0) {
		seterr(R, "out of memory");
		return -1;
	}
	return 0;
}

static int text(struct render *R, const char *s, size_t n, int mask)
{
	if (fw_tok_encode(R->t, s, n, 0, mask, R->out) < 0) {
		seterr(R, "out of memory");
		return -1;
	}
	return 0;
}

static int put(struct render *R, const char *s, size_t n)
{
	if (R->n + n > R->cap) {
		size_t cap = R->cap ? R->cap : 256;
		while (cap < R->n + n)
			cap *= 2;
		char *nb = realloc(R->buf, cap);
		if (!nb) {
			seterr(R, "out of memory");
			return -1;
		}
		R->buf = nb;
		R->cap = cap;
	}
	if (n)
		memcpy(R->buf + R->n, s, n);
	R->n += n;
	return 0;
}

static int puts_(struct render *R, const char *s)
{
	return put(R, s, strlen(s));
}

static int has_real(json_t *v)
{
	const char *k;
	json_t *x;
	size_t i;

	if (json_is_real(v))
		return 1;
	json_object_foreach(v, k, x)
		if (has_real(x))
			return 1;
	json_array_foreach(v, i, x)
		if (has_real(x))
			return 1;
	return 0;
}

/* Appends call arguments as the templates' tojson writes them (Python's
 * json.dumps: ", " and ": " between items, keys in their order, UTF-8 kept).
 * Text that is not JSON, or holds a float (whose digits Python and jansson
 * print differently), is appended as it is. */
static int put_args(struct render *R, const char *args)
{
	json_t *v;
	char *text;

	if (!args)
		return puts_(R, "{}");
	v = json_loads(args, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
	if (!v || has_real(v)) {
		json_decref(v);
		return puts_(R, args);
	}
	text = json_dumps(v, JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
	json_decref(v);
	if (!text) {
		seterr(R, "out of memory");
		return -1;
	}
	int rc = puts_(R, text);
	free(text);
	return rc;
}

/* Encodes the scratch text as one string and empties it.  With mask set,
 * the tokens that end past the first from bytes (the header) are masked 1,
 * so a token that straddles header and content counts as the policy's. */
static int flush(struct render *R, int mask, size_t from)
{
	size_t first = R->out->n, off = 0;
	int rc = text(R, R->buf, R->n, 0);

	for (size_t i = first; rc == 0 && mask && i < R->out->n; i++) {
		size_t len = 0;
		fw_tok_piece(R->t, R->out->ids[i], &len);
		off += len;
		R->out->mask[i] = off > from;
	}
	R->n = 0;
	return rc;
}

static int is(const char *role, const char *name)
{
	return role && strcmp(role, name) == 0;
}

/* The policy's own ids for an assistant turn, then end unless they hold it. */
static int sampled(struct render *R, const struct fw_chat_turn *tr, const char *end)
{
	int32_t eid = fw_tok_id(R->t, end);

	for (size_t i = 0; i < tr->ntokens; i++)
		if (fw_tok_ids_push(R->out, tr->tokens[i], 1) < 0) {
			seterr(R, "out of memory");
			return -1;
		}
	if (eid >= 0 && tr->ntokens && tr->tokens[tr->ntokens - 1] == eid)
		return 0;
	return special(R, end, 1);
}

static int chatml(struct render *R, const struct fw_chat_turn *turns, size_t nturns, int gen)
{
	for (size_t i = 0; i < nturns; i++) {
		const struct fw_chat_turn *tr = &turns[i];
		const char *role = tr->role ? tr->role : "user";
		int m = is(role, "assistant");
		if (is(role, "tool")) {
			/* consecutive tool results share one user turn */
			if ((i == 0 || !is(turns[i - 1].role, "tool")) &&
			    (special(R, "<|im_start|>", 0) < 0 || puts_(R, "user") < 0))
				return -1;
			if (puts_(R, "\n<tool_response>\n") < 0 || put(R, tr->text, tr->len) < 0 ||
			    puts_(R, "\n</tool_response>") < 0 || flush(R, 0, 0) < 0)
				return -1;
			if ((i + 1 == nturns || !is(turns[i + 1].role, "tool")) &&
			    (special(R, "<|im_end|>", 0) < 0 || text(R, "\n", 1, 0) < 0))
				return -1;
			continue;
		}
		if (special(R, "<|im_start|>", 0) < 0 || puts_(R, role) < 0 || puts_(R, "\n") < 0)
			return -1;
		size_t hdr = R->n;
		if (m && tr->tokens) {
			if (flush(R, 0, 0) < 0 || sampled(R, tr, "<|im_end|>") < 0)
				return -1;
		} else {
			if (put(R, tr->text, tr->len) < 0)
				return -1;
			for (size_t j = 0; m && j < tr->ncalls; j++) {
				const struct fw_chat_call *c = &tr->calls[j];
				if (puts_(R, R->n > hdr ? "\n<tool_call>\n{\"name\": \"" :
							  "<tool_call>\n{\"name\": \"") < 0 ||
				    puts_(R, c->name ? c->name : "") < 0 ||
				    puts_(R, "\", \"arguments\": ") < 0 || put_args(R, c->args) < 0 ||
				    puts_(R, "}\n</tool_call>") < 0)
					return -1;
			}
			if (flush(R, m, hdr) < 0 || special(R, "<|im_end|>", m) < 0)
				return -1;
		}
		if (text(R, "\n", 1, 0) < 0)
			return -1;
	}
	if (gen && (special(R, "<|im_start|>", 0) < 0 || text(R, "assistant\n", 10, 0) < 0))
		return -1;
	return 0;
}

static int space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* The header up to <|end_header_id|>; the "\n\n" after it is left in the
 * scratch text to be encoded with the content. */
static int header(struct render *R, const char *role)
{
	if (special(R, "<|start_header_id|>", 0) < 0 || text(R, role, strlen(role), 0) < 0 ||
	    special(R, "<|end_header_id|>", 0) < 0 || puts_(R, "\n\n") < 0)
		return -1;
	return 0;
}

static int llama3(struct render *R, const struct fw_chat_turn *turns, size_t nturns, int gen)
{
	if (special(R, "<|begin_of_text|>", 0) < 0)
		return -1;
	for (size_t i = 0; i < nturns; i++) {
		const struct fw_chat_turn *tr = &turns[i];
		const char *role = tr->role ? tr->role : "user";
		int m = is(role, "assistant");
		if (header(R, is(role, "tool") ? "ipython" : role) < 0)
			return -1;
		if (m && tr->tokens) {
			if (flush(R, 0, 0) < 0 || sampled(R, tr, "<|eot_id|>") < 0)
				return -1;
			continue;
		}
		const char *s = tr->text;
		size_t n = tr->len;
		while (n && space(s[0]))
			s++, n--;
		while (n && space(s[n - 1]))
			n--;
		if (put(R, s, n) < 0)
			return -1;
		for (size_t j = 0; m && j < tr->ncalls; j++) {
			const struct fw_chat_call *c = &tr->calls[j];
			if ((R->n > 2 && puts_(R, "\n") < 0) || puts_(R, "{\"name\": \"") < 0 ||
			    puts_(R, c->name ? c->name : "") < 0 ||
			    puts_(R, "\", \"parameters\": ") < 0 || put_args(R, c->args) < 0 ||
			    puts_(R, "}") < 0)
				return -1;
		}
		if (flush(R, m, 2) < 0 || special(R, "<|eot_id|>", m) < 0)
			return -1;
	}
	if (gen && (header(R, "assistant") < 0 || flush(R, 0, 0) < 0))
		return -1;
	return 0;
}

int fw_chat_detect(const struct fw_tok *t)
{
	if (fw_tok_id(t, "<|im_start|>") >= 0 && fw_tok_id(t, "<|im_end|>") >= 0)
		return FW_CHAT_CHATML;
	if (fw_tok_id(t, "<|start_header_id|>") >= 0)
		return FW_CHAT_LLAMA3;
	return -1;
}

int32_t fw_chat_end(const struct fw_tok *t, enum fw_chat_template tmpl)
{
	return fw_tok_id(t, tmpl == FW_CHAT_LLAMA3 ? "<|eot_id|>" : "<|im_end|>");
}

int fw_chat_render(const struct fw_tok *t, enum fw_chat_template tmpl,
		   const struct fw_chat_turn *turns, size_t nturns, int add_generation_prompt,
		   struct fw_tok_ids *out, char *err, size_t errlen)
{
	struct render R = { t, out, err, errlen, NULL, 0, 0 };
	int rc;

	switch (tmpl) {
	case FW_CHAT_CHATML:
		rc = chatml(&R, turns, nturns, add_generation_prompt);
		break;
	case FW_CHAT_LLAMA3:
		rc = llama3(&R, turns, nturns, add_generation_prompt);
		break;
	default:
		seterr(&R, "unknown chat template %d", (int)tmpl);
		rc = -1;
	}
	free(R.buf);
	return rc;
}
