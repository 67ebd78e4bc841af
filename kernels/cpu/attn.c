/*
 * attn.c — causal attention with grouped-query heads: training forward and
 * backward, and the key-value-cache variant used by incremental decoding.
 *
 * Work is split by query row (b, h, t), and the key/value gradients by key
 * row (b, g, j) in a second pass, so no two threads write the same
 * gradient.  Only the causal triangle is computed.  Build: part of
 * libflywheel.  Test: build/tests/test_kernels (finite differences, and the
 * cached variant against the full forward).
 */
#include <math.h>
#include <string.h>
#include <cblas.h>

#include "kernels.h"

struct attn {
	float *out, *att, *dq, *dk, *dv, *scr;
	const float *q, *k, *v, *dout, *patt;
	const int32_t *pos;
	int B, T, nh, nkv, hd, Tq, maxT, sstride;
};

/* Eight partial sums so the compiler can keep them in vector lanes. */
static inline float dot(const float *a, const float *b, int n)
{
	float s[8] = { 0 };
	int i = 0;

	for (; i + 8 <= n; i += 8)
		for (int k = 0; k < 8; k++)
			s[k] += a[i + k] * b[i + k];
	float r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));

	for (; i < n; i++)
		r += a[i] * b[i];
	return r;
}

static inline void axpy(float *y, float a, const float *x, int n)
{
	for (int i = 0; i < n; i++)
		y[i] += a * x[i];
}

/* One query row: p (L) gets softmax(q . k_j * scale), o = sum p_j v_j.
 * Keys j are at k + j*kstride. */
static void attend(float *o, float *p, const float *q, const float *k,
		   const float *v, long kstride, int L, int hd, float scale)
{
	float mx = -INFINITY, sum = 0;

	for (int j = 0; j < L; j++) {
		float s = dot(q, k + j * kstride, hd) * scale;

		p[j] = s;
		if (s > mx)
			mx = s;
	}
	for (int j = 0; j < L; j++) {
		p[j] = expf(p[j] - mx);
		sum += p[j];
	}
	float inv = 1.0f / sum;

	memset(o, 0, sizeof(float) * hd);
	for (int j = 0; j < L; j++) {
		p[j] *= inv;
		axpy(o, p[j], v + j * kstride, hd);
	}
}

static void fwd_rows(void *ctx, int r0, int r1)
{
	struct attn *a = ctx;
	int T = a->T, nh = a->nh, nkv = a->nkv, hd = a->hd;
	float scale = 1.0f / sqrtf((float)hd);

	for (int r = r0; r < r1; r++) {
		int t = r % T, h = (r / T) % nh, b = r / (T * nh);
		int g = h / (nh / nkv);
		const float *q = a->q + (((long)b * T + t) * nh + h) * hd;
		const float *k = a->k + ((long)b * T * nkv + g) * hd;
		const float *v = a->v + ((long)b * T * nkv + g) * hd;
		float *o = a->out + (((long)b * T + t) * nh + h) * hd;
		float *p = a->att + (((long)b * nh + h) * T + t) * T;

		attend(o, p, q, k, v, (long)nkv * hd, t + 1, hd, scale);
		memset(p + t + 1, 0, sizeof(float) * (T - t - 1));
	}
}

void fw_attn_fwd_ref(float *out, float *att, const float *q, const float *k,
		     const float *v, int B, int T, int nh, int nkv, int hd)
{
	struct attn a = { .out = out, .att = att, .q = q, .k = k, .v = v,
			  .B = B, .T = T, .nh = nh, .nkv = nkv, .hd = hd };

	fw_parallel_for(B * nh * T, fwd_rows, &a);
}

/* Pass 1, per query row: dS = P * (dP - sum P dP) * scale into scratch,
 * dq += dS @ K. */
static void bwd_rows(void *ctx, int r0, int r1)
{
	struct attn *a = ctx;
	int T = a->T, nh = a->nh, nkv = a->nkv, hd = a->hd;
	long ks = (long)nkv * hd;
	float scale = 1.0f / sqrtf((float)hd);

	for (int r = r0; r < r1; r++) {
		int t = r % T, h = (r / T) % nh, b = r / (T * nh);
		int g = h / (nh / nkv);
		long row = (((long)b * T + t) * nh + h) * hd;
		const float *k = a->k + ((long)b * T * nkv + g) * hd;
		const float *v = a->v + ((long)b * T * nkv + g) * hd;
		const float *p = a->patt + (((long)b * nh + h) * T + t) * T;
		float *ds = a->scr + (((long)b * nh + h) * T + t) * T;
		const float *dout = a->dout + row;
		float *dq = a->dq + row;
		float acc = 0;

		for (int j = 0; j <= t; j++) {
			ds[j] = dot(dout, v + j * ks, hd);
			acc += ds[j] * p[j];
		}
		for (int j = 0; j <= t; j++) {
			ds[j] = p[j] * (ds[j] - acc) * scale;
			axpy(dq, ds[j], k + j * ks, hd);
		}
	}
}

/* Pass 2, per key row j of kv head g: dk_j += sum_{h in g, t >= j}
 * dS[t][j] q_t; dv_j += sum P[t][j] dout_t. */
static void bwd_keys(void *ctx, int r0, int r1)
{
	struct attn *a = ctx;
	int T = a->T, nh = a->nh, nkv = a->nkv, hd = a->hd;
	int rep = nh / nkv;

	for (int r = r0; r < r1; r++) {
		int j = r % T, g = (r / T) % nkv, b = r / (T * nkv);
		long kr = (((long)b * T + j) * nkv + g) * hd;
		float *dk = a->dk + kr, *dv = a->dv + kr;

		for (int h = g * rep; h < (g + 1) * rep; h++) {
			const float *p = a->patt + ((long)b * nh + h) * T * T;
			const float *ds = a->scr + ((long)b * nh + h) * T * T;

			for (int t = j; t < T; t++) {
				long qr = (((long)b * T + t) * nh + h) * hd;

				axpy(dk, ds[(long)t * T + j], a->q + qr, hd);
				axpy(dv, p[(long)t * T + j], a->dout + qr, hd);
			}
		}
	}
}

void fw_attn_bwd_ref(float *dq, float *dk, float *dv, float *scratch,
		     const float *dout, const float *att, const float *q,
		     const float *k, const float *v, int B, int T, int nh,
		     int nkv, int hd)
{
	struct attn a = { .dq = dq, .dk = dk, .dv = dv, .scr = scratch,
			  .dout = dout, .patt = att, .q = q, .k = k, .v = v,
			  .B = B, .T = T, .nh = nh, .nkv = nkv, .hd = hd };

	fw_parallel_for(B * nh * T, bwd_rows, &a);
	fw_parallel_for(B * nkv * T, bwd_keys, &a);
}

static void cached_rows(void *ctx, int r0, int r1)
{
	struct attn *a = ctx;
	int Tq = a->Tq, nh = a->nh, nkv = a->nkv, hd = a->hd;
	float scale = 1.0f / sqrtf((float)hd);

	for (int r = r0; r < r1; r++) {
		int h = r % nh, t = (r / nh) % Tq, b = r / (nh * Tq);
		int g = h / (nh / nkv);
		long row = (((long)b * Tq + t) * nh + h) * hd;
		const float *k = a->k + ((long)b * a->maxT * nkv + g) * hd;
		const float *v = a->v + ((long)b * a->maxT * nkv + g) * hd;
		int p0 = a->pos ? a->pos[b] : a->T;

		attend(a->out + row, a->scr + (long)r * a->sstride, a->q + row, k,
		       v, (long)nkv * hd, p0 + t + 1, hd, scale);
	}
}

/* Many query rows (prefill, chunked scoring): per head (b, h), S = Q K^T
 * over the L = pos0+Tq cached keys, causal softmax, O = P V, with sgemm. */
static void cached_heads(void *ctx, int i0, int i1)
{
	struct attn *a = ctx;
	int Tq = a->Tq, nh = a->nh, nkv = a->nkv, hd = a->hd;
	float scale = 1.0f / sqrtf((float)hd);

	for (int i = i0; i < i1; i++) {
		int b = i / nh, h = i % nh, g = h / (nh / nkv);
		int p0 = a->pos ? a->pos[b] : a->T, L = p0 + Tq;
		long qo = ((long)b * Tq * nh + h) * hd;
		const float *k = a->k + ((long)b * a->maxT * nkv + g) * hd;
		const float *v = a->v + ((long)b * a->maxT * nkv + g) * hd;
		float *S = a->scr + (long)i * Tq * a->sstride;

		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Tq, L, hd,
			    1.0f, a->q + qo, nh * hd, k, nkv * hd, 0.0f, S, L);
		for (int t = 0; t < Tq; t++) {
			float *r = S + (long)t * L, mx = -INFINITY, sum = 0;
			int n = p0 + t + 1;

			for (int j = 0; j < n; j++) {
				r[j] *= scale;
				mx = r[j] > mx ? r[j] : mx;
			}
			for (int j = 0; j < n; j++) {
				r[j] = expf(r[j] - mx);
				sum += r[j];
			}
			float inv = 1.0f / sum;

			for (int j = 0; j < n; j++)
				r[j] *= inv;
			memset(r + n, 0, sizeof(float) * (L - n));
		}
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Tq, hd, L,
			    1.0f, S, L, v, nkv * hd, 0.0f, a->out + qo, nh * hd);
	}
}

static void cached_run(struct attn *a, long work)
{
	if (a->Tq >= 8)
		fw_parallel_for(a->B * a->nh, cached_heads, a);
	else if (work < 32768)
		cached_rows(a, 0, a->B * a->Tq * a->nh);
	else
		fw_parallel_for(a->B * a->Tq * a->nh, cached_rows, a);
}

void fw_attn_cached(float *out, float *scratch, const float *q,
		    const float *kc, const float *vc, int B, int Tq, int pos0,
		    int maxT, int nh, int nkv, int hd)
{
	/* T carries the common start position; scratch rows are as long as
	 * the longest attention row. */
	struct attn a = { .out = out, .scr = scratch, .q = q, .k = kc,
			  .v = vc, .B = B, .T = pos0, .Tq = Tq, .maxT = maxT,
			  .sstride = pos0 + Tq, .nh = nh, .nkv = nkv, .hd = hd };

	cached_run(&a, (long)B * Tq * nh * (pos0 + Tq) * hd);
}

void fw_attn_cached_pos(float *out, float *scratch, const float *q,
			const float *kc, const float *vc, const int32_t *pos0,
			int B, int Tq, int maxT, int nh, int nkv, int hd)
{
	struct attn a = { .out = out, .scr = scratch, .q = q, .k = kc,
			  .v = vc, .pos = pos0, .B = B, .Tq = Tq, .maxT = maxT,
			  .sstride = maxT, .nh = nh, .nkv = nkv, .hd = hd };
	long work = 0;

	for (int b = 0; b < B; b++)
		work += (long)Tq * nh * (pos0[b] + Tq) * hd;
	cached_run(&a, work);
}

/* ---- per-head sgemm versions ---------------------------------------------- */

/* Row-wise causal softmax of S (T, T) scaled by scale, in place; entries
 * above the diagonal become 0. */
static void causal_softmax(float *S, int T, float scale)
{
	for (int t = 0; t < T; t++) {
		float *r = S + (long)t * T, mx = -INFINITY, sum = 0;

		for (int j = 0; j <= t; j++) {
			r[j] *= scale;
			if (r[j] > mx)
				mx = r[j];
		}
		for (int j = 0; j <= t; j++) {
			r[j] = expf(r[j] - mx);
			sum += r[j];
		}
		float inv = 1.0f / sum;

		for (int j = 0; j <= t; j++)
			r[j] *= inv;
		memset(r + t + 1, 0, sizeof(float) * (T - t - 1));
	}
}

static void fwd_heads(void *ctx, int i0, int i1)
{
	struct attn *a = ctx;
	int T = a->T, nh = a->nh, nkv = a->nkv, hd = a->hd;
	float scale = 1.0f / sqrtf((float)hd);

	for (int i = i0; i < i1; i++) {
		int b = i / nh, h = i % nh, g = h / (nh / nkv);
		const float *q = a->q + ((long)b * T * nh + h) * hd;
		const float *k = a->k + ((long)b * T * nkv + g) * hd;
		const float *v = a->v + ((long)b * T * nkv + g) * hd;
		float *S = a->att + (long)i * T * T;

		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hd,
			    1.0f, q, nh * hd, k, nkv * hd, 0.0f, S, T);
		causal_softmax(S, T, scale);
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hd, T,
			    1.0f, S, T, v, nkv * hd, 0.0f,
			    a->out + ((long)b * T * nh + h) * hd, nh * hd);
	}
}

void fw_attn_fwd(float *out, float *att, const float *q, const float *k,
		 const float *v, int B, int T, int nh, int nkv, int hd)
{
	struct attn a = { .out = out, .att = att, .q = q, .k = k, .v = v,
			  .B = B, .T = T, .nh = nh, .nkv = nkv, .hd = hd };

	fw_parallel_for(B * nh, fwd_heads, &a);
}

/* One thread per key-value group (b, g): its query heads run one after
 * another, so dk and dv of the group have a single writer. */
static void bwd_groups(void *ctx, int i0, int i1)
{
	struct attn *a = ctx;
	int T = a->T, nh = a->nh, nkv = a->nkv, hd = a->hd, rep = nh / nkv;
	float scale = 1.0f / sqrtf((float)hd);

	for (int i = i0; i < i1; i++) {
		int b = i / nkv, g = i % nkv;
		long ko = ((long)b * T * nkv + g) * hd;

		for (int h = g * rep; h < (g + 1) * rep; h++) {
			long qo = ((long)b * T * nh + h) * hd;
			const float *P = a->patt + ((long)b * nh + h) * T * T;
			float *dS = a->scr + ((long)b * nh + h) * T * T;

			/* dP = dO V^T */
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T,
				    hd, 1.0f, a->dout + qo, nh * hd, a->v + ko,
				    nkv * hd, 0.0f, dS, T);
			/* dS = P * (dP - sum_j P dP) * scale, causal part only */
			for (int t = 0; t < T; t++) {
				float *r = dS + (long)t * T, acc = 0;
				const float *p = P + (long)t * T;

				for (int j = 0; j <= t; j++)
					acc += r[j] * p[j];
				for (int j = 0; j <= t; j++)
					r[j] = p[j] * (r[j] - acc) * scale;
				memset(r + t + 1, 0, sizeof(float) * (T - t - 1));
			}
			/* dQ += dS K; dK += dS^T Q; dV += P^T dO */
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T,
				    hd, T, 1.0f, dS, T, a->k + ko, nkv * hd, 1.0f,
				    a->dq + qo, nh * hd);
			cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T,
				    hd, T, 1.0f, dS, T, a->q + qo, nh * hd, 1.0f,
				    a->dk + ko, nkv * hd);
			cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T,
				    hd, T, 1.0f, P, T, a->dout + qo, nh * hd, 1.0f,
				    a->dv + ko, nkv * hd);
		}
	}
}

void fw_attn_bwd(float *dq, float *dk, float *dv, float *scratch,
		 const float *dout, const float *att, const float *q,
		 const float *k, const float *v, int B, int T, int nh, int nkv,
		 int hd)
{
	struct attn a = { .dq = dq, .dk = dk, .dv = dv, .scr = scratch,
			  .dout = dout, .patt = att, .q = q, .k = k, .v = v,
			  .B = B, .T = T, .nh = nh, .nkv = nkv, .hd = hd };

	fw_parallel_for(B * nkv, bwd_groups, &a);
}
