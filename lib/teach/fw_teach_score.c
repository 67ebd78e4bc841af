/*
 * fw_teach_score.c — records scored by the teacher's scorer, what
 * `ckpt score` writes: the same numbers as teach's for the same ids
 * (fw_teach.h).
 */
#include <stdlib.h>

#include "fw_base.h"
#include "fw_teach.h"
#include "fw_train.h"

struct fw_recscore {
	struct fw_model *m;
	const struct fw_tok *t;
	struct fw_kvscore *ks;
	struct fw_tok_ids ids;   /* a text's encoding */
	struct fw_buf lb, tb;    /* fw_score_record's scratch */
	int32_t *seq;            /* max_position_embeddings ids */
	float *lp;
	char err[512];           /* the last record's fault */
};

struct fw_recscore *fw_recscore_new(struct fw_model *m, const struct fw_tok *t, char *err,
				    size_t errlen)
{
	struct fw_recscore *s = calloc(1, sizeof(*s));

	if (!s || !(s->seq = malloc(sizeof(int32_t) * m->cfg.max_pos)) ||
	    !(s->lp = malloc(sizeof(float) * m->cfg.max_pos))) {
		fw_seterr(err, errlen, "out of memory");
		fw_recscore_free(s);
		return NULL;
	}
	if (!(s->ks = fw_kvscore_new(m, err, errlen))) {
		fw_recscore_free(s);
		return NULL;
	}
	m->no_grad = 1;
	s->m = m;
	s->t = t;
	return s;
}

void fw_recscore_free(struct fw_recscore *s)
{
	if (!s)
		return;
	fw_kvscore_free(s->ks);
	fw_tok_ids_release(&s->ids);
	fw_buf_release(&s->lb);
	fw_buf_release(&s->tb);
	free(s->seq);
	free(s->lp);
	free(s);
}

int fw_recscore_run(struct fw_recscore *s, struct fw_mpv rec, struct fw_buf *out,
		    const char **why)
{
	int n, add_tokens;

	*why = NULL;
	n = fw_score_ids(rec, s->t, s->m->cfg.vocab, s->m->cfg.max_pos, s->seq, &s->ids,
			 &add_tokens, why);
	if (n >= 2 && fw_kvscore_run(s->ks, s->seq, n, 0, s->lp, s->err, sizeof(s->err)))
		*why = s->err;
	if (*why)
		return 0;
	if (fw_score_record(out, rec, s->seq, n, s->lp, add_tokens, &s->lb, &s->tb))
		return -1;
	return 1;
}
