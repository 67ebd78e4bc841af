/*
 * fw_model_sample.c — a token drawn from a row of logits (fw_sample: what
 * every policy, serve and `ckpt sample` decode with), and continuations of
 * a prompt drawn token by token from the model's cache (fw_sample_seqs).
 */
#include <math.h>
#include <stdlib.h>

#include "fw_base.h"
#include "fw_model.h"
#include "kernels.h"

struct cand {
	float p;
	int32_t id;
};

static int by_p_desc(const void *a, const void *b)
{
	float x = ((const struct cand *)a)->p, y = ((const struct cand *)b)->p;

	if (x != y)
		return x < y ? 1 : -1;
	return ((const struct cand *)a)->id - ((const struct cand *)b)->id;
}

double fw_sample_u01(uint64_t *s)
{
	uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ull;

	/* xorshift64*, its top 53 bits */
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return ((x * 0x2545f4914f6cdd1dull) >> 11) * (1.0 / 9007199254740992.0);
}

/* The top-k / top-p set of the weights e (V, sum tot) as candidates c
 * (which may lie over e: c[j] is written after e[j] is read), sorted by
 * weight; returns its size and its weight in *keep. */
static int truncate_to(struct cand *c, const float *e, int V, double tot,
		       const struct fw_sampler *s, double *keep)
{
	int need_k = s->top_k > 0 && s->top_k < V ? s->top_k : 0, m = V, n;
	double need = need_k ? 0 : s->top_p * tot;

	for (int j = 0; j < V; j++) {
		float p = e[j];

		c[j].id = j;
		c[j].p = p;
	}
	/* Sort only the head of the distribution: lower a threshold (the top
	 * token has weight 1) until the tokens above it surely hold the
	 * top-k set, or the top-p mass; the rest cannot be drawn.  Sorting
	 * all of a 150k vocabulary per token would cost more than the model
	 * step. */
	for (float th = 1.0f / 16; th > 1e-30f; th *= 1.0f / 16) {
		double mass = 0;
		int k = 0;

		for (int j = 0; j < V; j++)
			if (c[j].p >= th) {
				struct cand x = c[k];

				c[k] = c[j];
				c[j] = x;
				mass += c[k++].p;
			}
		if (need_k ? k >= need_k : mass >= need) {
			m = k;
			break;
		}
	}
	qsort(c, m, sizeof(*c), by_p_desc);
	n = m;
	if (need_k && need_k < n)
		n = need_k;
	if (s->top_p < 1.0f) {
		double kept = 0, all = 0;
		int k;

		/* top-p applies to the top-k set when there is one, else to
		 * the whole distribution. */
		if (need_k)
			for (k = 0; k < n; k++)
				all += c[k].p;
		else
			all = tot;
		for (k = 0; k < n; k++) {
			kept += c[k].p;
			if (kept >= s->top_p * all)
				break;
		}
		n = k < n ? k + 1 : n;
	}
	*keep = 0;
	for (int k = 0; k < n; k++)
		*keep += c[k].p;
	return n;
}

/* The token at u in [0, tot) of the weights e (V), tot their
 * fw_sum_blocks: the block whose running sum passes u, then the token in
 * it whose running sum does; the last token of weight above 0 there (or
 * in the row) where rounding leaves u past them all. */
static int32_t pick_at(const float *e, int V, double u)
{
	double acc = 0;
	int b0;

	for (b0 = 0; b0 < V; b0 += FW_SUM_BLOCK) {
		int n = V - b0 < FW_SUM_BLOCK ? V - b0 : FW_SUM_BLOCK;
		double bs = fw_sum_block(e + b0, n);

		if (u < acc + bs) {
			int last = -1;

			for (int j = 0; j < n; j++) {
				acc += e[b0 + j];
				if (e[b0 + j] > 0)
					last = b0 + j;
				if (u < acc)
					return b0 + j;
			}
			if (last >= 0)
				return last;
		}
		acc += bs;
	}
	for (int j = V - 1; j > 0; j--)
		if (e[j] > 0)
			return j;
	return 0;
}

int32_t fw_sample(const float *logits, int V, const struct fw_sampler *s,
		  uint64_t *rng, float *scratch, float *logp)
{
	float mx, *e = scratch + V;
	double z = 0, tot, u;
	int32_t best = fw_logits_argmax(logits, V, &mx), pick = best;

	/* the model's own distribution, for logp: at temperature 1 the
	 * weights drawn from below */
	if (logp && s->temp != 1.0f) {
		fw_exp_shift(e, logits, V, mx, 1.0f);
		z = fw_sum_blocks(e, V);
	}
	if (s->temp <= 0)
		goto done;
	fw_exp_shift(e, logits, V, mx, s->temp);
	tot = fw_sum_blocks(e, V);
	if (s->temp == 1.0f)
		z = tot;
	if (!(tot > 0))
		goto done;
	u = fw_sample_u01(rng);
	if ((s->top_k > 0 && s->top_k < V) || s->top_p < 1.0f) {
		struct cand *c = (struct cand *)scratch;
		double keep, acc = 0;
		int n = truncate_to(c, e, V, tot, s, &keep);

		u *= keep;
		pick = c[n - 1].id;
		for (int k = 0; k < n; k++) {
			acc += c[k].p;
			if (u < acc) {
				pick = c[k].id;
				break;
			}
		}
	} else {
		pick = pick_at(e, V, u * tot);
	}
done:
	if (logp)
		*logp = (float)((double)logits[pick] - mx - log(z));
	return pick;
}

int fw_sample_seqs(struct fw_model *m, const int32_t *prompt, int n, int len, int count,
		   const struct fw_sampler *s, uint64_t seed, int32_t eos, int32_t *out,
		   int *outn, char *err, size_t errlen)
{
	int V = m->cfg.vocab, rc = -1;
	struct fw_gen *g = NULL;
	int32_t *next = calloc(count, sizeof(*next));
	int *done = calloc(count, sizeof(*done));
	float *scratch = malloc(sizeof(float) * 2 * V);
	uint64_t rng = seed * 0x9e3779b97f4a7c15ull + 1;

	if (!next || !done || !scratch) {
		fw_seterr(err, errlen, "out of memory");
		goto out;
	}
	if (!(g = fw_gen_new(m, count, n + len, err, errlen)) ||
	    fw_gen_prefill(g, prompt, n, err, errlen))
		goto out;
	for (int b = 0; b < count; b++)
		outn[b] = 0;
	for (int step = 0; step < len; step++) {
		int live = 0;

		/* every sequence draws, ended or not, so that each one's
		 * tokens do not depend on when the others end */
		for (int b = 0; b < count; b++) {
			next[b] = fw_sample(fw_gen_logits(g) + (size_t)b * V, V, s, &rng,
					    scratch, NULL);
			if (done[b])
				continue;
			if (next[b] == eos)
				done[b] = 1;
			else
				out[(size_t)b * len + outn[b]++] = next[b];
			live += !done[b];
		}
		if (!live || step + 1 == len)
			break;
		if (fw_gen_step(g, next, err, errlen))
			goto out;
	}
	rc = 0;
out:
	fw_gen_free(g);
	free(next);
	free(done);
	free(scratch);
	return rc;
}
