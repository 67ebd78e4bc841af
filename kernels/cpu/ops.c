/*
 * ops.c — the pointwise and row-wise kernels: embedding, RMSNorm, RoPE,
 * SwiGLU, log-softmax / cross-entropy, AdamW.
 *
 * Each op splits its rows over the thread pool (fw_parallel_for) with a
 * small context struct; the per-row code is plain C and is the oracle for
 * the CUDA versions.  Build: part of libflywheel.  Test:
 * build/tests/test_kernels (finite-difference gradient checks).
 */
#include <math.h>
#include <string.h>

#include "kernels.h"

/* Rows below this much work (in floats) are not worth a thread wake-up. */
#define SERIAL_WORK 32768

struct args {
	float *o0, *o1, *o2;
	const float *i0, *i1, *i2, *i3;
	const int32_t *ids;
	int N, C, nh, hd, V;
	float eps;
};

static void run(int n, long work, void (*fn)(void *, int, int),
		struct args *a)
{
	if (work < SERIAL_WORK)
		fn(a, 0, n);
	else
		fw_parallel_for(n, fn, a);
}

/* ---- embedding ------------------------------------------------------------ */

static void embed_fwd_rows(void *p, int r0, int r1)
{
	struct args *a = p;

	for (int r = r0; r < r1; r++)
		memcpy(a->o0 + (long)r * a->C, a->i0 + (long)a->ids[r] * a->C,
		       sizeof(float) * a->C);
}

void fw_embed_fwd(float *out, const int32_t *ids, const float *wte, int N,
		  int C)
{
	struct args a = { .o0 = out, .i0 = wte, .ids = ids, .N = N, .C = C };

	run(N, (long)N * C, embed_fwd_rows, &a);
}

/* Threads own column ranges, so scattering equal ids never races. */
static void embed_bwd_cols(void *p, int c0, int c1)
{
	struct args *a = p;

	for (int r = 0; r < a->N; r++) {
		float *d = a->o0 + (long)a->ids[r] * a->C;
		const float *g = a->i0 + (long)r * a->C;

		for (int c = c0; c < c1; c++)
			d[c] += g[c];
	}
}

void fw_embed_bwd(float *dwte, const float *dout, const int32_t *ids, int N,
		  int C)
{
	struct args a = { .o0 = dwte, .i0 = dout, .ids = ids, .N = N, .C = C };

	run(C, (long)N * C, embed_bwd_cols, &a);
}

/* ---- RMSNorm -------------------------------------------------------------- */

static void rmsnorm_fwd_rows(void *p, int r0, int r1)
{
	struct args *a = p;
	int C = a->C;

	for (int r = r0; r < r1; r++) {
		const float *x = a->i0 + (long)r * C;
		float *y = a->o0 + (long)r * C;
		double ss = 0;

		for (int c = 0; c < C; c++)
			ss += (double)x[c] * x[c];
		float rs = (float)(1.0 / sqrt(ss / C + a->eps));

		a->o1[r] = rs;
		for (int c = 0; c < C; c++)
			y[c] = x[c] * rs * a->i1[c];
	}
}

void fw_rmsnorm_fwd(float *out, float *rstd, const float *inp,
		    const float *w, int N, int C, float eps)
{
	struct args a = { .o0 = out, .o1 = rstd, .i0 = inp, .i1 = w, .N = N,
			  .C = C, .eps = eps };

	run(N, (long)N * C, rmsnorm_fwd_rows, &a);
}

/* dinp only: rows are independent.  dw is summed over rows separately. */
static void rmsnorm_bwd_rows(void *p, int r0, int r1)
{
	struct args *a = p;
	int C = a->C;
	const float *w = a->i2;

	for (int r = r0; r < r1; r++) {
		const float *x = a->i1 + (long)r * C;
		const float *dy = a->i0 + (long)r * C;
		float *dx = a->o0 + (long)r * C;
		float rs = a->i3[r];
		double dot = 0;

		for (int c = 0; c < C; c++)
			dot += (double)dy[c] * w[c] * x[c];
		float k = (float)(dot / C) * rs * rs * rs;

		for (int c = 0; c < C; c++)
			dx[c] += dy[c] * w[c] * rs - x[c] * k;
	}
}

static void rmsnorm_bwd_dw(void *p, int c0, int c1)
{
	struct args *a = p;
	int C = a->C;

	for (int r = 0; r < a->N; r++) {
		const float *x = a->i1 + (long)r * C;
		const float *dy = a->i0 + (long)r * C;
		float rs = a->i3[r];

		for (int c = c0; c < c1; c++)
			a->o1[c] += dy[c] * x[c] * rs;
	}
}

void fw_rmsnorm_bwd(float *dinp, float *dw, const float *dout,
		    const float *inp, const float *w, const float *rstd, int N,
		    int C)
{
	struct args a = { .o0 = dinp, .o1 = dw, .i0 = dout, .i1 = inp,
			  .i2 = w, .i3 = rstd, .N = N, .C = C };

	run(N, (long)N * C, rmsnorm_bwd_rows, &a);
	run(C, (long)N * C, rmsnorm_bwd_dw, &a);
}

/* ---- RoPE ------------------------------------------------------------------ */

void fw_rope_table_inv(float *cos_t, float *sin_t, int maxT, int hd,
		       const float *inv_freq)
{
	int half = hd / 2;

	for (int i = 0; i < half; i++)
		for (int p = 0; p < maxT; p++) {
			/* The angle is rounded to f32 as Hugging Face computes
			 * it, so long positions agree with it too. */
			float ang = (float)p * inv_freq[i];

			cos_t[(long)p * half + i] = (float)cos((double)ang);
			sin_t[(long)p * half + i] = (float)sin((double)ang);
		}
}

void fw_rope_table(float *cos_t, float *sin_t, int maxT, int hd,
		   double theta)
{
	float inv[1024];

	for (int i = 0; i < hd / 2 && i < 1024; i++)
		inv[i] = (float)(1.0 / pow(theta, (double)(2 * i) / hd));
	fw_rope_table_inv(cos_t, sin_t, maxT, hd, inv);
}

static void rope_rows(void *p, int r0, int r1)
{
	struct args *a = p;
	int half = a->hd / 2;
	float sgn = a->eps; /* +1 forward, -1 backward */

	for (int r = r0; r < r1; r++) {
		const float *cs = a->i0 + (long)a->ids[r] * half;
		const float *sn = a->i1 + (long)a->ids[r] * half;

		for (int h = 0; h < a->nh; h++) {
			float *x = a->o0 + ((long)r * a->nh + h) * a->hd;

			for (int i = 0; i < half; i++) {
				float x1 = x[i], x2 = x[i + half];
				float c = cs[i], s = sgn * sn[i];

				x[i] = x1 * c - x2 * s;
				x[i + half] = x2 * c + x1 * s;
			}
		}
	}
}

void fw_rope_fwd(float *x, const int32_t *pos, const float *cos_t,
		 const float *sin_t, int N, int nh, int hd)
{
	struct args a = { .o0 = x, .i0 = cos_t, .i1 = sin_t, .ids = pos,
			  .N = N, .nh = nh, .hd = hd, .eps = 1.0f };

	run(N, (long)N * nh * hd, rope_rows, &a);
}

void fw_rope_bwd(float *dx, const int32_t *pos, const float *cos_t,
		 const float *sin_t, int N, int nh, int hd)
{
	struct args a = { .o0 = dx, .i0 = cos_t, .i1 = sin_t, .ids = pos,
			  .N = N, .nh = nh, .hd = hd, .eps = -1.0f };

	run(N, (long)N * nh * hd, rope_rows, &a);
}

/* ---- SwiGLU ---------------------------------------------------------------- */

struct vec_args {
	float *o0, *o1;
	const float *i0, *i1, *i2;
	long n;
};

static void vchunk(const struct vec_args *a, int part, int parts, long *j0,
		   long *j1)
{
	*j0 = a->n * part / parts;
	*j1 = a->n * (part + 1) / parts;
}

static void swiglu_fwd_part(void *p, int p0, int p1)
{
	struct vec_args *a = p;
	long j0, j1, e;

	vchunk(a, p0, 64, &j0, &e);
	vchunk(a, p1 - 1, 64, &e, &j1);
	for (long j = j0; j < j1; j++) {
		float g = a->i0[j];

		a->o0[j] = g / (1.0f + expf(-g)) * a->i1[j];
	}
}

void fw_swiglu_fwd(float *out, const float *gate, const float *up, long n)
{
	struct vec_args a = { .o0 = out, .i0 = gate, .i1 = up, .n = n };

	if (n < SERIAL_WORK)
		swiglu_fwd_part(&a, 0, 64);
	else
		fw_parallel_for(64, swiglu_fwd_part, &a);
}

static void swiglu_bwd_part(void *p, int p0, int p1)
{
	struct vec_args *a = p;
	long j0, j1, e;

	vchunk(a, p0, 64, &j0, &e);
	vchunk(a, p1 - 1, 64, &e, &j1);
	for (long j = j0; j < j1; j++) {
		float g = a->i1[j], u = a->i2[j], d = a->i0[j];
		float sg = 1.0f / (1.0f + expf(-g));

		a->o0[j] += d * u * sg * (1.0f + g * (1.0f - sg));
		a->o1[j] += d * g * sg;
	}
}

void fw_swiglu_bwd(float *dgate, float *dup, const float *dout,
		   const float *gate, const float *up, long n)
{
	struct vec_args a = { .o0 = dgate, .o1 = dup, .i0 = dout, .i1 = gate,
			      .i2 = up, .n = n };

	if (n < SERIAL_WORK)
		swiglu_bwd_part(&a, 0, 64);
	else
		fw_parallel_for(64, swiglu_bwd_part, &a);
}

/* ---- log-softmax / cross-entropy ---------------------------------------- */

static void xent_fwd_rows(void *p, int r0, int r1)
{
	struct args *a = p;
	int V = a->V;

	for (int r = r0; r < r1; r++) {
		const float *x = a->i0 + (long)r * V;
		float mx = -INFINITY;
		double s = 0;

		for (int j = 0; j < V; j++)
			if (x[j] > mx)
				mx = x[j];
		for (int j = 0; j < V; j++)
			s += expf(x[j] - mx);
		float lse = mx + (float)log(s);

		a->o1[r] = lse;
		a->o0[r] = a->ids[r] >= 0 ? x[a->ids[r]] - lse : 0.0f;
	}
}

void fw_xent_fwd(float *logp, float *lse, const float *logits,
		 const int32_t *targets, int N, int V)
{
	struct args a = { .o0 = logp, .o1 = lse, .i0 = logits, .ids = targets,
			  .N = N, .V = V };

	run(N, (long)N * V, xent_fwd_rows, &a);
}

static void xent_bwd_rows(void *p, int r0, int r1)
{
	struct args *a = p;
	int V = a->V;

	for (int r = r0; r < r1; r++) {
		const float *x = a->i0 + (long)r * V;
		float *dx = a->o0 + (long)r * V;
		int t = a->ids[r];

		if (t < 0) {
			memset(dx, 0, sizeof(float) * V);
			continue;
		}
		float d = a->i2[r], lse = a->i1[r];

		for (int j = 0; j < V; j++)
			dx[j] = -d * expf(x[j] - lse);
		dx[t] += d;
	}
}

void fw_xent_bwd(float *dlogits, const float *logits, const float *lse,
		 const int32_t *targets, const float *dlogp, int N, int V)
{
	struct args a = { .o0 = dlogits, .i0 = logits, .i1 = lse,
			  .i2 = dlogp, .ids = targets, .N = N, .V = V };

	run(N, (long)N * V, xent_bwd_rows, &a);
}

void fw_gather(float *out, const float *x, const int64_t *idx, long n)
{
	for (long i = 0; i < n; i++)
		out[i] = x[idx[i]];
}

void fw_scatter_add(float *x, const int64_t *idx, const float *val, long n)
{
	for (long i = 0; i < n; i++)
		x[idx[i]] += val[i];
}

/* ---- optimizer ------------------------------------------------------------- */

struct adam_args {
	float *p, *m, *v;
	const float *g;
	long n;
	float lr, b1, b2, eps, wd, c1, c2;
};

static void adamw_part(void *ctx, int p0, int p1)
{
	struct adam_args *a = ctx;
	long j0 = a->n * p0 / 64, j1 = a->n * p1 / 64;

	for (long j = j0; j < j1; j++) {
		float g = a->g[j];
		float m = a->b1 * a->m[j] + (1.0f - a->b1) * g;
		float v = a->b2 * a->v[j] + (1.0f - a->b2) * g * g;

		a->m[j] = m;
		a->v[j] = v;
		a->p[j] -= a->lr * a->wd * a->p[j];
		a->p[j] -= a->lr * (m / a->c1) / (sqrtf(v / a->c2) + a->eps);
	}
}

void fw_adamw(float *p, float *m, float *v, const float *g, long n, float lr,
	      float b1, float b2, float eps, float wd, long step)
{
	struct adam_args a = { p, m, v, g, n, lr, b1, b2, eps, wd,
			       (float)(1.0 - pow(b1, (double)step)),
			       (float)(1.0 - pow(b2, (double)step)) };

	if (n < SERIAL_WORK)
		adamw_part(&a, 0, 64);
	else
		fw_parallel_for(64, adamw_part, &a);
}

double fw_sumsq(const float *x, long n)
{
	double s = 0;

	for (long i = 0; i < n; i++)
		s += (double)x[i] * x[i];
	return s;
}

void fw_scale(float *x, float s, long n)
{
	for (long i = 0; i < n; i++)
		x[i] *= s;
}
