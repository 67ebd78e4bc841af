/*
 * fw_tok_rec.c — chat rendering of the turns[] of traj and rollout records.
 *
 * Reads the msgpack turns into struct fw_chat_turn (strings copied, so that
 * roles, names and arguments are NUL-terminated) and hands them to
 * fw_chat_render().
 */
#include "fw_tok.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_base.h"
#include "fw_json.h"
#include "fw_mp.h"

/* Strings and ids are gathered first and pointed at once the pool stops
 * moving: offsets until then. */
struct gather {
	struct fw_buf pool;  /* NUL-terminated strings */
	struct fw_buf ids;   /* int32 token ids */
	struct fw_buf calls; /* struct calloff */
};

struct calloff {
	size_t name, args; /* pool offsets + 1, 0 for none */
};

/* Appends s[0..n) and a NUL to the pool; returns its offset + 1, or 0. */
static size_t keep(struct gather *g, const char *s, size_t n)
{
	size_t off = g->pool.n;

	if (fw_buf_append(&g->pool, s, n) < 0 || fw_buf_append(&g->pool, "", 1) < 0)
		return 0;
	return off + 1;
}

static const char *at(const struct gather *g, size_t off)
{
	return off ? (const char *)g->pool.p + off - 1 : NULL;
}

int fw_chat_render_mp(const struct fw_tok *t, enum fw_chat_template tmpl,
		      const struct fw_mpv *turns, int add_generation_prompt,
		      struct fw_tok_ids *out, char *err, size_t errlen)
{
	struct gather g = { { 0 }, { 0 }, { 0 } };
	struct fw_buf js = { 0 };
	struct fw_mp_iter it;
	struct fw_mpv tv;
	struct fw_chat_turn *tt = NULL;
	struct fw_chat_call *calls = NULL;
	/* per turn: offsets of role, text; text length; calls and ids ranges */
	struct off { size_t role, text, len, call0, ncalls, id0, nids; } *o = NULL;
	int64_t n = fw_mp_type(*turns) == FW_MP_ARRAY ? fw_mp_iter_init(&it, *turns) : -1;
	int rc = -1;

	if (n < 0) {
		fw_seterr(err, errlen, "turns is not an array");
		return -1;
	}
	tt = calloc((size_t)n + 1, sizeof *tt);
	o = calloc((size_t)n + 1, sizeof *o);
	if (!tt || !o)
		goto oom;
	for (int64_t i = 0; fw_mp_iter_next(&it, &tv) == 1; i++) {
		struct fw_mpv v;
		const char *s;
		size_t sn;
		if (fw_mp_type(tv) != FW_MP_MAP) {
			fw_seterr(err, errlen, "turn %lld: not a map", (long long)i);
			goto out;
		}
		if (fw_mp_get(tv, "role", &v) != 1 || fw_mp_str(v, &s, &sn) < 0) {
			fw_seterr(err, errlen, "turn %lld: no role string", (long long)i);
			goto out;
		}
		if (!(o[i].role = keep(&g, s, sn)))
			goto oom;
		if (fw_mp_get(tv, "text", &v) == 1 && fw_mp_type(v) != FW_MP_NIL) {
			if (fw_mp_str(v, &s, &sn) < 0) {
				fw_seterr(err, errlen, "turn %lld: text is %s, not str", (long long)i,
				     fw_mp_type_name(fw_mp_type(v)));
				goto out;
			}
			if (!(o[i].text = keep(&g, s, sn)))
				goto oom;
			o[i].len = sn;
		}
		struct fw_mp_iter ci;
		struct fw_mpv c;
		o[i].call0 = g.calls.n / sizeof(struct calloff);
		if (fw_mp_get(tv, "calls", &v) == 1 && fw_mp_type(v) != FW_MP_NIL) {
			if (fw_mp_type(v) != FW_MP_ARRAY) {
				fw_seterr(err, errlen, "turn %lld: calls is %s, not array", (long long)i,
				     fw_mp_type_name(fw_mp_type(v)));
				goto out;
			}
			fw_mp_iter_init(&ci, v);
			while (fw_mp_iter_next(&ci, &c) == 1) {
				struct fw_mpv name, args;
				size_t noff = 0, aoff = 0;
				if (fw_mp_get(c, "name", &name) == 1 && fw_mp_str(name, &s, &sn) == 0 &&
				    !(noff = keep(&g, s, sn)))
					goto oom;
				if (fw_mp_get(c, "args", &args) == 1 && fw_mp_type(args) != FW_MP_NIL) {
					if (fw_mp_str(args, &s, &sn) < 0) {
						/* not JSON text yet: write the value as JSON */
						js.n = 0;
						if (fw_json_from_mp(&js, args, err, errlen) < 0) {
							fw_seterr(err, errlen, "turn %lld: bad call args",
							     (long long)i);
							goto out;
						}
						s = (const char *)js.p;
						sn = js.n;
					}
					if (!(aoff = keep(&g, s, sn)))
						goto oom;
				}
				struct calloff co = { noff, aoff };
				if (fw_buf_append(&g.calls, &co, sizeof co) < 0)
					goto oom;
				o[i].ncalls++;
			}
		}
		o[i].id0 = g.ids.n / sizeof(int32_t);
		if (fw_mp_get(tv, "tokens", &v) == 1 && fw_mp_type(v) != FW_MP_NIL) {
			if (fw_mp_type(v) != FW_MP_ARRAY) {
				fw_seterr(err, errlen, "turn %lld: tokens is %s, not array", (long long)i,
				     fw_mp_type_name(fw_mp_type(v)));
				goto out;
			}
			fw_mp_iter_init(&ci, v);
			while (fw_mp_iter_next(&ci, &c) == 1) {
				int64_t id;
				if (fw_mp_int(c, &id) < 0 || id < 0 || id >= fw_tok_vocab_size(t)) {
					fw_seterr(err, errlen, "turn %lld: tokens[%zu] is not a token id",
					     (long long)i, o[i].nids);
					goto out;
				}
				int32_t id32 = (int32_t)id;
				if (fw_buf_append(&g.ids, &id32, sizeof id32) < 0)
					goto oom;
				o[i].nids++;
			}
		}
	}
	size_t ncalls = g.calls.n / sizeof(struct calloff);
	calls = calloc(ncalls + 1, sizeof *calls);
	if (!calls)
		goto oom;
	for (size_t j = 0; j < ncalls; j++) {
		const struct calloff *co = (const struct calloff *)g.calls.p + j;
		calls[j].name = at(&g, co->name);
		calls[j].args = at(&g, co->args);
	}
	for (int64_t i = 0; i < n; i++) {
		tt[i].role = at(&g, o[i].role);
		tt[i].text = at(&g, o[i].text);
		tt[i].len = o[i].len;
		tt[i].calls = o[i].ncalls ? calls + o[i].call0 : NULL;
		tt[i].ncalls = o[i].ncalls;
		tt[i].tokens = o[i].nids ? (const int32_t *)g.ids.p + o[i].id0 : NULL;
		tt[i].ntokens = o[i].nids;
	}
	rc = fw_chat_render(t, tmpl, tt, (size_t)n, add_generation_prompt, out, err, errlen);
	goto out;
oom:
	fw_seterr(err, errlen, "out of memory");
out:
	free(tt);
	free(calls);
	free(o);
	fw_buf_free(&g.pool);
	fw_buf_free(&g.ids);
	fw_buf_free(&g.calls);
	fw_buf_free(&js);
	return rc;
}
