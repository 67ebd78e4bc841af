/*
 * fw_teach_hint.c — the model hint source: the weak turn of a rollout, the
 * prompt that shows it to a teacher, and the hint the teacher writes
 * (fw_teacher_hint()).  The teacher only completes text; what to ask it is
 * teach's.  See fw_teach.h.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_base.h"
#include "fw_rollout.h"
#include "fw_teach.h"
#include "fw_tok.h"

static int is_role(struct fw_mpv turn, const char *role)
{
	struct fw_mpv v;

	return fw_mp_get(turn, "role", &v) == 1 && fw_mp_str_eq(v, role, strlen(role));
}

/* The string at key of map m, or "" (n 0). */
static void get_str(struct fw_mpv m, const char *key, const char **s, size_t *n)
{
	struct fw_mpv v;

	if (fw_mp_get(m, key, &v) != 1 || fw_mp_str(v, s, n)) {
		*s = "";
		*n = 0;
	}
}

int fw_teach_weak_turn(struct fw_mpv rec, const struct fw_teach_hints *hs)
{
	struct fw_teach_hints env = { 0 };
	struct fw_mpv turns, v, g, x;
	struct fw_mp_iter it;
	int best = -1, last = -1, res = 1;

	for (size_t i = 0; i < hs->n; i++)
		if (hs->h[i].turn >= 0 && (best < 0 || hs->h[i].turn < best))
			best = hs->h[i].turn;
	if (fw_teach_env_hints(rec, 0, &env, NULL, 0) > 0)
		for (size_t i = 0; i < env.n; i++)
			if (best < 0 || env.h[i].turn < best)
				best = env.h[i].turn;
	fw_teach_hints_free(&env);
	if (best >= 0)
		return best;
	if (fw_mp_get(rec, "grade", &g) != 1 || fw_mp_get(g, "resolved", &x) != 1 ||
	    fw_mp_bool(x, &res) || res)
		return -1;
	if (fw_mp_get(rec, "turns", &turns) != 1 || fw_mp_iter_init(&it, turns) < 0)
		return -1;
	for (int i = 0; fw_mp_iter_next(&it, &v) == 1; i++)
		if (is_role(v, "assistant"))
			last = i;
	return last;
}

/* Appends s[0..n) cut to cap bytes: head and tail around "\n[...]\n", on
 * UTF-8 boundaries.  0 or -1 (out of memory). */
static int put_cut(struct fw_buf *b, const char *s, size_t n, size_t cap)
{
	static const char mark[] = "\n[...]\n";
	size_t ml = sizeof mark - 1, h, t;

	if (n <= cap)
		return fw_buf_append(b, s, n);
	if (cap <= ml + 2)
		return 0;
	h = (cap - ml) * 2 / 3;
	t = cap - ml - h;
	while (h > 0 && ((unsigned char)s[h] & 0xc0) == 0x80)
		h--;
	while (t > 0 && ((unsigned char)s[n - t] & 0xc0) == 0x80)
		t--;
	return fw_buf_append(b, s, h) || fw_buf_append(b, mark, ml) ||
	       fw_buf_append(b, s + n - t, t);
}

/* The outcome line of rec into o. */
static int outcome(struct fw_mpv rec, struct fw_buf *o)
{
	struct fw_mpv g, x, k, st;
	struct fw_mp_iter it;
	const char *s;
	size_t n;
	int res = 0, any = 0;

	if (fw_mp_get(rec, "grade", &g) == 1 && fw_mp_type(g) == FW_MP_MAP) {
		if (fw_mp_get(g, "resolved", &x) == 1 && !fw_mp_bool(x, &res))
			any = 1;
		if (fw_buf_puts(o, !any ? "graded" : res ? "resolved" : "not resolved"))
			return -1;
		get_str(g, "reason", &s, &n);
		if (n && fw_buf_printf(o, " (%.*s)", (int)n, s))
			return -1;
		any = 0;
		if (fw_mp_get(g, "tests", &x) == 1 && fw_mp_iter_init(&it, x) >= 0)
			while (fw_mp_iter_next(&it, &k) == 1 && fw_mp_iter_next(&it, &st) == 1) {
				const char *ks, *ss;
				size_t kn, sn;

				if (fw_mp_str(k, &ks, &kn) || fw_mp_str(st, &ss, &sn) ||
				    (sn == 4 && !memcmp(ss, "pass", 4)) ||
				    (sn == 4 && !memcmp(ss, "skip", 4)) ||
				    (sn == 5 && !memcmp(ss, "xfail", 5)))
					continue;
				if (fw_buf_printf(o, "%s%.*s %.*s", any++ ? ", " : "; tests: ", (int)kn, ks,
						  (int)sn, ss))
					return -1;
			}
		any = 0;
		if (fw_mp_get(g, "hacks", &x) == 1 && fw_mp_iter_init(&it, x) >= 0)
			while (fw_mp_iter_next(&it, &k) == 1) {
				get_str(k, "name", &s, &n);
				if (fw_buf_printf(o, "%s%.*s", any++ ? ", " : "; hacks: ", (int)n, s))
					return -1;
			}
	} else if (fw_buf_puts(o, "not graded")) {
		return -1;
	}
	get_str(rec, "stop", &s, &n);
	if (n && fw_buf_printf(o, "; stop: %.*s", (int)n, s))
		return -1;
	return 0;
}

/* "[ROLE] " or "[tool, exit E] " for turn v into b. */
static int turn_head(struct fw_mpv v, struct fw_buf *b)
{
	struct fw_mpv x;
	const char *r;
	size_t rn;
	int64_t ex;

	get_str(v, "role", &r, &rn);
	if (fw_mp_get(v, "exit", &x) == 1 && !fw_mp_int(x, &ex))
		return fw_buf_printf(b, "[%.*s, exit %lld] ", (int)rn, r, (long long)ex);
	return fw_buf_printf(b, "[%.*s] ", (int)rn, r);
}

/* The size of turn v as a transcript line cut to cap bytes of text. */
static size_t line_size(struct fw_mpv v, size_t cap, struct fw_buf *scratch)
{
	const char *xs;
	size_t xn;

	fw_buf_reset(scratch);
	if (turn_head(v, scratch))
		return SIZE_MAX;
	get_str(v, "text", &xs, &xn);
	return scratch->n + (xn < cap ? xn : cap);
}

int fw_teach_hint_prompt(struct fw_mpv rec, int turn, size_t budget, struct fw_buf *out,
			 char *err, size_t errlen)
{
	enum { TURN_CAP = 300, NOTE = 40 };
	struct fw_mpv turns, v, task, *tv = NULL;
	struct fw_mp_iter it;
	struct fw_buf oc = { 0 }, head = { 0 }, rhead = { 0 }, one = { 0 };
	const char *ts = "", *s, *role;
	size_t tn = 0, n, rl;
	int task_turn = -1, rc = -1;
	int64_t cnt;
	char tail[96];

	if (fw_mp_get(rec, "turns", &turns) != 1 || (cnt = fw_mp_iter_init(&it, turns)) < 0 ||
	    turn < 0 || turn >= cnt) {
		fw_seterr(err, errlen, "no turn %d", turn);
		return -1;
	}
	if (!(tv = malloc(sizeof *tv * (size_t)cnt)))
		goto oom;
	for (int i = 0; fw_mp_iter_next(&it, &v) == 1; i++) {
		tv[i] = v;
		if (task_turn < 0 && i != turn && is_role(v, "user"))
			task_turn = i;
	}
	if (fw_mp_get(rec, "task", &task) == 1)
		get_str(task, "prompt", &ts, &tn);
	if (tn || task_turn > turn)
		task_turn = -1;
	else if (task_turn >= 0)
		get_str(tv[task_turn], "text", &ts, &tn);
	get_str(tv[turn], "role", &role, &rl);
	if (outcome(rec, &oc) || fw_buf_printf(&head, "\n\nTurn %d (%.*s):\n", turn, (int)rl, role))
		goto oom;
	int tl = snprintf(tail, sizeof tail,
			  "\n\nOne short hint for turn %d, what to do differently:\nHint:", turn);
	/* the result of the turn: the tool turn after it */
	int res = turn + 1 < cnt && is_role(tv[turn + 1], "tool") ? turn + 1 : -1;
	const char *rs = "";
	size_t rn = 0;

	if (res >= 0) {
		if (fw_buf_puts(&rhead, "\n\nIts result:\n") || turn_head(tv[res], &rhead))
			goto oom;
		get_str(tv[res], "text", &rs, &rn);
	}
	size_t fixed = strlen("Task:\n") + strlen("\n\nOutcome: ") +
		       strlen("\n\nEarlier turns:\n") + head.n + rhead.n + (size_t)tl + NOTE;

	if (budget < 256 || fixed + 64 > budget) {
		fw_seterr(err, errlen, "a prompt of %zu bytes is too small", budget);
		goto out;
	}
	/* each part within its share of the room; the transcript takes what
	 * the others leave */
	size_t room = budget - fixed, t_cap = room / 4, o_cap = room / 6, w_cap = room / 4;
	size_t r_cap = room / 6;
	get_str(tv[turn], "text", &s, &n);
	size_t left = room - (tn < t_cap ? tn : t_cap) - (oc.n < o_cap ? oc.n : o_cap) -
		      (n < w_cap ? n : w_cap) - (rn < r_cap ? rn : r_cap);

	/* earlier turns, the latest kept: from turn-1 back while they fit */
	int first = task_turn >= 0 ? task_turn + 1 : 0, from = turn, total = 0;
	size_t last_cap = TURN_CAP;

	for (int i = first; i < turn; i++)
		total += !is_role(tv[i], "system");
	for (int i = turn - 1; i >= first; i--) {
		if (is_role(tv[i], "system"))
			continue;
		size_t need = line_size(tv[i], TURN_CAP, &one) + 1;

		if (need == SIZE_MAX)
			goto oom;
		if (need > left) {
			/* the oldest one kept may be cut shorter */
			if (left > one.n + 24) {
				last_cap = left - one.n - 1;
				from = i;
				left = 0;
			}
			break;
		}
		left -= need;
		from = i;
	}
	int kept = 0;

	for (int i = from; i < turn; i++)
		kept += !is_role(tv[i], "system");
	if (fw_buf_puts(out, "Task:\n") || put_cut(out, ts, tn, t_cap) ||
	    fw_buf_puts(out, "\n\nOutcome: ") || put_cut(out, (const char *)oc.p, oc.n, o_cap) ||
	    fw_buf_puts(out, "\n\nEarlier turns:"))
		goto oom;
	if (!total && fw_buf_puts(out, "\n(none)"))
		goto oom;
	if (total > kept && fw_buf_printf(out, "\n[%d earlier turns left out]", total - kept))
		goto oom;
	for (int i = from; i < turn; i++) {
		const char *xs;
		size_t xn;

		if (is_role(tv[i], "system"))
			continue;
		get_str(tv[i], "text", &xs, &xn);
		if (fw_buf_puts(out, "\n") || turn_head(tv[i], out) ||
		    put_cut(out, xs, xn, i == from ? last_cap : TURN_CAP))
			goto oom;
	}
	if (fw_buf_append(out, head.p, head.n) || put_cut(out, s, n, w_cap) ||
	    (res >= 0 && (fw_buf_append(out, rhead.p, rhead.n) || put_cut(out, rs, rn, r_cap))) ||
	    fw_buf_append(out, tail, (size_t)tl))
		goto oom;
	rc = 0;
	goto out;
oom:
	fw_seterr(err, errlen, "out of memory");
out:
	free(tv);
	fw_buf_free(&oc);
	fw_buf_free(&head);
	fw_buf_free(&rhead);
	fw_buf_free(&one);
	return rc;
}

int fw_teach_model_hint(struct fw_teacher *T, struct fw_mpv rec,
			const struct fw_teach_hint_opts *o, struct fw_teach_hints *hs, char *err,
			size_t errlen)
{
	size_t budget = o->prompt_bytes ? o->prompt_bytes : 1536;
	int max_tokens = o->max_tokens > 0 ? o->max_tokens : 48;
	size_t max_chars = o->max_chars ? o->max_chars : 400;
	struct fw_buf p = { 0 };
	struct fw_tok_ids ids = { 0 };
	const char *id;
	size_t idn;
	char *hint = NULL;
	int turn = fw_teach_weak_turn(rec, hs), rc = -1;
	const struct fw_tok *tok = fw_teacher_tok(T);

	if (turn < 0)
		return 0;
	/* a builtin teacher: cut the prompt until it fits beside the hint */
	for (int tries = 0;; tries++) {
		fw_buf_reset(&p);
		if (fw_teach_hint_prompt(rec, turn, budget, &p, err, errlen))
			goto out;
		if (!tok)
			break;
		int room = fw_teacher_max_pos(T) - max_tokens - (fw_tok_bos(tok) >= 0);

		ids.n = 0;
		if (fw_tok_encode(tok, p.p, p.n, 0, 0, &ids)) {
			fw_seterr(err, errlen, "out of memory");
			goto out;
		}
		if ((long)ids.n <= room)
			break;
		if (tries == 4 || room < 64) {
			fw_seterr(err, errlen, "the prompt does not fit the teacher's %d positions",
			       fw_teacher_max_pos(T));
			goto out;
		}
		budget = (size_t)((double)budget * room / (double)ids.n * 0.95);
	}
	/* a server takes text only: bytes that are not UTF-8 become U+FFFD */
	size_t fl;
	char *fixed = fw_utf8_fix((const char *)p.p, p.n, &fl);

	if (!fixed) {
		fw_seterr(err, errlen, "out of memory");
		goto out;
	}
	get_str(rec, "id", &id, &idn);
	rc = fw_teacher_hint(T, fixed, fl, fw_rollout_seed(o->seed, id, idn, 0), o->temp,
			     max_tokens, max_chars, &hint, err, errlen);
	free(fixed);
	rc = -1;
	if (!hint)
		goto out;
	if (hs->n == hs->cap) {
		size_t nc = hs->cap ? 2 * hs->cap : 8;
		struct fw_teach_hint *nh = realloc(hs->h, nc * sizeof *nh);

		if (!nh) {
			fw_seterr(err, errlen, "out of memory");
			goto out;
		}
		hs->h = nh;
		hs->cap = nc;
	}
	hs->h[hs->n++] = (struct fw_teach_hint){ turn, hint, "model" };
	hint = NULL;
	rc = 1;
out:
	free(hint);
	fw_buf_free(&p);
	fw_tok_ids_release(&ids);
	return rc;
}
