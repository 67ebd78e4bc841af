/*
 * check_model.c — fw_model on the CUDA device against fw_model on the CPU:
 * the same code (lib/model/fw_model.c over kernels_dev.h) with the two kernel
 * sets behind it.  For a tiny Llama (attention biases), a tied Qwen2 and
 * a Qwen3 (q/k norms), each with 6 query heads over 2 key-value heads:
 *
 *  - train_step: forward (log-probs, loss, logits), backward (every
 *    parameter's gradient), one clipped AdamW step (every weight), f32;
 *  - repeat: the same step again on the device gives the same bits;
 *  - bf16: the forward with bf16 products;
 *  - sft_curve: 20 SFT steps on a fixed batch, the loss of each step;
 *  - decode: greedy decoding of several sequences (prefill + KV cache) gives
 *    the same tokens, and the logits of every step agree;
 *  - score: fw_gen_score (teach's re-scoring) gives the same log-probs;
 *  - batch: serve's continuous batching (fw_gen_score to admit, fw_gen_copy
 *    to share a prefix and to move a live sequence to the front,
 *    fw_gen_step_first over the first B sequences) gives the same logits.
 *
 * Tolerances (|gpu - cpu| <= atol + rtol |cpu|), from the arithmetic:
 *  - f32, one step: 1e-4 of max|cpu| of each tensor.  Both sides compute
 *    in f32 and differ only in the order of sums (flash attention's online
 *    softmax, cuBLAS's blocking, block reductions): a sum of K terms in
 *    another order moves by at most K u max|term|, u = 2^-24, K <= 256
 *    here, so about 1.5e-5 of the largest term per op; a step chains some
 *    ten such ops, hence 1e-4.
 *  - f32, AdamW from equal gradients: the clip's sum of squares is in
 *    double on both sides and the update element-wise, so only the f32
 *    rounding of a few operations separates them: 1e-7 + 1e-5 rel.
 *  - sft_curve: step s starts from weights that already differ; with the
 *    per-step bound above and errors adding up, |dloss_s| <= s 1e-4 |loss|.
 *  - bf16: each product rounds its operands to bf16 (relative error 2^-9
 *    each, 2^-8 per term) and sums in f32, so a product's error is at most
 *    2^-8 of sum |a||b|; a logit's path crosses 2L+1 products in sequence
 *    (attention and MLP of each layer, lm_head) and logp = logit - lse
 *    moves by at most twice a logit's error: logp within
 *    2 (2L+1) 2^-8 max|logit|, the loss within the same of max|logp|.
 *
 * Exit status: 0 all pass, 1 a mismatch or a device error, 77 no CUDA
 * device, 2 usage.  Build: make CUDA=1 build/gpu/check_model, or make
 * gpu-emu (the CUDA kernels emulated on the CPU).  Run: tests/gpu/check.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_model.h"
#include "kernels.h"
#include "kernels_cuda.h"
#include "kernels_dev.h"

static const char *prog = "check_model";
static int nfail, npass;
static char err[512];

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static float frand(void) /* uniform in [-1, 1) */
{
	return (float)((next() >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p) {
		fprintf(stderr, "%s: out of memory\n", prog);
		exit(1);
	}
	return p;
}

/* ---- comparison ------------------------------------------------------------ */

static struct {
	double ratio, maxabs;
	const char *what;
	long at;
	double got, want;
} cur;

static void cmp_begin(void)
{
	memset(&cur, 0, sizeof(cur));
}

static void cmp(const char *what, const float *got, const float *ref, long n,
		double rtol, double atol)
{
	for (long i = 0; i < n; i++) {
		double d = fabs((double)got[i] - ref[i]), r;
		double lim = atol + rtol * fabs((double)ref[i]);

		if (got[i] == ref[i])
			r = 0, d = 0;
		else if (!isfinite(d))
			r = INFINITY;
		else
			r = lim > 0 ? d / lim : INFINITY;
		if (isfinite(d) && d > cur.maxabs)
			cur.maxabs = d;
		if (r > cur.ratio || (r == INFINITY && !cur.what)) {
			cur.ratio = r;
			cur.what = what;
			cur.at = i;
			cur.got = got[i];
			cur.want = ref[i];
		}
	}
}

static double maxabs(const float *x, long n)
{
	double m = 0;

	for (long i = 0; i < n; i++)
		if (fabs((double)x[i]) > m)
			m = fabs((double)x[i]);
	return m;
}

static void cmp_scaled(const char *what, const float *got, const float *ref,
		       long n, double tol)
{
	double s = maxabs(ref, n);

	cmp(what, got, ref, n, tol, tol * (s > 0 ? s : 1));
}

static void verdict(const char *name, const char *shape, const char *tol)
{
	int ok = cur.ratio <= 1.0;

	printf("%-4s %-12s %-38s max|diff| %.1e  (tol %s)\n", ok ? "ok" : "FAIL",
	       name, shape, cur.maxabs, tol);
	if (!ok)
		printf("     worst: %s[%ld] = %.9g, cpu %.9g\n", cur.what, cur.at,
		       cur.got, cur.want);
	if (ok)
		npass++;
	else
		nfail++;
}

static void fail(const char *name, const char *shape, const char *why)
{
	printf("FAIL %-12s %-38s %s\n", name, shape, why);
	nfail++;
}

/* ---- models ------------------------------------------------------------------ */

/* Device copies of host data and back. */
static float *from_dev(const struct fw_model *m, const float *d, long n)
{
	float *h = xmalloc(sizeof(float) * n);

	fw_dev_d2h(m->dev, h, d, sizeof(float) * n);
	if (fw_dev_check(m->dev, err, sizeof(err))) {
		fprintf(stderr, "%s: %s\n", prog, err);
		exit(1);
	}
	return h;
}

/* A model of arch on device spec ("cpu" or "cuda"), seed 11, its weights
 * moved off their init values by w (nw floats) so every one matters. */
static struct fw_model *make(const char *arch, int tied, int bias,
			     const char *spec, const float *w)
{
	char json[1024];
	struct fw_config c;
	struct fw_model *m;

	snprintf(json, sizeof(json),
		 "{\"architectures\": [\"%s\"], \"vocab_size\": 97, "
		 "\"hidden_size\": 48, \"intermediate_size\": 80, "
		 "\"num_hidden_layers\": 2, \"num_attention_heads\": 6, "
		 "\"num_key_value_heads\": 2, \"head_dim\": 10, "
		 "\"max_position_embeddings\": 64, \"rope_theta\": 10000.0, "
		 "\"rms_norm_eps\": 1e-6, \"initializer_range\": 0.2, "
		 "\"attention_bias\": %s, \"tie_word_embeddings\": %s}",
		 arch, bias ? "true" : "false", tied ? "true" : "false");
	if (fw_dev_select(spec, err, sizeof(err)) < 0 ||
	    fw_config_parse(&c, json, strlen(json), "config", err, sizeof(err)) ||
	    !(m = fw_model_new(&c, 11, err, sizeof(err))))
		return NULL;
	if (w) {
		fw_dev_h2d(m->dev, m->w, w, sizeof(float) * m->nw);
		if (fw_dev_check(m->dev, err, sizeof(err))) {
			fw_model_free(m);
			return NULL;
		}
	}
	return m;
}

/* The pair (cpu, gpu) of one architecture with the same weights. */
static int pair(const char *arch, int tied, int bias, struct fw_model **cpu,
		struct fw_model **gpu)
{
	*cpu = make(arch, tied, bias, "cpu", NULL);
	*gpu = NULL;
	if (!*cpu)
		return -1;
	for (long i = 0; i < (*cpu)->nw; i++)
		(*cpu)->w[i] += 0.1f * frand();
	*gpu = make(arch, tied, bias, "cuda", (*cpu)->w);
	if (!*gpu) {
		fw_model_free(*cpu);
		*cpu = NULL;
		return -1;
	}
	fw_dev_select("cpu", err, sizeof(err));
	return 0;
}

struct batch {
	int B, T;
	int32_t *tok, *tgt;
	float *wts;
};

static struct batch mkbatch(int B, int T, int V)
{
	struct batch b = { B, T, xmalloc(4 * B * T), xmalloc(4 * B * T),
			   xmalloc(4 * B * T) };

	for (int i = 0; i < B * T; i++) {
		b.tok[i] = (int32_t)(next() % V);
		b.tgt[i] = i % 5 == 2 ? -1 : (int32_t)(next() % V);
		b.wts[i] = 1.0f + frand();
	}
	return b;
}

/* Forward and backward of m on b from zero gradients; logp (B*T) and the
 * loss out.  Returns 0 or -1 (err). */
static int step(struct fw_model *m, const struct batch *b, float *logp,
		float *loss)
{
	if (fw_model_grads(m))
		return snprintf(err, sizeof(err), "out of memory"), -1;
	fw_model_zero_grad(m);
	return fw_model_forward(m, b->tok, b->tgt, b->wts, b->B, b->T, 0, logp,
				loss, err, sizeof(err)) ||
	       fw_model_backward(m, err, sizeof(err)) ? -1 : 0;
}

/* Soft targets (fw_model_forward_soft) on the device against the CPU:
 * their log-probs and the gradients, as check_train's. */
static void check_soft(const char *arch, int B, int T)
{
	char shape[64];
	struct fw_model *c, *g;
	int N = B * T, ns = 0;

	snprintf(shape, sizeof(shape), "%s B=%d T=%d", arch, B, T);
	if (pair(arch, 0, 0, &c, &g))
		return fail("soft_targets", shape, err);

	struct batch b = mkbatch(B, T, c->cfg.vocab);
	int32_t *row = xmalloc(4 * 3 * N), *tok = xmalloc(4 * 3 * N);
	float *w = xmalloc(4 * 3 * N), *slc = xmalloc(4 * 3 * N), *slg = xmalloc(4 * 3 * N);
	float losc, losg;

	/* three per scored position, one of them its own target */
	for (int i = 0; i < N; i++)
		for (int j = 0; b.tgt[i] >= 0 && j < 3; j++) {
			row[ns] = i;
			tok[ns] = j == 1 ? b.tgt[i] : (int32_t)(next() % c->cfg.vocab);
			w[ns++] = 0.5f + 0.5f * frand();
		}
	struct fw_soft sc = { ns, row, tok, w, slc }, sg = { ns, row, tok, w, slg };

	fw_dev_set_bf16(0);
	if (fw_model_grads(c) || fw_model_grads(g))
		return fail("soft_targets", shape, "out of memory");
	fw_model_zero_grad(c);
	fw_model_zero_grad(g);
	if (fw_model_forward_soft(c, b.tok, b.tgt, b.wts, B, T, 0, NULL, &losc, &sc, err,
				  sizeof(err)) || fw_model_backward(c, err, sizeof(err)) ||
	    fw_model_forward_soft(g, b.tok, b.tgt, b.wts, B, T, 0, NULL, &losg, &sg, err,
				  sizeof(err)) || fw_model_backward(g, err, sizeof(err)))
		return fail("soft_targets", shape, err);
	cmp_begin();
	cmp_scaled("soft logp", slg, slc, ns, 1e-4);
	cmp_scaled("loss", &losg, &losc, 1, 1e-4);
	float *gg = from_dev(g, g->g, g->nw);

	for (int i = 0; i < c->np; i++) {
		const struct fw_param *p = &c->params[i];

		cmp_scaled(p->name, gg + p->off, c->g + p->off, p->n, 1e-4);
	}
	verdict("soft_targets", shape, "1e-04 of max|cpu|, each tensor");
	free(gg), free(row), free(tok), free(w), free(slc), free(slg);
	free(b.tok), free(b.tgt), free(b.wts);
	fw_model_free(c);
	fw_model_free(g);
}

static void check_train(const char *arch, int tied, int bias, int B, int T)
{
	char shape[64];
	struct fw_model *c, *g;
	int N = B * T;

	snprintf(shape, sizeof(shape), "%s%s%s B=%d T=%d", arch, tied ? " tied" : "",
		 bias ? " bias" : "", B, T);
	if (pair(arch, tied, bias, &c, &g))
		return fail("train_step", shape, err);

	struct batch b = mkbatch(B, T, c->cfg.vocab);
	long NV = (long)N * c->cfg.vocab;
	float *lc = xmalloc(4 * N), *lg = xmalloc(4 * N), losc, losg;

	fw_dev_set_bf16(0);
	if (step(c, &b, lc, &losc))
		return fail("train_step", shape, err);
	float *logc = xmalloc(4 * NV);

	/* logits before backward, which overwrites them */
	fw_model_zero_grad(c);
	fw_model_forward(c, b.tok, b.tgt, b.wts, B, T, 0, NULL, NULL, err, sizeof(err));
	memcpy(logc, fw_model_logits(c), 4 * NV);
	fw_model_backward(c, err, sizeof(err));
	fw_model_zero_grad(g);
	if (fw_model_forward(g, b.tok, b.tgt, b.wts, B, T, 0, lg, &losg, err, sizeof(err)))
		return fail("train_step", shape, err);
	const float *lgg = fw_model_logits(g);

	if (!lgg)
		return fail("train_step", shape, "no logits from the device");
	cmp_begin();
	cmp_scaled("logits", lgg, logc, NV, 1e-4);
	cmp_scaled("logp", lg, lc, N, 1e-4);
	cmp_scaled("loss", &losg, &losc, 1, 1e-4);
	if (fw_model_backward(g, err, sizeof(err)))
		return fail("train_step", shape, err);

	float *gg = from_dev(g, g->g, g->nw);

	for (int i = 0; i < c->np; i++) {
		const struct fw_param *p = &c->params[i];

		cmp_scaled(p->name, gg + p->off, c->g + p->off, p->n, 1e-4);
	}
	verdict("train_step", shape, "1e-04 of max|cpu|, each tensor");

	/* the same step on the device again: the same bits */
	{
		float l2, *p2 = xmalloc(4 * N), *g2;

		if (step(g, &b, p2, &l2))
			return fail("repeat", shape, err);
		g2 = from_dev(g, g->g, g->nw);
		cmp_begin();
		cmp("logp", p2, lg, N, 0, 0);
		cmp("grads", g2, gg, g->nw, 0, 0);
		verdict("repeat", shape, "bitwise");
		free(p2);
		free(g2);
	}

	/* one clipped AdamW step over everything, from the CPU's gradients
	 * on both sides (the first step of AdamW is lr g / (|g| + eps), so
	 * where |g| is near eps a gradient difference of the size allowed
	 * above could move a weight by up to lr: the update is checked on
	 * equal gradients, whole training steps by sft_curve below) */
	fw_dev_h2d(g->dev, g->g, c->g, sizeof(float) * c->nw);
	{
		struct fw_opt *oc = fw_opt_new(c), *og = fw_opt_new(g);
		struct fw_adamw_cfg a = { 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.5f };
		double nc, ng;
		float fc, fg, *wg;

		if (!oc || !og)
			return fail("adamw", shape, "out of memory");
		nc = fw_opt_step(oc, c, &a);
		ng = fw_opt_step(og, g, &a);
		fc = (float)nc;
		fg = (float)ng;
		wg = from_dev(g, g->w, g->nw);
		cmp_begin();
		cmp("grad norm", &fg, &fc, 1, 1e-4, 0);
		cmp("params", wg, c->w, c->nw, 1e-5, 1e-7);
		verdict("adamw", shape, "1e-07 + 1e-05 rel");
		free(wg);
		fw_opt_free(oc);
		fw_opt_free(og);
	}

	/* bf16 products: the forward within the bound derived above */
	{
		float l16, *p16 = xmalloc(4 * N), fl;
		double ml, tl = 2.0 * (2 * c->cfg.L + 1) / 256.0;
		char tol[64];

		/* back to the step's weights on both sides */
		fw_model_free(g);
		fw_model_free(c);
		rng = 0x9e3779b97f4a7c15ull;
		if (pair(arch, tied, bias, &c, &g))
			return fail("bf16", shape, err);
		fw_dev_set_bf16(1);
		c->no_grad = g->no_grad = 0;
		if (fw_model_forward(g, b.tok, b.tgt, b.wts, B, T, 0, p16, &l16, err, sizeof(err)))
			return fail("bf16", shape, err);
		fw_dev_set_bf16(0);
		if (fw_model_forward(c, b.tok, b.tgt, b.wts, B, T, 0, lc, &losc, err, sizeof(err)))
			return fail("bf16", shape, err);
		ml = maxabs(fw_model_logits(c), NV);
		fl = (float)(tl * maxabs(lc, N));
		cmp_begin();
		cmp("logp", p16, lc, N, 0, tl * ml);
		cmp("loss", &l16, &losc, 1, 0, fl);
		snprintf(tol, sizeof(tol), "%.3f of max|logit|", tl);
		verdict("bf16", shape, tol);
		free(p16);
	}
	free(gg), free(lc), free(lg), free(logc);
	free(b.tok), free(b.tgt), free(b.wts);
	fw_model_free(c);
	fw_model_free(g);
}

/* 20 SFT steps (AdamW, lr 3e-3) on one fixed batch of a repeating
 * sequence: the loss of every step on the device against the CPU's. */
static void check_curve(const char *arch, int steps)
{
	char shape[64], tol[64];
	struct fw_model *c, *g;
	struct fw_opt *oc, *og;
	struct fw_adamw_cfg a = { 3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f };
	int B = 2, T = 12, N = B * T;
	struct batch b = mkbatch(B, T, 97);
	float *lc = xmalloc(4 * steps), *lg = xmalloc(4 * steps), *lp = xmalloc(4 * N);

	snprintf(shape, sizeof(shape), "%s %d steps B=%d T=%d", arch, steps, B, T);
	for (int i = 0; i < N; i++) {
		b.tok[i] = (int32_t)(i % 7 * 3 + 1);
		b.tgt[i] = (int32_t)((i + 1) % 7 * 3 + 1);
		b.wts[i] = 1;
	}
	if (pair(arch, 0, 0, &c, &g))
		return fail("sft_curve", shape, err);
	fw_dev_set_bf16(0);
	oc = fw_opt_new(c);
	og = fw_opt_new(g);
	cmp_begin();
	for (int s = 0; s < steps; s++) {
		if (step(c, &b, lp, &lc[s]) || step(g, &b, lp, &lg[s]))
			return fail("sft_curve", shape, err);
		fw_opt_step(oc, c, &a);
		fw_opt_step(og, g, &a);
		cmp("loss", &lg[s], &lc[s], 1, (s + 1) * 1e-4, 0);
	}
	if (!(lc[steps - 1] < 0.5f * lc[0]))
		cur.ratio = INFINITY, cur.what = "no learning";
	snprintf(tol, sizeof(tol), "s*1e-4 rel; loss %.3f -> %.3f", lc[0],
		 lc[steps - 1]);
	verdict("sft_curve", shape, tol);
	fw_opt_free(oc);
	fw_opt_free(og);
	fw_model_free(c);
	fw_model_free(g);
	free(lc), free(lg), free(lp), free(b.tok), free(b.tgt), free(b.wts);
}

static int argmax(const float *x, int n)
{
	int k = 0;

	for (int i = 1; i < n; i++)
		if (x[i] > x[k])
			k = i;
	return k;
}

/* Greedy decoding of nseq sequences from one prompt of n ids, then steps
 * tokens each (the sequences diverge after one forced different token),
 * and one sequence appended to alone; then fw_gen_score. */
static void check_decode(const char *arch, int nseq, int n, int steps)
{
	char shape[64];
	struct fw_model *c, *g;
	struct fw_gen *gc, *gg;
	int V = 97, maxT = n + steps + 8, same = 1;
	int32_t *prompt = xmalloc(4 * n), *tc = xmalloc(4 * nseq), *tg = xmalloc(4 * nseq);

	snprintf(shape, sizeof(shape), "%s nseq=%d prompt=%d steps=%d", arch, nseq,
		 n, steps);
	if (pair(arch, 0, 0, &c, &g))
		return fail("decode", shape, err);
	fw_dev_set_bf16(0);
	for (int i = 0; i < n; i++)
		prompt[i] = (int32_t)(next() % V);
	if (!(gc = fw_gen_new(c, nseq, maxT, err, sizeof(err))) ||
	    !(gg = fw_gen_new(g, nseq, maxT, err, sizeof(err))) ||
	    fw_gen_prefill(gc, prompt, n, err, sizeof(err)) ||
	    fw_gen_prefill(gg, prompt, n, err, sizeof(err)))
		return fail("decode", shape, err);
	cmp_begin();
	for (int s = 0; s < steps; s++) {
		const float *xc = fw_gen_logits(gc), *xg = fw_gen_logits(gg);

		cmp_scaled("logits", xg, xc, (long)nseq * V, 1e-4);
		for (int k = 0; k < nseq; k++) {
			tc[k] = (int32_t)argmax(xc + (size_t)k * V, V);
			tg[k] = (int32_t)argmax(xg + (size_t)k * V, V);
			if (s == 0)	/* make the sequences differ */
				tc[k] = tg[k] = (int32_t)((tc[k] + k) % V);
			same &= tc[k] == tg[k];
		}
		if (fw_gen_step(gc, tc, err, sizeof(err)) ||
		    fw_gen_step(gg, tg, err, sizeof(err)))
			return fail("decode", shape, err);
	}
	/* a tool's output appended to one sequence */
	if (fw_gen_append(gc, nseq - 1, prompt, 3, err, sizeof(err)) ||
	    fw_gen_append(gg, nseq - 1, prompt, 3, err, sizeof(err)))
		return fail("decode", shape, err);
	cmp_scaled("append logits", fw_gen_logits(gg) + (size_t)(nseq - 1) * V,
		   fw_gen_logits(gc) + (size_t)(nseq - 1) * V, V, 1e-4);
	if (!same)
		cur.ratio = INFINITY, cur.what = "greedy tokens differ";
	verdict("decode", shape, "same tokens; logits 1e-04 of max|cpu|");

	/* fw_gen_score: a fresh sequence 0 scored from position 0 */
	{
		int m = n + steps;
		int32_t *tok = xmalloc(4 * m), *tgt = xmalloc(4 * m);
		float *pc = xmalloc(4 * m), *pg = xmalloc(4 * m);

		for (int i = 0; i < m; i++) {
			tok[i] = (int32_t)(next() % V);
			tgt[i] = i % 4 == 1 ? -1 : (int32_t)(next() % V);
		}
		if (fw_gen_truncate(gc, 0, 0, err, sizeof(err)) ||
		    fw_gen_truncate(gg, 0, 0, err, sizeof(err)) ||
		    fw_gen_score(gc, 0, tok, tgt, m, pc, err, sizeof(err)) ||
		    fw_gen_score(gg, 0, tok, tgt, m, pg, err, sizeof(err)))
			return fail("score", shape, err);
		cmp_begin();
		cmp_scaled("logp", pg, pc, m, 1e-4);
		cmp_scaled("next logits", fw_gen_logits(gg), fw_gen_logits(gc), V, 1e-4);
		verdict("score", shape, "1e-04 of max|cpu|");
		free(tok), free(tgt), free(pc), free(pg);
	}
	fw_gen_free(gc);
	fw_gen_free(gg);
	fw_model_free(c);
	fw_model_free(g);
	free(prompt), free(tc), free(tg);
}

/* serve's continuous batching on nseq = 4 sequences: two prompts admitted
 * (sequence 1 shares sequence 0's first half through fw_gen_copy), a third
 * copied from the second (a second sample), steps of the first B only,
 * then sequence 0 retired (the last live one copied into its place) and
 * steps of the two left.  Logits of the live rows after every call. */
static void check_batch(const char *arch, int n, int steps)
{
	char shape[64];
	struct fw_model *c, *g;
	struct fw_gen *gc, *gg;
	struct fw_gen *gs[2];
	int V = 97, maxT = n + 2 * steps + 8, same = 1, B = 3;
	int32_t *p0 = xmalloc(4 * n), *p1 = xmalloc(4 * n), tc[4], tg[4];

	snprintf(shape, sizeof(shape), "%s prompt=%d steps=%d", arch, n, steps);
	if (pair(arch, 0, 0, &c, &g))
		return fail("batch", shape, err);
	fw_dev_set_bf16(0);
	for (int i = 0; i < n; i++) {
		p0[i] = (int32_t)(next() % V);
		p1[i] = i < n / 2 ? p0[i] : (int32_t)(next() % V);
	}
	if (!(gc = fw_gen_new(c, 4, maxT, err, sizeof(err))) ||
	    !(gg = fw_gen_new(g, 4, maxT, err, sizeof(err))))
		return fail("batch", shape, err);
	gs[0] = gc, gs[1] = gg;
	for (int i = 0; i < 2; i++)
		if (fw_gen_score(gs[i], 0, p0, NULL, n, NULL, err, sizeof(err)) ||
		    fw_gen_copy(gs[i], 0, 1, err, sizeof(err)) ||
		    fw_gen_truncate(gs[i], 1, n / 2, err, sizeof(err)) ||
		    fw_gen_score(gs[i], 1, p1 + n / 2, NULL, n - n / 2, NULL, err,
				 sizeof(err)) ||
		    fw_gen_copy(gs[i], 1, 2, err, sizeof(err)))
			return fail("batch", shape, err);
	cmp_begin();
	cmp_scaled("admitted logits", fw_gen_logits(gg), fw_gen_logits(gc), (long)B * V, 1e-4);
	for (int s = 0; s < 2 * steps; s++) {
		const float *xc = fw_gen_logits(gc), *xg = fw_gen_logits(gg);

		for (int k = 0; k < B; k++) {
			tc[k] = (int32_t)argmax(xc + (size_t)k * V, V);
			tg[k] = (int32_t)argmax(xg + (size_t)k * V, V);
			if (s == 0)	/* the two samples of p1 part */
				tc[k] = tg[k] = (int32_t)((tc[k] + k) % V);
			same &= tc[k] == tg[k];
		}
		if (fw_gen_step_first(gc, B, tc, err, sizeof(err)) ||
		    fw_gen_step_first(gg, B, tg, err, sizeof(err)))
			return fail("batch", shape, err);
		cmp_scaled("step logits", fw_gen_logits(gg), fw_gen_logits(gc), (long)B * V,
			   1e-4);
		if (s == steps - 1) {	/* sequence 0 ends: 2 moves to its place */
			if (fw_gen_copy(gc, 2, 0, err, sizeof(err)) ||
			    fw_gen_copy(gg, 2, 0, err, sizeof(err)))
				return fail("batch", shape, err);
			B = 2;
			cmp_scaled("moved logits", fw_gen_logits(gg), fw_gen_logits(gc),
				   (long)B * V, 1e-4);
		}
	}
	if (fw_gen_len(gg, 0) != n + 2 * steps || fw_gen_len(gg, 1) != n + 2 * steps)
		cur.ratio = INFINITY, cur.what = "lengths after the steps";
	if (!same)
		cur.ratio = INFINITY, cur.what = "greedy tokens differ";
	verdict("batch", shape, "same tokens; logits 1e-04 of max|cpu|");
	fw_gen_free(gc);
	fw_gen_free(gg);
	fw_model_free(c);
	fw_model_free(g);
	free(p0), free(p1);
}

struct probe {
	void *buf;
	int dev;
	char err[256];
};

/* The work of a thread that did not select the device: a CUDA op, then
 * the device it ran on. */
static void *probe_run(void *arg)
{
	struct probe *t = arg;

	fw_dev_zero(FW_DEV_CUDA, t->buf, 256);
	if (fw_dev_check(FW_DEV_CUDA, t->err, sizeof(t->err)) < 0)
		t->dev = -2;
	else
		t->dev = fw_cuda_current_device();
	return NULL;
}

/* A thread that did not call fw_dev_select (a -j worker, serve's decoding
 * thread) makes its CUDA calls on the device that was selected, not on
 * CUDA's per-thread default, device 0.  Needs two devices: the emulation
 * has them with FW_EMU_DEVICES=2. */
static void check_threads(void)
{
	struct probe t = {.dev = -1};
	pthread_t th;
	int n = fw_cuda_device_count();

	if (n < 2) {
		printf("skip threads      one CUDA device: the check needs two\n");
		return;
	}
	if (fw_dev_select("cuda:1", err, sizeof(err)) < 0) {
		fail("threads", "cuda:1", err);
		return;
	}
	t.buf = fw_dev_alloc(FW_DEV_CUDA, 256);
	if (!t.buf || pthread_create(&th, NULL, probe_run, &t)) {
		fail("threads", "cuda:1", "cannot allocate or start the thread");
		fw_dev_select("cpu", err, sizeof(err));
		return;
	}
	pthread_join(th, NULL);
	fw_dev_free(FW_DEV_CUDA, t.buf);
	fw_dev_select("cpu", err, sizeof(err));
	if (t.dev == -2) {
		fail("threads", "cuda:1", t.err);
		return;
	}
	int ok = t.dev == 1;
	printf("%-4s %-12s %-38s device %d\n", ok ? "ok" : "FAIL", "threads",
	       "cuda:1 selected, op in a new thread", t.dev);
	if (ok)
		npass++;
	else
		nfail++;
}

int main(int argc, char **argv)
{
	int steps = 20;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quick")) {
			steps = 8;
		} else if (!strcmp(argv[i], "--help")) {
			printf("usage: %s [--quick]\n", prog);
			return 0;
		} else {
			fprintf(stderr, "usage: %s [--quick]\n", prog);
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (fw_dev_select("cuda", err, sizeof(err)) < 0) {
		printf("%s: %s: skipped, nothing checked\n", prog, err);
		return 77;
	}
	printf("# device: %s\n", fw_dev_name());
	fw_dev_select("cpu", err, sizeof(err));
	fw_kernels_set_threads(1);

	check_train("LlamaForCausalLM", 0, 1, 2, 7);
	check_train("Qwen2ForCausalLM", 1, 0, 2, 9);
	check_train("Qwen3ForCausalLM", 0, 0, 3, 6);
	check_soft("LlamaForCausalLM", 2, 7);
	check_curve("LlamaForCausalLM", steps);
	check_decode("Qwen3ForCausalLM", 3, 11, 5);
	check_decode("LlamaForCausalLM", 2, 6, 4);
	check_batch("Qwen2ForCausalLM", 10, 4);
	check_threads();

	printf("%s: %d ok, %d failed\n", prog, npass, nfail);
	return nfail ? 1 : 0;
}
