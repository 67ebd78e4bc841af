/*
 * fw_teach.c — environment hints and hinted re-scoring of a rollout.
 * See fw_teach.h.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <errno.h>
#include <math.h>
#include <pcre2.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_base.h"
#include "fw_rollout.h"
#include "fw_teach.h"

void fw_teach_hints_free(struct fw_teach_hints *hs)
{
	if (!hs)
		return;
	for (size_t i = 0; i < hs->n; i++)
		free(hs->h[i].text);
	free(hs->h);
	hs->h = NULL;
	hs->n = hs->cap = 0;
}

/* Adds a hint of text s[0..n) cut to max bytes (on a UTF-8 boundary). */
static int add_hint(struct fw_teach_hints *hs, int turn, const char *source, const char *s,
		    size_t n, size_t max)
{
	if (n > max) {
		n = max;
		while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
			n--;
	}
	while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' '))
		n--;
	if (hs->n == hs->cap) {
		size_t nc = hs->cap ? 2 * hs->cap : 8;
		struct fw_teach_hint *p = realloc(hs->h, nc * sizeof *p);

		if (!p)
			return -1;
		hs->h = p;
		hs->cap = nc;
	}
	char *t = malloc(n + 1);

	if (!t)
		return -1;
	memcpy(t, s, n);
	t[n] = 0;
	hs->h[hs->n++] = (struct fw_teach_hint){ turn, t, source };
	return 0;
}

static int add_fmt(struct fw_teach_hints *hs, int turn, size_t max, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int add_fmt(struct fw_teach_hints *hs, int turn, size_t max, const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;
	int n, rc;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !(s = malloc((size_t)n + 1)))
		return -1;
	va_start(ap, fmt);
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	va_end(ap);
	rc = add_hint(hs, turn, "env", s, (size_t)n, max);
	free(s);
	return rc;
}

/* String value or "" (n 0). */
static void str_or_empty(struct fw_mpv v, const char **s, size_t *n)
{
	if (fw_mp_str(v, s, n)) {
		*s = "";
		*n = 0;
	}
}

static int is_role(struct fw_mpv turn, const char *role)
{
	struct fw_mpv v;

	return fw_mp_get(turn, "role", &v) == 1 && fw_mp_str_eq(v, role, strlen(role));
}

int fw_teach_env_hints(struct fw_mpv rec, size_t max_chars, struct fw_teach_hints *hs,
		       char *err, size_t errlen)
{
	struct fw_mpv turns, v, g, x;
	struct fw_mp_iter it;
	size_t n0 = hs->n;
	int last_asst = -1, idx = 0, prev_asst = -1;

	if (fw_mp_type(rec) != FW_MP_MAP) {
		fw_seterr(err, errlen, "record is not a map");
		return -1;
	}
	if (!max_chars)
		max_chars = 400;
	if (fw_mp_get(rec, "turns", &turns) != 1 || fw_mp_iter_init(&it, turns) < 0)
		return 0;
	/* failed commands: on the assistant turn that issued them */
	while (fw_mp_iter_next(&it, &v) == 1) {
		int64_t ex;

		if (is_role(v, "assistant")) {
			last_asst = prev_asst = idx;
		} else if (is_role(v, "tool") && fw_mp_get(v, "exit", &x) == 1 &&
			   !fw_mp_int(x, &ex) && ex != 0 && prev_asst >= 0) {
			const char *s;
			size_t n;

			if (fw_mp_get(v, "text", &x) != 1)
				x = (struct fw_mpv){ 0 };
			str_or_empty(x, &s, &n);
			if (add_fmt(hs, prev_asst, max_chars, "the command failed (exit %lld): %.*s",
				    (long long)ex, (int)(n > max_chars ? max_chars : n), s))
				goto oom;
		}
		idx++;
	}
	if (last_asst < 0)
		return (int)(hs->n - n0);
	if (fw_mp_get(rec, "grade", &g) == 1 && fw_mp_type(g) == FW_MP_MAP) {
		struct fw_mpv k, st;
		const char *reason = NULL;
		size_t rn = 0;
		int failed = 0;

		if (fw_mp_get(g, "reason", &x) == 1)
			str_or_empty(x, &reason, &rn);
		if (fw_mp_get(g, "tests", &x) == 1 && fw_mp_iter_init(&it, x) >= 0) {
			while (fw_mp_iter_next(&it, &k) == 1 && fw_mp_iter_next(&it, &st) == 1) {
				const char *ks, *ss;
				size_t kn, sn;

				str_or_empty(k, &ks, &kn);
				str_or_empty(st, &ss, &sn);
				if ((sn == 4 && !memcmp(ss, "pass", 4)) ||
				    (sn == 5 && !memcmp(ss, "xfail", 5)) || (sn == 4 && !memcmp(ss, "skip", 4)))
					continue;
				failed++;
				/* the test's own message says what the code did; the
				 * reason's counts only that it failed */
				const char *ms = NULL;
				size_t mn = 0;
				struct fw_mpv msgs, mv;

				if (fw_mp_get(g, "messages", &msgs) == 1 &&
				    fw_mp_map_get(msgs, ks, kn, &mv) == 1)
					str_or_empty(mv, &ms, &mn);
				if (mn ? add_fmt(hs, last_asst, max_chars, "test %.*s: %.*s: %.*s", (int)kn,
						 ks, (int)sn, ss, (int)mn, ms)
				       : add_fmt(hs, last_asst, max_chars, "test %.*s: %.*s (%.*s)", (int)kn,
						 ks, (int)sn, ss, (int)rn, reason))
					goto oom;
			}
		}
		if (fw_mp_get(g, "hacks", &x) == 1 && fw_mp_iter_init(&it, x) >= 0) {
			while (fw_mp_iter_next(&it, &v) == 1) {
				const char *ns = "", *ds = "";
				size_t nn = 0, dn = 0;

				if (fw_mp_get(v, "name", &k) == 1)
					str_or_empty(k, &ns, &nn);
				if (fw_mp_get(v, "detail", &k) == 1)
					str_or_empty(k, &ds, &dn);
				if (add_fmt(hs, last_asst, max_chars, "hack %.*s: %.*s", (int)nn, ns, (int)dn, ds))
					goto oom;
			}
		}
		/* tests that never ran: the reason says why */
		if (!failed && rn && fw_mp_get(g, "resolved", &x) == 1) {
			int res = 1;

			if (!fw_mp_bool(x, &res) && !res &&
			    add_fmt(hs, last_asst, max_chars, "not resolved: %.*s", (int)rn, reason))
				goto oom;
		}
	}
	if (fw_mp_get(rec, "events", &x) == 1 && fw_mp_iter_init(&it, x) >= 0) {
		while (fw_mp_iter_next(&it, &v) == 1) {
			struct fw_mpv k;
			const char *ds = "";
			size_t dn = 0;

			if (fw_mp_get(v, "kind", &k) != 1 || !fw_mp_str_eq(k, "net-denied", 10))
				continue;
			if (fw_mp_get(v, "detail", &k) == 1)
				str_or_empty(k, &ds, &dn);
			if (add_fmt(hs, last_asst, max_chars, "network access denied: %.*s", (int)dn, ds))
				goto oom;
		}
	}
	return (int)(hs->n - n0);
oom:
	fw_seterr(err, errlen, "out of memory");
	return -1;
}

/* Replaces ids with the encoding of "\nHint: " and as many whole lines of
 * hint (text ending in '\n') as fit in room tokens; when not even the first
 * line fits, the first room tokens of the full encoding.  Returns 0, or -1
 * out of memory. */
static int fit_hint(const struct fw_tok *t, const struct fw_buf *hint, long room,
		    struct fw_tok_ids *ids)
{
	struct fw_tok_ids best = { 0 }, try = { 0 };
	const char *s = (const char *)hint->p;
	size_t n = 0;

	for (;;) {
		const char *nl = memchr(s + n, '\n', hint->n - n);

		if (!nl)
			break;
		size_t m = (size_t)(nl - s) + 1;

		try.n = 0;
		if (fw_tok_encode(t, "\nHint: ", 7, 0, 0, &try) || fw_tok_encode(t, s, m, 0, 0, &try))
			goto oom;
		if ((long)try.n > room)
			break;
		struct fw_tok_ids x = best;

		best = try;
		try = x;
		n = m;
		if (n == hint->n)
			break;
	}
	if (n) {
		fw_tok_ids_release(ids);
		*ids = best;
		best = (struct fw_tok_ids){ 0 };
	} else if ((long)ids->n > room) {
		ids->n = room > 0 ? (size_t)room : 0;
	}
	fw_tok_ids_release(&best);
	fw_tok_ids_release(&try);
	return 0;
oom:
	fw_tok_ids_release(&best);
	fw_tok_ids_release(&try);
	return -1;
}

void fw_teach_topk_release(struct fw_teach_topk *tk)
{
	if (!tk)
		return;
	free(tk->ids);
	free(tk->logp);
	tk->ids = NULL;
	tk->logp = NULL;
	tk->n = tk->from = 0;
}

/* Room in tk for n policy tokens' top-k; tk->n = 0.  0, or -1 OOM. */
static int topk_alloc(struct fw_teach_topk *tk, long n)
{
	size_t c = (size_t)(n > 0 ? n : 1) * (size_t)tk->k;

	tk->n = tk->from = 0;
	if (!(tk->ids = malloc(sizeof(int32_t) * c)) || !(tk->logp = malloc(sizeof(float) * c))) {
		fw_teach_topk_release(tk);
		return -1;
	}
	return 0;
}

/* Scores as fw_teacher_score_from, with the scratch top-k (N * k) when
 * tk asks for it. */
static int score(struct fw_teacher *T, const int32_t *seq, long N, long P, float *logp,
		 const struct fw_teach_topk *tk, int32_t **sid, float **slp, char *err,
		 size_t errlen)
{
	if (!tk || tk->k <= 0)
		return fw_teacher_score_from(T, seq, N, P, logp, err, errlen);
	if (!(*sid = malloc(sizeof(int32_t) * (size_t)N * tk->k)) ||
	    !(*slp = malloc(sizeof(float) * (size_t)N * tk->k))) {
		fw_seterr(err, errlen, "out of memory");
		return -1;
	}
	return fw_teacher_score_topk(T, seq, N, P, logp, tk->k, *sid, *slp, err, errlen);
}

/* Policy token k's top-k from scratch row `row`. */
static void topk_put(struct fw_teach_topk *tk, long k, const int32_t *sid, const float *slp,
		     long row)
{
	memcpy(tk->ids + (size_t)k * tk->k, sid + (size_t)row * tk->k, sizeof(int32_t) * tk->k);
	memcpy(tk->logp + (size_t)k * tk->k, slp + (size_t)row * tk->k, sizeof(float) * tk->k);
}

int fw_teach_credit_fill(struct fw_teacher *T, const struct fw_tok *t, struct fw_mpv rec,
			 const struct fw_teach_hints *hs, double clip, float **adv,
			 long *nadv, struct fw_teach_topk *tk, char *err, size_t errlen)
{
	struct fw_mpv v, turns, turn;
	struct fw_mp_iter it;
	double *tk_ = NULL, *mk = NULL, *lp = NULL;
	long ntk, nmk, nlp = -1, npol = 0, first = -1;
	int asst = -1, idx = 0, rc = 1;
	struct fw_buf hint = { 0 };
	struct fw_tok_ids hid = { 0 };
	int32_t *seq = NULL, *sid = NULL;
	float *logp = NULL, *slp = NULL;

	*adv = NULL;
	*nadv = 0;
	if (tk)
		tk->n = tk->from = 0;
	if (fw_mp_get(rec, "tokens", &v) != 1 || (ntk = fw_mp_doubles(v, &tk_)) < 0) {
		fw_seterr(err, errlen, "no tokens");
		goto out;
	}
	if (fw_mp_get(rec, "mask", &v) != 1 || (nmk = fw_mp_doubles(v, &mk)) != ntk) {
		fw_seterr(err, errlen, "no mask matching tokens");
		goto out;
	}
	if (fw_mp_get(rec, "turns", &turns) == 1 && fw_mp_iter_init(&it, turns) >= 0)
		while (fw_mp_iter_next(&it, &turn) == 1) {
			if (is_role(turn, "assistant")) {
				asst = idx;
				if (fw_mp_get(turn, "logprobs", &v) == 1)
					nlp = fw_mp_doubles(v, &lp);
				break;
			}
			idx++;
		}
	for (long i = 0; i < ntk; i++)
		if (mk[i] != 0) {
			npol++;
			if (first < 0)
				first = i;
		}
	if (asst < 0 || nlp < 0) {
		fw_seterr(err, errlen, "no log-probs");
		goto out;
	}
	if (nlp < npol) {
		fw_seterr(err, errlen, "%ld log-probs for %ld policy tokens", nlp, npol);
		goto out;
	}
	rc = -1;
	if (!(*adv = calloc((size_t)(npol ? npol : 1), sizeof(float)))) {
		fw_seterr(err, errlen, "out of memory");
		goto out;
	}
	*nadv = npol;
	for (size_t i = 0; i < hs->n; i++)
		if (hs->h[i].turn == asst &&
		    fw_buf_printf(&hint, "%s%s", hint.n ? "\n" : "", hs->h[i].text)) {
			fw_seterr(err, errlen, "out of memory");
			goto out;
		}
	if (!hint.n || first <= 0) {
		rc = 0;
		goto out;
	}
	if (fw_buf_puts(&hint, "\n") ||
	    fw_tok_encode(t, "\nHint: ", 7, 0, 0, &hid) ||
	    fw_tok_encode(t, hint.p, hint.n, 0, 0, &hid)) {
		fw_seterr(err, errlen, "out of memory");
		goto out;
	}
	long N = ntk + (long)hid.n, C = ntk - first;
	int max_pos = fw_teacher_max_pos(T);
	/* what the teacher reads: BOS (b of them), the last p prompt tokens,
	 * h hint tokens, the completion */
	long b = 0, p = first, h = (long)hid.n;

	if (max_pos && N > max_pos) {
		if (C >= max_pos) {
			rc = 1;
			fw_seterr(err, errlen, "%ld-token completion, more than the model's %d",
			       C, max_pos);
			goto out;
		}
		b = fw_tok_bos(t) >= 0 && (int32_t)tk_[0] == fw_tok_bos(t);
		long room = max_pos - C - b; /* for prompt and hint */

		p = first - b;
		if (p + h > room)
			p = room > h ? room - h : 0;
		if (h > room && fit_hint(t, &hint, room, &hid)) {
			fw_seterr(err, errlen, "out of memory");
			goto out;
		}
		h = (long)hid.n;
		/* what a shortened hint leaves goes back to the prompt */
		if (p + h < room)
			p = first - b < room - h ? first - b : room - h;
		N = b + p + h + C;
	}
	seq = malloc(sizeof(int32_t) * (size_t)(N ? N : 1));
	logp = malloc(sizeof(float) * (size_t)(N ? N : 1));
	if (!seq || !logp) {
		fw_seterr(err, errlen, "out of memory");
		goto out;
	}
	long j = 0;
	for (long i = 0; i < b; i++)
		seq[j++] = (int32_t)tk_[i];
	for (long i = first - p; i < first; i++)
		seq[j++] = (int32_t)tk_[i];
	for (long i = 0; i < h; i++)
		seq[j++] = hid.ids[i];
	for (long i = first; i < ntk; i++)
		seq[j++] = (int32_t)tk_[i];
	/* the prompt before the hint is the rollout's own: shared, up to the
	 * log-prob of the first completion token */
	long P = b + p < b + p + h - 1 ? b + p : b + p + h - 1;

	if (N < 2) {
		rc = 1;
		fw_seterr(err, errlen, "nothing to score");
		goto out;
	}
	if (score(T, seq, N, P, logp, tk, &sid, &slp, err, errlen))
		goto out;
	if (tk && tk->k > 0 && topk_alloc(tk, npol)) {
		fw_seterr(err, errlen, "out of memory");
		goto out;
	}
	/* token i of the rollout sits at i + shift in seq; its log-prob is at
	 * the position before it */
	long k = 0, shift = b + p + h - first;
	for (long i = first; i < ntk; i++) {
		if (mk[i] == 0)
			continue;
		double a = logp[i + shift - 1] - lp[k];

		if (a > clip)
			a = clip;
		if (a < -clip)
			a = -clip;
		if (tk && tk->k > 0)
			topk_put(tk, k, sid, slp, i + shift - 1);
		(*adv)[k++] = (float)a;
	}
	if (tk && tk->k > 0)
		tk->n = k;
	rc = 0;
out:
	if (rc) {
		free(*adv);
		*adv = NULL;
		*nadv = 0;
		fw_teach_topk_release(tk);
	}
	free(sid);
	free(slp);
	free(tk_);
	free(mk);
	free(lp);
	free(seq);
	free(logp);
	fw_buf_free(&hint);
	fw_tok_ids_release(&hid);
	return rc;
}

int fw_teach_credit_agent(struct fw_teacher *T, const struct fw_tok *t, struct fw_mpv rec,
			  const struct fw_teach_hints *hs, double clip, float **adv,
			  long *nadv, struct fw_teach_topk *tk, char *err, size_t errlen)
{
	struct fw_mpv turns, v, x;
	struct fw_mp_iter it;
	int64_t nturns;
	long *cnt = NULL, nasst = 0, npol = 0, first_h = -1, P = 0;
	int64_t h0 = -1;
	const uint8_t *t0 = NULL, *th = NULL;
	double *lp = NULL;
	struct fw_buf nt = { 0 }, hint = { 0 }, pb = { 0 };
	struct fw_tok_ids ids = { 0 }, pre = { 0 };
	float *logp = NULL, *slp = NULL;
	int32_t *sid = NULL;
	int rc = 1, tmpl;
	msgpack_packer pk;

	*adv = NULL;
	*nadv = 0;
	if (tk)
		tk->n = tk->from = 0;
	if (fw_mp_get(rec, "turns", &turns) != 1 || (nturns = fw_mp_iter_init(&it, turns)) < 0) {
		fw_seterr(err, errlen, "no turns");
		return 1;
	}
	if (!(cnt = calloc((size_t)nturns + 1, sizeof *cnt)))
		goto oom;
	/* the assistant turns' tokens and log-probs */
	while (fw_mp_iter_next(&it, &v) == 1) {
		double *l = NULL;
		long nl, ntk;
		struct fw_mp_iter ti;

		if (!is_role(v, "assistant"))
			continue;
		if (fw_mp_get(v, "tokens", &x) != 1 || (ntk = (long)fw_mp_iter_init(&ti, x)) < 0 ||
		    fw_mp_get(v, "logprobs", &x) != 1 || (nl = fw_mp_doubles(x, &l)) != ntk) {
			free(l);
			fw_seterr(err, errlen, "no log-probs");
			goto out;
		}
		double *nlp = realloc(lp, sizeof(double) * (size_t)(npol + nl + 1));

		if (!nlp) {
			free(l);
			goto oom;
		}
		lp = nlp;
		memcpy(lp + npol, l, sizeof(double) * (size_t)nl);
		free(l);
		npol += nl;
		cnt[nasst++] = ntk;
	}
	if (!nasst) {
		fw_seterr(err, errlen, "no assistant turns");
		goto out;
	}
	rc = -1;
	if (!(*adv = calloc((size_t)(npol ? npol : 1), sizeof(float))))
		goto oom;
	*nadv = npol;
	/* the turns again, a hint turn before each hinted assistant turn */
	fw_buf_packer(&pk, &nt);
	long nh = 0, k = 0;

	for (size_t i = 0; i < hs->n; i++)
		if (hs->h[i].turn >= 0 && hs->h[i].turn < nturns)
			nh++;
	if (!nh) {
		rc = 0;
		goto out;
	}
	/* one hint turn per distinct hinted turn: count them */
	nh = 0;
	for (int64_t i = 0; i < nturns; i++)
		for (size_t j = 0; j < hs->n; j++)
			if (hs->h[j].turn == i) {
				nh++;
				break;
			}
	if (msgpack_pack_array(&pk, (size_t)(nturns + nh)))
		goto oom;
	fw_mp_iter_init(&it, turns);
	for (int64_t i = 0; fw_mp_iter_next(&it, &v) == 1; i++) {
		int asst = is_role(v, "assistant");

		if (!i)
			t0 = v.p;

		fw_buf_reset(&hint);
		for (size_t j = 0; j < hs->n; j++)
			if (hs->h[j].turn == i &&
			    fw_buf_printf(&hint, "%s%s", hint.n ? "\n" : "Hint: ", hs->h[j].text))
				goto oom;
		if (hint.n) {
			if (h0 < 0) {
				h0 = i;
				th = v.p;
			}
			if (asst && first_h < 0)
				first_h = k;
			if (msgpack_pack_map(&pk, 2) || msgpack_pack_str(&pk, 4) ||
			    msgpack_pack_str_body(&pk, "role", 4) || msgpack_pack_str(&pk, 4) ||
			    msgpack_pack_str_body(&pk, "user", 4) || msgpack_pack_str(&pk, 4) ||
			    msgpack_pack_str_body(&pk, "text", 4) || msgpack_pack_str(&pk, hint.n) ||
			    msgpack_pack_str_body(&pk, hint.p, hint.n))
				goto oom;
		}
		if (fw_buf_append(&nt, v.p, v.n))
			goto oom;
		k += asst;
	}
	if (first_h < 0) {
		rc = 0;
		goto out;
	}
	if ((tmpl = fw_chat_detect(t)) < 0) {
		rc = 1;
		fw_seterr(err, errlen, "the tokenizer has no chat template tokens");
		goto out;
	}
	struct fw_mpv ntv = { nt.p, nt.n };

	if (fw_chat_render_mp(t, (enum fw_chat_template)tmpl, &ntv, 0, &ids, err, errlen))
		goto out;
	long N = (long)ids.n;
	int max_pos = fw_teacher_max_pos(T);

	if (max_pos && N > max_pos) {
		rc = 1;
		fw_seterr(err, errlen, "%ld tokens with the hints, more than the model's %d", N, max_pos);
		goto out;
	}
	if (N < 2 || !(logp = malloc(sizeof(float) * (size_t)N))) {
		if (N < 2) {
			rc = 1;
			fw_seterr(err, errlen, "nothing to score");
			goto out;
		}
		goto oom;
	}
	/* the unchanged prefix: the turns before the first hint rendered, as
	 * far as the hinted rendering starts with them */
	if (h0 > 0) {
		msgpack_packer pp;

		fw_buf_packer(&pp, &pb);
		if (msgpack_pack_array(&pp, (size_t)h0) || fw_buf_append(&pb, t0, (size_t)(th - t0)))
			goto oom;
		struct fw_mpv pv = { pb.p, pb.n };

		if (fw_chat_render_mp(t, (enum fw_chat_template)tmpl, &pv, 0, &pre, err, errlen))
			goto out;
		while (P < (long)pre.n && P < N && pre.ids[P] == ids.ids[P])
			P++;
	}
	/* and never past the first log-prob that counts: the one before the
	 * first token of the first hinted assistant turn */
	ids.mask[0] = 0;
	for (long i = 1, r = -1; i < N; i++)
		if (ids.mask[i] && !ids.mask[i - 1] && ++r == first_h) {
			if (P > i - 1)
				P = i - 1;
			break;
		}
	if (score(T, ids.ids, N, P, logp, tk, &sid, &slp, err, errlen))
		goto out;
	long from = 0;

	for (long r = 0; r < first_h; r++)
		from += cnt[r];
	if (tk && tk->k > 0) {
		if (topk_alloc(tk, npol - from))
			goto oom;
		tk->from = from;
		tk->n = npol - from;
	}
	/* runs of mask 1 are the assistant turns in order; the first cnt[r]
	 * tokens of run r are the turn's own */
	long run = -1, j = 0, used = 0;
	int inrun = 0;

	ids.mask[0] = 0;
	for (long i = 0; i < N; i++) {
		if (!ids.mask[i]) {
			inrun = 0;
			continue;
		}
		if (!inrun) {
			inrun = 1;
			if (run >= 0)
				used += cnt[run];
			run++;
			j = 0;
		}
		if (run >= nasst || j >= cnt[run]) {
			j++;
			continue;
		}
		if (run >= first_h) {
			double a = logp[i - 1] - lp[used + j];

			(*adv)[used + j] = (float)(a > clip ? clip : a < -clip ? -clip : a);
			if (tk && tk->k > 0)
				topk_put(tk, used + j - from, sid, slp, i - 1);
		}
		j++;
	}
	if (run + 1 != nasst) {
		rc = 1;
		fw_seterr(err, errlen, "the rendered turns do not match the assistant turns");
		goto out;
	}
	rc = 0;
	goto out;
oom:
	rc = -1;
	fw_seterr(err, errlen, "out of memory");
out:
	if (rc) {
		free(*adv);
		*adv = NULL;
		*nadv = 0;
		fw_teach_topk_release(tk);
	}
	free(sid);
	free(slp);
	free(cnt);
	free(lp);
	free(logp);
	fw_buf_free(&nt);
	fw_buf_free(&hint);
	fw_buf_free(&pb);
	fw_tok_ids_release(&ids);
	fw_tok_ids_release(&pre);
	return rc;
}

static int pack_s(msgpack_packer *pk, const char *s)
{
	size_t n = strlen(s);

	return msgpack_pack_str(pk, n) || msgpack_pack_str_body(pk, s, n);
}

/* pack_s() of a message that may quote a server's bytes: made valid UTF-8,
 * as every record string must be. */
static int pack_msg(msgpack_packer *pk, const char *s)
{
	size_t n;
	char *f = fw_utf8_fix(s, strlen(s), &n);
	int rc;

	if (!f)
		return -1;
	rc = msgpack_pack_str(pk, n) || msgpack_pack_str_body(pk, f, n);
	free(f);
	return rc;
}

int fw_teach_pack(struct fw_buf *out, const struct fw_teach_hints *hs, const float *adv,
		  long nadv, const struct fw_teach_topk *tk, const char *adv_reason,
		  const char *teacher, const char *hint_error)
{
	msgpack_packer pk;
	int bad = 0, has_tk = adv && tk && tk->k > 0 && tk->n > 0;

	fw_buf_packer(&pk, out);
	bad |= msgpack_pack_map(&pk, 1 + (adv || adv_reason) + has_tk + !!teacher + !!hint_error);
	bad |= pack_s(&pk, "hints");
	bad |= msgpack_pack_array(&pk, hs ? hs->n : 0);
	for (size_t i = 0; hs && i < hs->n; i++) {
		bad |= msgpack_pack_map(&pk, 3);
		bad |= pack_s(&pk, "turn");
		bad |= msgpack_pack_int(&pk, hs->h[i].turn);
		bad |= pack_s(&pk, "text");
		bad |= pack_s(&pk, hs->h[i].text);
		bad |= pack_s(&pk, "source");
		bad |= pack_s(&pk, hs->h[i].source);
	}
	if (adv) {
		bad |= pack_s(&pk, "adv");
		bad |= msgpack_pack_array(&pk, (size_t)nadv);
		for (long i = 0; i < nadv; i++)
			bad |= msgpack_pack_float(&pk, adv[i]);
	} else if (adv_reason) {
		bad |= pack_s(&pk, "adv_omitted");
		bad |= pack_msg(&pk, adv_reason);
	}
	if (has_tk) {
		size_t n = (size_t)tk->n * tk->k;

		bad |= pack_s(&pk, "topk");
		bad |= msgpack_pack_map(&pk, 4);
		bad |= pack_s(&pk, "k");
		bad |= msgpack_pack_int(&pk, tk->k);
		bad |= pack_s(&pk, "from");
		bad |= msgpack_pack_int64(&pk, tk->from);
		bad |= pack_s(&pk, "ids");
		bad |= msgpack_pack_array(&pk, n);
		for (size_t i = 0; i < n; i++)
			bad |= msgpack_pack_int32(&pk, tk->ids[i]);
		bad |= pack_s(&pk, "logprobs");
		bad |= msgpack_pack_array(&pk, n);
		for (size_t i = 0; i < n; i++)
			bad |= msgpack_pack_float(&pk, tk->logp[i]);
	}
	if (teacher) {
		bad |= pack_s(&pk, "teacher");
		bad |= pack_msg(&pk, teacher);
	}
	if (hint_error) {
		bad |= pack_s(&pk, "hint_error");
		bad |= pack_msg(&pk, hint_error);
	}
	return bad ? -1 : 0;
}

/* ---- rules ------------------------------------------------------------------ */

enum rule_kind { R_MATCH, R_NEVER, R_EDITED, R_REPEATED, R_STOP, R_LONGER };

struct rule {
	enum rule_kind kind;
	pcre2_code *re;  /* match, never, edited */
	long n;          /* repeated, longer */
	char *word;      /* stop */
	char *text;
};

struct fw_teach_rules {
	struct rule *r;
	size_t n;
};

void fw_teach_rules_free(struct fw_teach_rules *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++) {
		pcre2_code_free(r->r[i].re);
		free(r->r[i].word);
		free(r->r[i].text);
	}
	free(r->r);
	free(r);
}

static char *dupn(const char *s, size_t n)
{
	char *p = malloc(n + 1);

	if (p) {
		memcpy(p, s, n);
		p[n] = 0;
	}
	return p;
}

struct fw_teach_rules *fw_teach_rules_parse(const char *text, size_t len, const char *name,
					    char *err, size_t errlen)
{
	static const char *kinds[] = { "match", "never", "edited", "repeated", "stop", "longer" };
	struct fw_teach_rules *R = calloc(1, sizeof *R);
	const char *p = text, *end = text + len;
	int line = 0;

	if (!R)
		goto oom;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p)), *e = nl ? nl : end;
		const char *s = p, *sep;
		size_t kl;
		int k;
		struct rule ru = { 0 };

		line++;
		p = nl ? nl + 1 : end;
		while (s < e && (*s == ' ' || *s == '\t'))
			s++;
		if (s == e || *s == '#' || (e - s == 1 && *s == '\r'))
			continue;
		for (kl = 0; s + kl < e && s[kl] != ' ' && s[kl] != ':'; kl++)
			;
		for (k = 0; k < 6; k++)
			if (strlen(kinds[k]) == kl && !memcmp(s, kinds[k], kl))
				break;
		if (k == 6) {
			fw_seterr(err, errlen, "%s:%d: unknown rule kind '%.*s'", name, line, (int)kl, s);
			goto fail;
		}
		s += kl;
		while (s < e && *s == ' ')
			s++;
		sep = NULL;
		for (const char *q = s; q + 1 < e; q++)
			if (q[0] == ':' && q[1] == ' ') {
				sep = q;
				break;
			}
		if (!sep) {
			fw_seterr(err, errlen, "%s:%d: want 'KIND ARG: HINT'", name, line);
			goto fail;
		}
		const char *arg = s, *ht = sep + 2;
		size_t al = (size_t)(sep - s), hl = (size_t)(e - ht);

		while (hl && (ht[hl - 1] == '\r' || ht[hl - 1] == ' '))
			hl--;
		if (!al || !hl) {
			fw_seterr(err, errlen, "%s:%d: %s", name, line, !al ? "missing argument" : "empty hint");
			goto fail;
		}
		ru.kind = (enum rule_kind)k;
		if (k == R_MATCH || k == R_NEVER || k == R_EDITED) {
			int ec;
			PCRE2_SIZE eo;

			ru.re = pcre2_compile((PCRE2_SPTR)arg, al, PCRE2_UTF, &ec, &eo, NULL);
			if (!ru.re) {
				PCRE2_UCHAR msg[120];

				pcre2_get_error_message(ec, msg, sizeof msg);
				fw_seterr(err, errlen, "%s:%d: regex at %zu: %s", name, line, (size_t)eo,
				       (char *)msg);
				goto fail;
			}
		} else if (k == R_STOP) {
			if (!(ru.word = dupn(arg, al)))
				goto oom;
		} else {
			char *ep, *a = dupn(arg, al);

			if (!a)
				goto oom;
			ru.n = strtol(a, &ep, 10);
			if (*ep || ru.n < 1) {
				fw_seterr(err, errlen, "%s:%d: want a positive count, not '%s'", name, line, a);
				free(a);
				goto fail;
			}
			free(a);
		}
		if (!(ru.text = dupn(ht, hl))) {
			pcre2_code_free(ru.re);
			free(ru.word);
			goto oom;
		}
		struct rule *nr = realloc(R->r, (R->n + 1) * sizeof *nr);

		if (!nr) {
			pcre2_code_free(ru.re);
			free(ru.word);
			free(ru.text);
			goto oom;
		}
		R->r = nr;
		R->r[R->n++] = ru;
		continue;
fail:
		pcre2_code_free(ru.re);
		fw_teach_rules_free(R);
		return NULL;
	}
	return R;
oom:
	fw_seterr(err, errlen, "out of memory");
	fw_teach_rules_free(R);
	return NULL;
}

struct fw_teach_rules *fw_teach_rules_load(const char *path, char *err, size_t errlen)
{
	struct fw_teach_rules *r;
	size_t n;
	char *s = fw_read_file(path, 0, &n);

	if (!s) {
		fw_seterr(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	r = fw_teach_rules_parse(s, n, path, err, errlen);
	free(s);
	return r;
}

static int re_match(pcre2_code *re, const char *s, size_t n)
{
	pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
	int rc;

	if (!md)
		return -1;
	rc = pcre2_match(re, (PCRE2_SPTR)s, n, 0, 0, md, NULL);
	pcre2_match_data_free(md);
	return rc >= 0;
}

int fw_teach_rule_hints(const struct fw_teach_rules *R, struct fw_mpv rec,
			struct fw_teach_hints *hs, char *err, size_t errlen)
{
	struct fw_mpv turns, v, x;
	struct fw_mp_iter it;
	size_t n0 = hs->n;
	int last = -1;

	if (fw_mp_get(rec, "turns", &turns) != 1 || fw_mp_iter_init(&it, turns) < 0)
		return 0;
	for (int i = 0; fw_mp_iter_next(&it, &v) == 1; i++)
		if (is_role(v, "assistant"))
			last = i;
	if (last < 0)
		return 0;
	for (size_t ri = 0; ri < R->n; ri++) {
		const struct rule *ru = &R->r[ri];
		const char *s;
		size_t n;

		switch (ru->kind) {
		case R_MATCH:
		case R_LONGER:
		case R_NEVER:
		case R_REPEATED: {
			int seen = 0, idx = 0, hit = -1;
			struct fw_mpv prev = { 0 };

			fw_mp_iter_init(&it, turns);
			while (fw_mp_iter_next(&it, &v) == 1) {
				int i = idx++;

				if (!is_role(v, "assistant"))
					continue;
				if (fw_mp_get(v, "text", &x) != 1 || fw_mp_str(x, &s, &n))
					s = "", n = 0;
				if (ru->kind == R_MATCH || ru->kind == R_NEVER) {
					int m = re_match(ru->re, s, n);

					if (m < 0)
						goto oom;
					if (m && ru->kind == R_NEVER) {
						seen = 1;
						break;
					}
					if (m && add_hint(hs, i, "rules", ru->text, strlen(ru->text), SIZE_MAX))
						goto oom;
				} else if (ru->kind == R_LONGER) {
					long len = (long)n;
					struct fw_mpv tk;
					struct fw_mp_iter ti;

					if (fw_mp_get(v, "tokens", &tk) == 1)
						len = (long)fw_mp_iter_init(&ti, tk);
					if (len > ru->n &&
					    add_hint(hs, i, "rules", ru->text, strlen(ru->text), SIZE_MAX))
						goto oom;
				} else {
					/* repeated: count replies equal to an earlier
					 * one whose command failed (the next turn a
					 * tool with a non-zero exit) */
					struct fw_mp_iter j = it;
					struct fw_mpv t2, e;
					int64_t ex = 0;

					if (fw_mp_iter_next(&j, &t2) == 1 && is_role(t2, "tool") &&
					    fw_mp_get(t2, "exit", &e) == 1)
						fw_mp_int(e, &ex);
					if (!ex)
						continue;
					if (prev.p && prev.n == n && !memcmp(prev.p, s, n)) {
						seen++;
					} else {
						prev = (struct fw_mpv){ (const uint8_t *)s, n };
						seen = 1;
					}
					if (seen == ru->n && hit < 0)
						hit = i;
				}
			}
			if (ru->kind == R_NEVER && !seen &&
			    add_hint(hs, last, "rules", ru->text, strlen(ru->text), SIZE_MAX))
				goto oom;
			if (ru->kind == R_REPEATED && hit >= 0 &&
			    add_hint(hs, hit, "rules", ru->text, strlen(ru->text), SIZE_MAX))
				goto oom;
			break;
		}
		case R_STOP:
			if (fw_mp_get(rec, "stop", &x) == 1 && fw_mp_str_eq(x, ru->word, strlen(ru->word)) &&
			    add_hint(hs, last, "rules", ru->text, strlen(ru->text), SIZE_MAX))
				goto oom;
			break;
		case R_EDITED: {
			const char *p, *e, *q;

			if (fw_mp_get(rec, "patch", &x) != 1 || fw_mp_str(x, &p, &n))
				break;
			e = p + n;
			for (; p < e; p = q ? q + 1 : e) {
				q = memchr(p, '\n', (size_t)(e - p));
				size_t ln = (size_t)((q ? q : e) - p);
				int m;

				if (ln < 13 || memcmp(p, "diff --git a/", 13))
					continue;
				m = re_match(ru->re, p + 13, ln - 13);
				if (m < 0)
					goto oom;
				if (m) {
					if (add_hint(hs, last, "rules", ru->text, strlen(ru->text), SIZE_MAX))
						goto oom;
					break;
				}
			}
			break;
		}
		}
	}
	return (int)(hs->n - n0);
oom:
	fw_seterr(err, errlen, "out of memory");
	return -1;
}

/* ---- demo ------------------------------------------------------------------- */

int fw_teach_group_key(struct fw_mpv rec, uint64_t *key)
{
	struct fw_mpv v, t;
	const char *s;
	size_t n;

	if (fw_mp_get(rec, "group", &v) == 1) {
		*key = fw_hash64(v.p, v.n);
		return 1;
	}
	if (fw_mp_get(rec, "task", &t) == 1) {
		if ((fw_mp_get(t, "id", &v) == 1 && fw_mp_str(v, &s, &n) == 0) ||
		    fw_mp_str(t, &s, &n) == 0) {
			*key = fw_hash64(s, n);
			return 1;
		}
	}
	return 0;
}

int fw_teach_resolved(struct fw_mpv rec)
{
	struct fw_mpv g, v;
	int b = 0;

	return fw_mp_get(rec, "grade", &g) == 1 && fw_mp_get(g, "resolved", &v) == 1 &&
	       !fw_mp_bool(v, &b) && b;
}

/* Index of the last assistant turn of rec and its view, or -1. */
static int last_assistant(struct fw_mpv rec, struct fw_mpv *turn)
{
	struct fw_mpv turns, v;
	struct fw_mp_iter it;
	int last = -1;

	if (fw_mp_get(rec, "turns", &turns) != 1 || fw_mp_iter_init(&it, turns) < 0)
		return -1;
	for (int i = 0; fw_mp_iter_next(&it, &v) == 1; i++)
		if (is_role(v, "assistant")) {
			last = i;
			if (turn)
				*turn = v;
		}
	return last;
}

int fw_teach_demo_hint(struct fw_mpv rec, struct fw_mpv demo, size_t max_chars,
		       struct fw_teach_hints *hs, char *err, size_t errlen)
{
	static const char head[] = "a correct solution looked like this:\n";
	struct fw_mpv x, dt;
	const char *s = NULL;
	size_t n = 0;
	int at;

	if (fw_teach_resolved(rec) || (at = last_assistant(rec, NULL)) < 0)
		return 0;
	if (fw_mp_get(demo, "patch", &x) == 1)
		str_or_empty(x, &s, &n);
	if (!n && last_assistant(demo, &dt) >= 0 && fw_mp_get(dt, "text", &x) == 1)
		str_or_empty(x, &s, &n);
	if (!n)
		return 0;
	char *t = malloc(sizeof head + n);

	if (!t) {
		fw_seterr(err, errlen, "out of memory");
		return -1;
	}
	memcpy(t, head, sizeof head - 1);
	size_t m = sizeof head - 1;
	/* a diff is shown as the lines it adds, without the '+': a whole diff
	 * is mostly headers and context, which say nothing about the fix and
	 * crowd the model's positions */
	if (n > 5 && (!memcmp(s, "diff ", 5) || !memcmp(s, "--- ", 4)))
		for (size_t i = 0; i < n;) {
			const char *nl = memchr(s + i, '\n', n - i);
			size_t e = nl ? (size_t)(nl - s) : n;

			if (s[i] == '+' && !(e - i >= 4 && !memcmp(s + i, "+++ ", 4))) {
				memcpy(t + m, s + i + 1, e - i - 1);
				m += e - i - 1;
				t[m++] = '\n';
			}
			i = e + 1;
		}
	if (m == sizeof head - 1) { /* not a diff, or one that only removes */
		memcpy(t + m, s, n);
		m += n;
	}
	int rc = add_hint(hs, at, "demo", t, m, max_chars ? max_chars : 2000);

	free(t);
	if (rc) {
		fw_seterr(err, errlen, "out of memory");
		return -1;
	}
	return 1;
}

/* The ids of rec's policy tokens (tokens where mask is 1) into a malloc'd
 * array; their number, or -1 (no tokens and mask, out of memory). */
static long policy_ids(struct fw_mpv rec, double **ids)
{
	struct fw_mpv v;
	double *tk = NULL, *mk = NULL;
	long ntk, k = 0;

	*ids = NULL;
	if (fw_mp_get(rec, "tokens", &v) != 1 || (ntk = fw_mp_doubles(v, &tk)) < 0)
		return -1;
	if (fw_mp_get(rec, "mask", &v) != 1 || fw_mp_doubles(v, &mk) != ntk) {
		free(tk);
		free(mk);
		return -1;
	}
	for (long i = 0; i < ntk; i++)
		if (mk[i] != 0)
			tk[k++] = tk[i];
	free(mk);
	*ids = tk;
	return k;
}

int fw_teach_diff_mask(struct fw_mpv rec, struct fw_mpv demo, unsigned char **differ,
		       long *n, char *err, size_t errlen)
{
	double *a = NULL, *b = NULL;
	long na, nb;
	int32_t *L = NULL;
	int rc = 1;

	*differ = NULL;
	*n = 0;
	if ((na = policy_ids(rec, &a)) < 0 || (nb = policy_ids(demo, &b)) < 0) {
		fw_seterr(err, errlen, "not a fill rollout with tokens and mask");
		goto out;
	}
	if ((na + 1) * (nb + 1) > 4L << 20) {
		fw_seterr(err, errlen, "%ld and %ld policy tokens: too many to align", na, nb);
		goto out;
	}
	rc = -1;
	/* L[i][j]: the longest common subsequence of a[i..] and b[j..] */
	L = calloc((size_t)((na + 1) * (nb + 1)), sizeof *L);
	*differ = malloc((size_t)(na ? na : 1));
	if (!L || !*differ) {
		fw_seterr(err, errlen, "out of memory");
		goto out;
	}
	for (long i = na - 1; i >= 0; i--)
		for (long j = nb - 1; j >= 0; j--) {
			int32_t x = L[(i + 1) * (nb + 1) + j], y = L[i * (nb + 1) + j + 1];

			L[i * (nb + 1) + j] = a[i] == b[j] ? L[(i + 1) * (nb + 1) + j + 1] + 1
							   : x > y ? x : y;
		}
	/* walk one longest alignment, taking a match as early as it comes */
	long i = 0, j = 0;

	while (i < na) {
		if (j < nb && a[i] == b[j] &&
		    L[i * (nb + 1) + j] == L[(i + 1) * (nb + 1) + j + 1] + 1) {
			(*differ)[i++] = 0;
			j++;
		} else if (j < nb && L[i * (nb + 1) + j + 1] >= L[(i + 1) * (nb + 1) + j]) {
			j++;
		} else {
			(*differ)[i++] = 1;
		}
	}
	*n = na;
	rc = 0;
out:
	if (rc) {
		free(*differ);
		*differ = NULL;
	}
	free(a);
	free(b);
	free(L);
	return rc;
}
