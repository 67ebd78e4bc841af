/*
 * fw_serve_answer.c — decoded jobs into the API's answers: choices with
 * text, log-probs in OpenAI's shapes (chat's content[], completions'
 * tokens/token_logprobs/top_logprobs/text_offset), tool calls parsed from
 * the text, usage; and the same as server-sent events, written as the
 * engine decodes, text held back while a stop string or a tool call may
 * still claim it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_model.h"
#include "fw_serve_int.h"
#include "fw_tok.h"
#include "fw_toolcall.h"


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

/* The bytes of id as a JSON array of integers (the API's "bytes"). */
static json_t *piece_bytes(const struct fw_tok *t, int32_t id)
{
	size_t n;
	const unsigned char *p = (const unsigned char *)fw_tok_piece(t, id, &n);
	json_t *a = json_array();

	for (size_t i = 0; p && i < n; i++)
		json_array_append_new(a, json_integer(p[i]));
	return a;
}

/* s[0..n) as a JSON string, bytes that are not UTF-8 replaced. */
static json_t *text_json(const char *s, size_t n)
{
	size_t fn;
	char *f = fw_utf8_fix(s ? s : "", s ? n : 0, &fn);
	json_t *j = json_stringn(f ? f : "", f ? fn : 0);

	free(f);
	return j;
}

/* The end of the tokens of choice c, from index from on, that an answer
 * lists (log-probs, text offsets): those whose bytes lie within the first
 * upto bytes, the end token left out. */
static int listed(const struct choice *c, size_t upto, int from)
{
	int i = from, n = c->n - c->stop_tok;

	while (i < n && c->tend[i] <= upto)
		i++;
	return i;
}

/* Log-probs of tokens [from, to) of choice c in the shape of the answer:
 * chat: appended to content[] as {token, logprob, bytes, top_logprobs};
 * completions: to lp's tokens, token_logprobs, top_logprobs, text_offset
 * (offsets from base). */
static void add_logprobs(const struct arm *a, const struct job *j, const struct choice *c,
			 int from, int to, int chat, json_t *lp, size_t base)
{
	const struct fw_tok *t = a->b->t;

	for (int i = from; i < to; i++) {
		json_t *top = chat ? json_array() : j->ntop ? json_object() : NULL;
		for (int r = 0; r < j->ntop; r++) {
			int32_t id = c->top_id[(size_t)i * j->ntop + r];
			double l = c->top_lp[(size_t)i * j->ntop + r];
			if (chat) {
				json_array_append_new(top, json_pack("{s:o,s:f,s:o}", "token",
					piece(t, id), "logprob", l, "bytes", piece_bytes(t, id)));
			} else {
				json_t *k = piece(t, id);
				/* two ids may spell the same text: the likelier stays */
				if (!json_object_get(top, json_string_value(k)))
					json_object_set_new(top, json_string_value(k), json_real(l));
				json_decref(k);
			}
		}
		if (chat) {
			json_array_append_new(json_object_get(lp, "content"),
				json_pack("{s:o,s:f,s:o,s:o}", "token", piece(t, c->tok[i]),
					  "logprob", (double)c->lp[i], "bytes",
					  piece_bytes(t, c->tok[i]), "top_logprobs", top));
		} else {
			json_array_append_new(json_object_get(lp, "tokens"), piece(t, c->tok[i]));
			json_array_append_new(json_object_get(lp, "token_logprobs"),
					      json_real(c->lp[i]));
			json_array_append_new(json_object_get(lp, "top_logprobs"),
					      top ? top : json_null());
			json_array_append_new(json_object_get(lp, "text_offset"),
				json_integer((json_int_t)(base + (i ? c->tend[i - 1] : 0))));
		}
	}
}

static json_t *new_logprobs(int chat)
{
	return chat ? json_pack("{s:[]}", "content")
		    : json_pack("{s:[],s:[],s:[],s:[]}", "tokens", "token_logprobs",
				"top_logprobs", "text_offset");
}

/* The tool calls of a finished choice as the API's tool_calls[] (index
 * fields when stream), or NULL when it made none; *content_len gets the
 * bytes of text before them. */
static json_t *tool_calls(const struct arm *a, const struct want *w, const struct choice *c,
			  size_t *content_len, int stream)
{
	struct fw_toolcalls tc = { 0 };
	json_t *arr;

	*content_len = c->len;
	if (w->tools == TOOLS_NONE ||
	    fw_toolcall_parse((enum fw_chat_template)a->tmpl, (const char *)c->text.p, c->len,
			      &tc) <= 0) {
		fw_toolcalls_release(&tc);
		return NULL;
	}
	arr = json_array();
	for (size_t i = 0; i < tc.n && !(w->single_call && i); i++) {
		char id[32];
		snprintf(id, sizeof id, "call_%016llx", (unsigned long long)serve_fresh(a->srv));
		json_t *call = json_pack("{s:s,s:s,s:{s:s,s:s}}", "id", id, "type", "function",
					 "function", "name", tc.v[i].name, "arguments",
					 tc.v[i].args);
		if (stream)
			json_object_set_new(call, "index", json_integer((json_int_t)i));
		json_array_append_new(arr, call);
	}
	*content_len = tc.content_len;
	fw_toolcalls_release(&tc);
	return arr;
}

static json_t *usage_json(const struct job *j)
{
	int ct = 0;

	for (int k = 0; k < j->n; k++)
		ct += j->ch[k].n;
	return json_pack("{s:i,s:i,s:i}", "prompt_tokens", (int)j->nids, "completion_tokens", ct,
			 "total_tokens", (int)j->nids + ct);
}

/* The answer to a finished job that is not streamed. */
json_t *serve_answer(const struct arm *a, const struct job *j, const struct want *w)
{
	json_t *choices = json_array();

	for (int k = 0; k < j->n; k++) {
		const struct choice *c = &j->ch[k];
		size_t clen;
		json_t *calls = tool_calls(a, w, c, &clen, 0);
		json_t *lp = json_null(), *ids = json_array(), *all = json_array();
		if (w->lp) {
			lp = new_logprobs(w->chat);
			add_logprobs(a, j, c, 0, listed(c, clen, 0), w->chat, lp, 0);
		}
		for (int i = 0; i < c->n; i++) {
			json_array_append_new(ids, json_integer(c->tok[i]));
			json_array_append_new(all, json_real(c->lp[i]));
		}
		const char *fin = calls ? "tool_calls" : c->finish;
		json_t *ch;
		if (w->chat) {
			json_t *m = json_pack("{s:s,s:o}", "role", "assistant", "content",
					      calls && !clen ? json_null()
							     : text_json((const char *)c->text.p,
									 clen));
			if (calls)
				json_object_set_new(m, "tool_calls", calls);
			ch = json_pack("{s:i,s:o,s:o,s:s}", "index", k, "message", m, "logprobs", lp,
				       "finish_reason", fin);
		} else {
			ch = json_pack("{s:i,s:o,s:o,s:s}", "index", k, "text",
				       text_json((const char *)c->text.p, clen), "logprobs", lp,
				       "finish_reason", fin);
		}
		/* token_ids and token_logprobs_all carry every id drawn, end
		 * token included, for clients that train on them */
		json_object_set_new(ch, "token_ids", ids);
		json_object_set_new(ch, "token_logprobs_all", all);
		json_array_append_new(choices, ch);
	}
	return json_pack("{s:s,s:s,s:I,s:s,s:o,s:o}", "id", w->id, "object",
			 w->chat ? "chat.completion" : "text_completion", "created",
			 (json_int_t)w->created, "model", a->name, "choices", choices, "usage",
			 usage_json(j));
}

/* The answer to echo with max_tokens 0: the prompt scored. */
json_t *serve_score_answer(const struct arm *a, const struct job *j, const struct want *w)
{
	json_t *toks = json_array(), *lps = json_array(), *all = json_array(), *off = json_array();
	json_t *plp = w->prompt_lp ? json_array() : NULL, *choices = json_array();
	struct fw_buf txt = { 0 };

	for (size_t i = 0; i < j->nids; i++) {
		size_t pn;
		const char *pc = fw_tok_piece(a->b->t, j->ids[i], &pn);
		json_array_append_new(off, json_integer((json_int_t)txt.n));
		if (pc && !fw_tok_is_special(a->b->t, j->ids[i]))
			fw_buf_append(&txt, pc, pn);
		json_array_append_new(toks, piece(a->b->t, j->ids[i]));
		json_array_append_new(lps, i ? json_real(j->plp[i]) : json_null());
		json_array_append_new(all, json_integer(j->ids[i]));
		if (plp) {
			char key[16];
			snprintf(key, sizeof key, "%d", (int)j->ids[i]);
			json_array_append_new(plp, i ? json_pack("{s:{s:f,s:o}}", key, "logprob",
					(double)j->plp[i], "decoded_token", piece(a->b->t, j->ids[i]))
						     : json_null());
		}
	}
	for (int k = 0; k < j->n; k++) {
		json_t *ch = json_pack("{s:i,s:o,s:{s:O,s:O,s:n,s:O},s:s,s:O}", "index", k, "text",
			text_json((const char *)txt.p, txt.n), "logprobs", "tokens", toks,
			"token_logprobs", lps, "top_logprobs", "text_offset", off, "finish_reason",
			"length", "token_ids", all);
		if (plp)
			json_object_set(ch, "prompt_logprobs", plp);
		json_array_append_new(choices, ch);
	}
	fw_buf_free(&txt);
	json_decref(toks);
	json_decref(lps);
	json_decref(all);
	json_decref(off);
	json_decref(plp);
	return json_pack("{s:s,s:s,s:I,s:s,s:o,s:{s:i,s:i,s:i}}", "id", w->id, "object",
			 "text_completion", "created", (json_int_t)w->created, "model", a->name,
			 "choices", choices, "usage", "prompt_tokens", (int)j->nids,
			 "completion_tokens", 0, "total_tokens", (int)j->nids);
}

struct fw_serve_stream {
	struct arm *a;
	struct job *j;
	struct want w;
	size_t *sent;     /* (n) bytes of text sent */
	int *sent_tok;    /* (n) tokens whose log-probs went */
	int *over;        /* (n) the choice's last chunk went */
	int started, ended;
	struct fw_buf out;
	size_t off;
};

/* The longest k < L such that text ends with the first k bytes of s. */
static size_t partial(const char *text, size_t n, const char *s, size_t L)
{
	for (size_t k = L - 1 < n ? L - 1 : n; k > 0; k--)
		if (!memcmp(text + n - k, s, k))
			return k;
	return 0;
}

/* Bytes of a live choice's text that can go out: none that a stop string
 * or a tool call may still claim, and no half of a UTF-8 character. */
static size_t safe_len(const struct job *j, const struct choice *c)
{
	const char *t = (const char *)c->text.p;
	size_t n = c->len, safe = n, k;

	if (c->done)
		return n;
	for (int i = 0; i < j->nstops; i++)
		if ((k = partial(t, n, j->stops[i], j->stoplen[i])) && n - k < safe)
			safe = n - k;
	if (j->hold) {
		size_t L = strlen(j->hold);
		const char *h = n ? memmem(t, n, j->hold, L) : NULL;
		if (h && (size_t)(h - t) < safe)
			safe = (size_t)(h - t);
		else if ((k = partial(t, n, j->hold, L)) && n - k < safe)
			safe = n - k;
	}
	if (j->hold_json) {
		size_t i = 0;
		while (i < n && (t[i] == ' ' || t[i] == '\n' || t[i] == '\t' || t[i] == '\r'))
			i++;
		if (i == n || t[i] == '{')
			safe = 0;
	}
	/* back to the start of a character that is not whole */
	for (size_t b = safe, back = 0; b > 0 && back < 4; back++) {
		unsigned char ch = (unsigned char)t[--b];
		if ((ch & 0xc0) == 0x80)
			continue;
		size_t need = ch < 0x80 ? 1 : (ch & 0xe0) == 0xc0 ? 2 : (ch & 0xf0) == 0xe0 ? 3 : 4;
		if (b + need > safe)
			safe = b;
		break;
	}
	return safe;
}

static void emit(struct fw_serve_stream *st, json_t *chunk)
{
	char *s = json_dumps(chunk, JSON_COMPACT);

	json_decref(chunk);
	if (s) {
		fw_buf_append(&st->out, "data: ", 6);
		fw_buf_append(&st->out, s, strlen(s));
		fw_buf_append(&st->out, "\n\n", 2);
		free(s);
	}
}

static json_t *chunk_of(struct fw_serve_stream *st, json_t *choices)
{
	json_t *c = json_pack("{s:s,s:s,s:I,s:s,s:o}", "id", st->w.id, "object",
			      st->w.chat ? "chat.completion.chunk" : "text_completion", "created",
			      (json_int_t)st->w.created, "model", st->a->name, "choices", choices);

	if (st->w.usage)
		json_object_set_new(c, "usage", json_null());
	return c;
}

/* Writes (under the arm's lock) the chunks of what the job has that has
 * not gone yet.  Returns 1 when it wrote something or the stream is over. */
static int produce(struct fw_serve_stream *st)
{
	struct job *j = st->j;
	struct arm *a = st->a;
	size_t before = st->out.n;

	if (st->w.chat && !st->started) {
		json_t *chs = json_array();
		for (int k = 0; k < j->n; k++)
			json_array_append_new(chs, json_pack("{s:i,s:{s:s,s:s},s:n,s:n}", "index", k,
				"delta", "role", "assistant", "content", "", "logprobs",
				"finish_reason"));
		emit(st, chunk_of(st, chs));
	}
	st->started = 1;
	if (j->failed && j->finished) {
		emit(st, json_pack("{s:{s:s,s:s}}", "error", "message", j->err[0] ? j->err :
				   "the request was not decoded", "type", "server_error"));
		fw_buf_append(&st->out, "data: [DONE]\n\n", 14);
		st->ended = 1;
		return 1;
	}
	for (int k = 0; k < j->n; k++) {
		struct choice *c = &j->ch[k];
		if (st->over[k])
			continue;
		size_t upto = safe_len(j, c);
		json_t *calls = NULL;
		if (c->done)
			calls = tool_calls(a, &st->w, c, &upto, 1);
		int to = listed(c, upto, st->sent_tok[k]);
		if (upto <= st->sent[k] && to == st->sent_tok[k] && !c->done)
			continue;
		json_t *lp = json_null();
		if (st->w.lp && to > st->sent_tok[k]) {
			lp = new_logprobs(st->w.chat);
			add_logprobs(a, j, c, st->sent_tok[k], to, st->w.chat, lp, 0);
		}
		json_t *txt = text_json((const char *)c->text.p + st->sent[k],
					upto > st->sent[k] ? upto - st->sent[k] : 0);
		json_t *ch;
		if (st->w.chat) {
			json_t *d = json_object();
			if (json_string_length(txt) || !calls)
				json_object_set(d, "content", txt);
			if (calls)
				json_object_set_new(d, "tool_calls", calls);
			ch = json_pack("{s:i,s:o,s:o}", "index", k, "delta", d, "logprobs", lp);
		} else {
			ch = json_pack("{s:i,s:O,s:o}", "index", k, "text", txt, "logprobs", lp);
		}
		json_decref(txt);
		json_object_set_new(ch, "finish_reason",
				    c->done ? json_string(calls ? "tool_calls" : c->finish)
					    : json_null());
		if (c->done) {
			json_object_set_new(ch, "token_ids", json_array());
			for (int i = 0; i < c->n; i++)
				json_array_append_new(json_object_get(ch, "token_ids"),
						      json_integer(c->tok[i]));
			st->over[k] = 1;
		}
		if (upto > st->sent[k])
			st->sent[k] = upto;
		st->sent_tok[k] = to;
		emit(st, chunk_of(st, json_pack("[o]", ch)));
	}
	if (j->finished) {
		if (st->w.usage)
			emit(st, json_pack("{s:s,s:s,s:I,s:s,s:[],s:o}", "id", st->w.id, "object",
					   st->w.chat ? "chat.completion.chunk" : "text_completion",
					   "created", (json_int_t)st->w.created, "model", a->name,
					   "choices", "usage", usage_json(j)));
		fw_buf_append(&st->out, "data: [DONE]\n\n", 14);
		st->ended = 1;
	}
	return st->out.n > before || st->ended;
}

size_t fw_serve_stream_read(struct fw_serve_stream *st, char *buf, size_t max)
{
	if (st->off == st->out.n) {
		if (st->ended)
			return 0;
		st->out.n = st->off = 0;
		pthread_mutex_lock(&st->a->mu);
		while (!produce(st))
			pthread_cond_wait(&st->j->cv, &st->a->mu);
		pthread_mutex_unlock(&st->a->mu);
	}
	size_t n = st->out.n - st->off < max ? st->out.n - st->off : max;
	memcpy(buf, st->out.p + st->off, n);
	st->off += n;
	return n;
}

/* The connection is done with the stream (finished, or the client went):
 * a job still decoding is cancelled. */
void fw_serve_stream_free(struct fw_serve_stream *st)
{
	if (!st)
		return;
	pthread_mutex_lock(&st->a->mu);
	st->j->cancelled = 1;
	pthread_mutex_unlock(&st->a->mu);
	serve_job_drop(st->a, st->j, 0);
	free(st->w.prefix);
	free(st->sent);
	free(st->sent_tok);
	free(st->over);
	fw_buf_free(&st->out);
	free(st);
}

struct fw_serve_stream *serve_stream_new(struct arm *a, struct job *j, const struct want *w)
{
	struct fw_serve_stream *st = calloc(1, sizeof *st);

	if (!st || !(st->sent = calloc((size_t)j->n, sizeof *st->sent)) ||
	    !(st->sent_tok = calloc((size_t)j->n, sizeof *st->sent_tok)) ||
	    !(st->over = calloc((size_t)j->n, sizeof *st->over))) {
		if (st) {
			free(st->sent);
			free(st->sent_tok);
		}
		free(st);
		return NULL;
	}
	st->a = a;
	st->j = j;
	st->w = *w;
	return st;
}
