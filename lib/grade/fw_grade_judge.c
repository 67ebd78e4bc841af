/*
 * fw_grade_judge.c — the judge's pass over graded rollouts (see
 * fw_grade_judge.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_base.h"
#include "fw_grade_judge.h"
#include "fw_judge.h"
#include "fw_model.h"
#include "fw_mp.h"
#include "fw_stream.h"
#include "fw_tok.h"

/* put for jg->distil: one example to the writer arg. */
static int put_example(void *arg, const void *p, size_t n, char *err, size_t errlen)
{
	struct fw_writer *w = arg;
	if (fw_writer_put(w, p, n) == 0)
		return 0;
	fw_seterr(err, errlen, "--distil: %s", fw_writer_error(w));
	return -1;
}

int fw_grade_judging_open(struct fw_grade_judging *jg, const char *spec, const char *tok,
			  double timeout_s, const char *rubric, const char *student, char *err,
			  size_t errlen)
{
	if (!(jg->rubric = fw_rubric_load(rubric, err, errlen)) ||
	    !(jg->judge = fw_judge_open(spec, tok, timeout_s, 2, err, errlen)))
		return -1;
	if (!(jg->verdicts = calloc((size_t)jg->rubric->n, sizeof *jg->verdicts))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (int i = 0; jg->mix && i < jg->mix->n; i++)
		if (fw_rubric_find(jg->rubric, jg->mix->crit[i]) < 0) {
			snprintf(err, errlen, "criterion '%s' is not in %s", jg->mix->crit[i],
				 rubric);
			return -2;
		}
	if (student) {
		char path[4096];
		struct fw_config cfg;
		snprintf(path, sizeof path, "%s/tokenizer.json", student);
		if (!(jg->stok = fw_tok_load(path, err, errlen)))
			return -3;
		snprintf(path, sizeof path, "%s/config.json", student);
		if (fw_config_load(&cfg, path, err, errlen) < 0)
			return -3;
		jg->smax_pos = cfg.max_pos;
	}
	if (jg->distil) {
		if (!(jg->dw = fw_writer_open(jg->distil, jg->distil_level, err, errlen)))
			return -3;
		jg->put = put_example;
		jg->put_arg = jg->dw;
	}
	return 0;
}

int fw_grade_reward_opt(const char *s, enum fw_reward *reward, struct fw_mix *mix,
			int *have_mix, char *err, size_t errlen)
{
	if (!strncmp(s, "mix:", 4)) {
		char e[200];
		if (fw_mix_parse(mix, s, e, sizeof e) < 0) {
			fw_seterr(err, errlen, "bad reward: %s", e);
			return -1;
		}
		*have_mix = 1;
		*reward = (enum fw_reward)mix->test;
		return 0;
	}
	int k = fw_reward_parse(s);
	if (k < 0) {
		fw_seterr(err, errlen, "unknown reward '%s' (resolved, f2p, shaped, mix:...)", s);
		return -1;
	}
	*reward = (enum fw_reward)k;
	*have_mix = 0;
	return 0;
}

int fw_grade_judging_distil_close(struct fw_grade_judging *jg, char *err, size_t errlen)
{
	struct fw_writer *w = jg->dw;
	jg->dw = NULL;
	return fw_writer_close(w, err, errlen);
}

void fw_grade_judging_release(struct fw_grade_judging *jg)
{
	if (!jg)
		return;
	fw_writer_abort(jg->dw);
	fw_judge_free(jg->judge);
	fw_rubric_free(jg->rubric);
	fw_tok_free(jg->stok);
	free(jg->verdicts);
	fw_buf_free(&jg->jbuf);
	fw_buf_free(&jg->gbuf);
	fw_buf_free(&jg->rbuf);
	fw_buf_free(&jg->dbuf);
	fw_buf_free(&jg->pbuf);
	memset(jg, 0, sizeof *jg);
}

/*
 * One SFT example per criterion of the judged record rec, the judge prompt
 * as the student reads it (fitted to its tokenizer and positions) and the
 * verdict as its completion.  Returns 0, or -1 with err filled.
 */
static int distil_record(struct fw_grade_judging *jg, struct fw_mpv rec, char *err,
			 size_t errlen)
{
	struct fw_mpv idv;
	const char *id = "";
	size_t idn = 0;

	if (fw_mp_get(rec, "id", &idv) == 1)
		fw_mp_str(idv, &id, &idn);
	for (int c = 0; c < jg->rubric->n; c++) {
		const struct fw_criterion *cr = &jg->rubric->c[c];
		const struct fw_verdict *v = &jg->verdicts[c];
		const char *lab = cr->labels[v->label];
		msgpack_packer pk;
		int e = 0;

		if (v->skipped)
			continue;
		fw_buf_reset(&jg->pbuf);
		if (fw_judge_prompt_fit(&jg->pbuf, jg->rubric, c, rec, jg->stok, jg->smax_pos) < 0)
			goto oom;
		fw_buf_reset(&jg->dbuf);
		fw_buf_packer(&pk, &jg->dbuf);
		e |= msgpack_pack_map(&pk, 7);
		e |= fw_pack_cstr(&pk, "kind");
		e |= fw_pack_cstr(&pk, "sft");
		e |= fw_pack_cstr(&pk, "prompt");
		e |= msgpack_pack_str(&pk, jg->pbuf.n);
		e |= msgpack_pack_str_body(&pk, jg->pbuf.p, jg->pbuf.n);
		e |= fw_pack_cstr(&pk, "completion");
		e |= msgpack_pack_str(&pk, strlen(lab) + 1);
		e |= msgpack_pack_str_body(&pk, " ", 1);
		e |= msgpack_pack_str_body(&pk, lab, strlen(lab));
		e |= fw_pack_cstr(&pk, "rubric");
		e |= fw_pack_cstr(&pk, jg->rubric->id ? jg->rubric->id : "");
		e |= fw_pack_cstr(&pk, "criterion");
		e |= fw_pack_cstr(&pk, cr->name);
		e |= fw_pack_cstr(&pk, "id");
		e |= msgpack_pack_str(&pk, idn);
		e |= msgpack_pack_str_body(&pk, id, idn);
		e |= fw_pack_cstr(&pk, "p");
		e |= msgpack_pack_double(&pk, v->p[v->label]);
		if (e)
			goto oom;
		if (jg->put(jg->put_arg, jg->dbuf.p, jg->dbuf.n, err, errlen) < 0)
			return -1;
		jg->distilled++;
	}
	return 0;
oom:
	snprintf(err, errlen, "out of memory");
	return -1;
}

/* A double field of m (the sub-map's "reward"), or 0. */
static double field_double(struct fw_mpv m, const char *key)
{
	struct fw_mpv v;
	double x = 0;
	if (fw_mp_get(m, key, &v) == 1)
		fw_mp_double(v, &x);
	return x;
}

int fw_grade_judge_record(struct fw_grade_judging *jg, struct fw_buf *out, char *err,
			  size_t errlen)
{
	struct fw_mpv rec = fw_mp_view(out->p, out->p + out->n), g, hacks;
	msgpack_packer pk;

	static const unsigned char empty_map[] = { 0x80 };
	if (fw_mp_get(rec, "grade", &g) != 1) {
		if (!jg->judge_only) {
			snprintf(err, errlen, "graded record without a grade map");
			return -1;
		}
		/* a record never graded: the judge is all its grade */
		g = fw_mp_view(empty_map, empty_map + 1);
	}
	for (int c = 0; c < jg->rubric->n; c++)
		if (fw_judge_score(jg->judge, jg->rubric, c, rec, &jg->verdicts[c], err, errlen) < 0)
			return -1;
	if (jg->stok && distil_record(jg, rec, err, errlen) < 0)
		return -1;
	fw_buf_reset(&jg->jbuf);
	fw_buf_packer(&pk, &jg->jbuf);
	size_t jn, rn;
	if (fw_judge_pack(&pk, jg->rubric, jg->verdicts) != 0)
		goto oom;
	jn = rn = jg->jbuf.n;
	if (jg->mix) {
		double T = field_double(g, "reward"), R;
		int64_t nh = 0;
		struct fw_mp_iter it;
		if (fw_mp_get(g, "hacks", &hacks) == 1)
			nh = fw_mp_iter_init(&it, hacks);
		R = fw_mix_reward(jg->mix, T, jg->rubric, jg->verdicts, err, errlen);
		if (R < 0)
			return -1;
		/* a hack the tests zeroed stays zero: a judge cannot buy it back */
		if (nh > 0 && !jg->hacks_warn)
			R = 0;
		if (msgpack_pack_double(&pk, R))
			goto oom;
		rn = jg->jbuf.n;
		if (msgpack_pack_double(&pk, T))
			goto oom;
	}
	struct fw_field f[3] = {
		{ "judge", 5, fw_mp_view(jg->jbuf.p, jg->jbuf.p + jn) },
		{ "reward", 6, fw_mp_view(jg->jbuf.p + jn, jg->jbuf.p + rn) },
		{ "reward_tests", 12, fw_mp_view(jg->jbuf.p + rn, jg->jbuf.p + jg->jbuf.n) },
	};
	fw_buf_reset(&jg->gbuf);
	if (fw_rec_set(&jg->gbuf, g, f, jg->mix ? 3 : 1) < 0)
		goto oom;
	struct fw_field fg = { "grade", 5, fw_mp_view(jg->gbuf.p, jg->gbuf.p + jg->gbuf.n) };
	fw_buf_reset(&jg->rbuf);
	if (fw_rec_set(&jg->rbuf, rec, &fg, 1) < 0)
		goto oom;
	/* the judged record becomes the caller's; its old bytes are the
	 * next record's scratch */
	struct fw_buf t = *out;
	*out = jg->rbuf;
	jg->rbuf = t;
	return 0;
oom:
	snprintf(err, errlen, "out of memory");
	return -1;
}
