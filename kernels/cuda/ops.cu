/*
 * ops.cu — the element-wise and row-wise kernels on the GPU: embedding,
 * RMSNorm, RoPE, SwiGLU, log-softmax / cross-entropy, AdamW, sum of
 * squares, scale, add.
 *
 * Two shapes of kernel only.  Element-wise: one thread per element, a
 * grid-stride loop.  Row-wise: one block of NT threads per row (a
 * grid-stride loop over rows), each thread taking columns c, c + NT, ...,
 * then a shared-memory reduction (block_sum / block_max of common.cuh).
 * Gradients summed over rows (embedding, RMSNorm weight) take one thread
 * per column that walks the rows in order: no atomics, so the result is
 * the same every run and adds up in the order of the C version.
 *
 * Build: make CUDA=1 (nvcc, into libflywheel.a); on the CPU for tests:
 * make gpu-emu.  Test: tests/gpu/check (each op against kernels/cpu/ops.c
 * on random inputs).
 */
#include "common.cuh"

/* i over [0, n), spread over every thread of the grid. */
#define FOR_EACH(i, n)                                                      \
	for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < (n); \
	     i += (long)gridDim.x * blockDim.x)

/* r over [0, n), one block per r: the bound is the same for every thread
 * of a block, so the block's barriers inside are reached by all. */
#define FOR_ROWS(r, n) for (long r = blockIdx.x; r < (n); r += gridDim.x)

/* c over the columns [0, C) this thread of the block takes. */
#define FOR_COLS(c, C) for (int c = threadIdx.x; c < (C); c += blockDim.x)

/* ---- embedding ------------------------------------------------------------ */

static __global__ void embed_fwd(float *out, const int32_t *ids,
				 const float *wte, long n, int C)
{
	FOR_EACH(i, n)
		out[i] = wte[(long)ids[i / C] * C + i % C];
}

static __global__ void embed_bwd(float *dwte, const float *dout,
				 const int32_t *ids, int N, int C)
{
	FOR_EACH(c, C)
		for (long r = 0; r < N; r++)
			dwte[(long)ids[r] * C + c] += dout[r * C + c];
}

extern "C" int fw_cuda_embed_fwd(float *out, const int32_t *ids,
				 const float *wte, int N, int C)
{
	long n = (long)N * C;

	if (n > 0)
		LAUNCH(embed_fwd, grid_for(n), NT, out, ids, wte, n, C);
	return 0;
}

extern "C" int fw_cuda_embed_bwd(float *dwte, const float *dout,
				 const int32_t *ids, int N, int C)
{
	if (N > 0 && C > 0)
		LAUNCH(embed_bwd, grid_for(C), NT, dwte, dout, ids, N, C);
	return 0;
}

/* ---- RMSNorm -------------------------------------------------------------- */

/* Each thread reads x[c] before writing y[c] of the same c, so out may be
 * inp. */
static __global__ void rmsnorm_fwd(float *out, float *rstd, const float *inp,
				   const float *w, int N, int C, float eps)
{
	__shared__ float sh[NT];

	FOR_ROWS(r, N) {
		const float *x = inp + r * C;
		float *y = out + r * C;
		float ss = 0;

		FOR_COLS(c, C)
			ss += x[c] * x[c];
		ss = block_sum(ss, sh);
		float rs = 1.0f / sqrtf(ss / C + eps);

		if (threadIdx.x == 0)
			rstd[r] = rs;
		FOR_COLS(c, C)
			y[c] = x[c] * rs * w[c];
	}
}

/* dx += dy * w * rs - x * (sum(dy * w * x) / C) * rs^3, row by row. */
static __global__ void rmsnorm_bwd_rows(float *dinp, const float *dout,
					const float *inp, const float *w,
					const float *rstd, int N, int C)
{
	__shared__ float sh[NT];

	FOR_ROWS(r, N) {
		const float *x = inp + r * C, *dy = dout + r * C;
		float *dx = dinp + r * C;
		float rs = rstd[r], dot = 0;

		FOR_COLS(c, C)
			dot += dy[c] * w[c] * x[c];
		dot = block_sum(dot, sh);
		float k = dot / C * rs * rs * rs;

		FOR_COLS(c, C)
			dx[c] += dy[c] * w[c] * rs - x[c] * k;
	}
}

static __global__ void rmsnorm_bwd_dw(float *dw, const float *dout,
				      const float *inp, const float *rstd,
				      int N, int C)
{
	FOR_EACH(c, C) {
		float s = dw[c];

		for (long r = 0; r < N; r++)
			s += dout[r * C + c] * inp[r * C + c] * rstd[r];
		dw[c] = s;
	}
}

extern "C" int fw_cuda_rmsnorm_fwd(float *out, float *rstd,
				   const float *inp, const float *w, int N,
				   int C, float eps)
{
	if (N > 0 && C > 0)
		LAUNCH(rmsnorm_fwd, grid_rows(N), NT, out, rstd, inp, w, N, C,
		       eps);
	return 0;
}

extern "C" int fw_cuda_rmsnorm_bwd(float *dinp, float *dw, const float *dout,
				   const float *inp, const float *w,
				   const float *rstd, int N, int C)
{
	if (N <= 0 || C <= 0)
		return 0;
	LAUNCH(rmsnorm_bwd_rows, grid_rows(N), NT, dinp, dout, inp, w, rstd,
	       N, C);
	LAUNCH(rmsnorm_bwd_dw, grid_for(C), NT, dw, dout, inp, rstd, N, C);
	return 0;
}

/* ---- RoPE ------------------------------------------------------------------ */

/* One thread per rotated pair (row r, head, i < hd/2); sgn +1 rotates
 * forward, -1 back. */
static __global__ void rope(float *x, const int32_t *pos, const float *cos_t,
			    const float *sin_t, long n, int nh, int hd,
			    float sgn)
{
	int half = hd / 2;

	FOR_EACH(i, n) {
		long rh = i / half, r = rh / nh;
		int j = (int)(i % half);
		long t = (long)pos[r] * half + j;
		float c = cos_t[t], s = sgn * sin_t[t];
		float *p = x + rh * hd;
		float x1 = p[j], x2 = p[j + half];

		p[j] = x1 * c - x2 * s;
		p[j + half] = x2 * c + x1 * s;
	}
}

extern "C" int fw_cuda_rope_fwd(float *x, const int32_t *pos,
				const float *cos_t, const float *sin_t, int N,
				int nh, int hd)
{
	long n = (long)N * nh * (hd / 2);

	if (n > 0)
		LAUNCH(rope, grid_for(n), NT, x, pos, cos_t, sin_t, n, nh, hd,
		       1.0f);
	return 0;
}

extern "C" int fw_cuda_rope_bwd(float *dx, const int32_t *pos,
				const float *cos_t, const float *sin_t, int N,
				int nh, int hd)
{
	long n = (long)N * nh * (hd / 2);

	if (n > 0)
		LAUNCH(rope, grid_for(n), NT, dx, pos, cos_t, sin_t, n, nh, hd,
		       -1.0f);
	return 0;
}

/* ---- SwiGLU ---------------------------------------------------------------- */

static __global__ void swiglu_fwd(float *out, const float *gate,
				  const float *up, long n)
{
	FOR_EACH(j, n) {
		float g = gate[j];

		out[j] = g / (1.0f + expf(-g)) * up[j];
	}
}

static __global__ void swiglu_bwd(float *dgate, float *dup, const float *dout,
				  const float *gate, const float *up, long n)
{
	FOR_EACH(j, n) {
		float g = gate[j], u = up[j], d = dout[j];
		float sg = 1.0f / (1.0f + expf(-g));

		dgate[j] += d * u * sg * (1.0f + g * (1.0f - sg));
		dup[j] += d * g * sg;
	}
}

extern "C" int fw_cuda_swiglu_fwd(float *out, const float *gate,
				  const float *up, long n)
{
	if (n > 0)
		LAUNCH(swiglu_fwd, grid_for(n), NT, out, gate, up, n);
	return 0;
}

extern "C" int fw_cuda_swiglu_bwd(float *dgate, float *dup,
				  const float *dout, const float *gate,
				  const float *up, long n)
{
	if (n > 0)
		LAUNCH(swiglu_bwd, grid_for(n), NT, dgate, dup, dout, gate, up,
		       n);
	return 0;
}

/* ---- log-softmax / cross-entropy ------------------------------------------ */

static __global__ void xent_fwd(float *logp, float *lse, const float *logits,
				const int32_t *targets, int N, int V)
{
	__shared__ float sh[NT];

	FOR_ROWS(r, N) {
		const float *x = logits + r * V;
		float mx = -INFINITY, s = 0;

		FOR_COLS(j, V)
			mx = fmaxf(mx, x[j]);
		mx = block_max(mx, sh);
		FOR_COLS(j, V)
			s += expf(x[j] - mx);
		s = block_sum(s, sh);
		if (threadIdx.x == 0) {
			float l = mx + logf(s);
			int t = targets[r];

			lse[r] = l;
			logp[r] = t >= 0 ? x[t] - l : 0.0f;
		}
	}
}

/* One thread per logit, reading and writing only its own element, so
 * dlogits may be logits. */
static __global__ void xent_bwd(float *dlogits, const float *logits,
				const float *lse, const int32_t *targets,
				const float *dlogp, long n, int V)
{
	FOR_EACH(i, n) {
		long r = i / V;
		int t = targets[r];

		if (t < 0) {
			dlogits[i] = 0.0f;
			continue;
		}
		float d = dlogp[r];
		float g = -d * expf(logits[i] - lse[r]);

		if (i % V == t)
			g += d;
		dlogits[i] = g;
	}
}

extern "C" int fw_cuda_xent_fwd(float *logp, float *lse, const float *logits,
				const int32_t *targets, int N, int V)
{
	if (N > 0 && V > 0)
		LAUNCH(xent_fwd, grid_rows(N), NT, logp, lse, logits, targets,
		       N, V);
	return 0;
}

extern "C" int fw_cuda_xent_bwd(float *dlogits, const float *logits,
				const float *lse, const int32_t *targets,
				const float *dlogp, int N, int V)
{
	long n = (long)N * V;

	if (n > 0)
		LAUNCH(xent_bwd, grid_for(n), NT, dlogits, logits, lse, targets,
		       dlogp, n, V);
	return 0;
}

/* One thread per index; distinct indices, so no two threads write one
 * element. */
static __global__ void gather(float *out, const float *x, const int64_t *idx, long n)
{
	FOR_EACH(i, n)
		out[i] = x[idx[i]];
}

static __global__ void scatter_add(float *x, const int64_t *idx, const float *val, long n)
{
	FOR_EACH(i, n)
		x[idx[i]] += val[i];
}

extern "C" int fw_cuda_gather(float *out, const float *x, const int64_t *idx, long n)
{
	if (n > 0)
		LAUNCH(gather, grid_for(n), NT, out, x, idx, n);
	return 0;
}

extern "C" int fw_cuda_scatter_add(float *x, const int64_t *idx, const float *val, long n)
{
	if (n > 0)
		LAUNCH(scatter_add, grid_for(n), NT, x, idx, val, n);
	return 0;
}

/* ---- optimizer ------------------------------------------------------------- */

static __global__ void adamw(float *p, float *m, float *v, const float *g,
			     long n, float lr, float b1, float b2, float eps,
			     float wd, float c1, float c2)
{
	FOR_EACH(j, n) {
		float gj = g[j];
		float mj = b1 * m[j] + (1.0f - b1) * gj;
		float vj = b2 * v[j] + (1.0f - b2) * gj * gj;
		float pj = p[j];

		m[j] = mj;
		v[j] = vj;
		pj -= lr * wd * pj;
		pj -= lr * (mj / c1) / (sqrtf(vj / c2) + eps);
		p[j] = pj;
	}
}

extern "C" int fw_cuda_adamw(float *p, float *m, float *v, const float *g,
			     long n, float lr, float b1, float b2, float eps,
			     float wd, long step)
{
	/* The bias corrections as fw_adamw computes them: in double, then
	 * rounded to f32. */
	float c1 = (float)(1.0 - pow((double)b1, (double)step));
	float c2 = (float)(1.0 - pow((double)b2, (double)step));

	if (n > 0)
		LAUNCH(adamw, grid_for(n), NT, p, m, v, g, n, lr, b1, b2, eps,
		       wd, c1, c2);
	return 0;
}

/* ---- reductions and vector helpers ------------------------------------------ */

#define SUMSQ_NT 1024

/* One block: each thread sums a strided share in double, then the block
 * adds the shares up in a fixed tree. */
static __global__ void sumsq(double *out, const float *x, long n)
{
	__shared__ double sh[SUMSQ_NT];
	double s = 0;

	for (long i = threadIdx.x; i < n; i += blockDim.x)
		s += (double)x[i] * x[i];
	s = block_sum(s, sh);
	if (threadIdx.x == 0)
		*out = s;
}

static __global__ void scale(float *x, float s, long n)
{
	FOR_EACH(i, n)
		x[i] *= s;
}

static __global__ void add(float *out, const float *a, const float *b, long n)
{
	FOR_EACH(i, n)
		out[i] = a[i] + b[i];
}

extern "C" int fw_cuda_sumsq(double *out, const float *x, long n)
{
	LAUNCH(sumsq, 1, SUMSQ_NT, out, x, n < 0 ? 0 : n);
	return 0;
}

extern "C" int fw_cuda_scale(float *x, float s, long n)
{
	if (n > 0)
		LAUNCH(scale, grid_for(n), NT, x, s, n);
	return 0;
}

extern "C" int fw_cuda_add(float *out, const float *a, const float *b, long n)
{
	if (n > 0)
		LAUNCH(add, grid_for(n), NT, out, a, b, n);
	return 0;
}
