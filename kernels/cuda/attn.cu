/*
 * attn.cu — causal attention with grouped-query heads on the GPU: training
 * forward and backward, and the key-value-cache variant for decoding.
 *
 * The same split as the plain C loops of kernels/cpu/attn.c
 * (fw_attn_fwd_ref, fw_attn_bwd_ref, fw_attn_cached), one block where they
 * have one loop iteration: forward and the first backward pass take a
 * block per query row (b, h, t), whose threads share the keys j of the row
 * and then the head dimensions d; the second backward pass takes a block
 * per key row (b, g, j), whose threads take the dimensions d of dk and dv.
 * So every gradient element has one writer and sums in the order of the C
 * version.
 * The probabilities live in att (global memory, kept for backward); a
 * barrier separates writing a row of them from reading it.
 *
 * Build: make CUDA=1 (nvcc, into libflywheel.a); on the CPU for tests:
 * make gpu-emu.  Test: tests/gpu/check (against those loops; long rows
 * and wide heads so every strided loop runs more than once).
 */
#include "common.cuh"

/* Threads per block: a row has at most T keys and hd dimensions. */
#define AT 128

static __device__ float dot(const float *a, const float *b, int n)
{
	float s = 0;

	for (int i = 0; i < n; i++)
		s += a[i] * b[i];
	return s;
}

/* One query row, by the whole block: p (L) = softmax(q . k_j * scale) over
 * keys j < L at k + j*ks, then o (hd) = sum_j p_j v_j. */
static __device__ void attend(float *o, float *p, const float *q,
			      const float *k, const float *v, long ks, int L,
			      int hd, float scale, float *sh)
{
	float mx = -INFINITY, sum = 0;

	for (int j = threadIdx.x; j < L; j += blockDim.x) {
		float s = dot(q, k + j * ks, hd) * scale;

		p[j] = s;
		mx = fmaxf(mx, s);
	}
	mx = block_max(mx, sh);
	for (int j = threadIdx.x; j < L; j += blockDim.x) {
		float e = expf(p[j] - mx);

		p[j] = e;
		sum += e;
	}
	float inv = 1.0f / block_sum(sum, sh);

	for (int j = threadIdx.x; j < L; j += blockDim.x)
		p[j] *= inv;
	/* Each thread reads every p[j] below. */
	__syncthreads();
	for (int d = threadIdx.x; d < hd; d += blockDim.x) {
		float acc = 0;

		for (int j = 0; j < L; j++)
			acc += p[j] * v[j * ks + d];
		o[d] = acc;
	}
}

static __global__ void attn_fwd(float *out, float *att, const float *q,
				const float *k, const float *v, int B, int T,
				int nh, int nkv, int hd)
{
	__shared__ float sh[AT];
	float scale = 1.0f / sqrtf((float)hd);
	long rows = (long)B * nh * T, ks = (long)nkv * hd;

	for (long r = blockIdx.x; r < rows; r += gridDim.x) {
		int t = (int)(r % T), h = (int)((r / T) % nh);
		long b = r / ((long)T * nh);
		int g = h / (nh / nkv);
		long row = ((b * T + t) * nh + h) * hd;
		float *p = att + ((b * nh + h) * T + t) * T;

		attend(out + row, p, q + row, k + (b * T * nkv + g) * hd,
		       v + (b * T * nkv + g) * hd, ks, t + 1, hd, scale, sh);
		for (int j = t + 1 + threadIdx.x; j < T; j += blockDim.x)
			p[j] = 0.0f;
	}
}

/* Pass 1, per query row: ds_j = p_j (dout . v_j - sum_i p_i dout . v_i)
 * scale into scratch for j <= t (0 above), then dq += sum_j ds_j k_j. */
static __global__ void attn_bwd_rows(float *dq, float *scratch,
				     const float *dout, const float *att,
				     const float *k, const float *v, int B,
				     int T, int nh, int nkv, int hd)
{
	__shared__ float sh[AT];
	float scale = 1.0f / sqrtf((float)hd);
	long rows = (long)B * nh * T, ks = (long)nkv * hd;

	for (long r = blockIdx.x; r < rows; r += gridDim.x) {
		int t = (int)(r % T), h = (int)((r / T) % nh);
		long b = r / ((long)T * nh);
		int g = h / (nh / nkv);
		long row = ((b * T + t) * nh + h) * hd;
		const float *kb = k + (b * T * nkv + g) * hd;
		const float *vb = v + (b * T * nkv + g) * hd;
		const float *p = att + ((b * nh + h) * T + t) * T;
		float *ds = scratch + ((b * nh + h) * T + t) * T;
		float acc = 0;

		for (int j = threadIdx.x; j <= t; j += blockDim.x) {
			float dp = dot(dout + row, vb + j * ks, hd);

			ds[j] = dp;
			acc += dp * p[j];
		}
		acc = block_sum(acc, sh);
		for (int j = threadIdx.x; j < T; j += blockDim.x)
			ds[j] = j <= t ? p[j] * (ds[j] - acc) * scale : 0.0f;
		/* Each thread reads every ds[j] below. */
		__syncthreads();
		for (int d = threadIdx.x; d < hd; d += blockDim.x) {
			float a = dq[row + d];

			for (int j = 0; j <= t; j++)
				a += ds[j] * kb[j * ks + d];
			dq[row + d] = a;
		}
	}
}

/* Pass 2, per key row j of kv head g: dk_j += sum over the group's query
 * heads h and rows t >= j of ds[t][j] q_t; dv_j += p[t][j] dout_t. */
static __global__ void attn_bwd_keys(float *dk, float *dv,
				     const float *scratch, const float *dout,
				     const float *att, const float *q, int B,
				     int T, int nh, int nkv, int hd)
{
	int rep = nh / nkv;
	long rows = (long)B * nkv * T;

	for (long r = blockIdx.x; r < rows; r += gridDim.x) {
		int j = (int)(r % T), g = (int)((r / T) % nkv);
		long b = r / ((long)T * nkv);
		long kr = ((b * T + j) * nkv + g) * hd;

		for (int d = threadIdx.x; d < hd; d += blockDim.x) {
			float ak = dk[kr + d], av = dv[kr + d];

			for (int h = g * rep; h < (g + 1) * rep; h++) {
				const float *p = att + (b * nh + h) * T * T;
				const float *ds = scratch + (b * nh + h) * T * T;

				for (int t = j; t < T; t++) {
					long qr = ((b * T + t) * nh + h) * hd;

					ak += ds[(long)t * T + j] * q[qr + d];
					av += p[(long)t * T + j] * dout[qr + d];
				}
			}
			dk[kr + d] = ak;
			dv[kr + d] = av;
		}
	}
}

/* One block per new query row (b, t, h), ordered as fw_attn_cached orders
 * them: row t of sequence b attends to cache positions 0 .. pos0 + t. */
static __global__ void attn_cached(float *out, float *scratch, const float *q,
				   const float *kc, const float *vc, int B,
				   int Tq, int pos0, int maxT, int nh, int nkv,
				   int hd)
{
	__shared__ float sh[AT];
	float scale = 1.0f / sqrtf((float)hd);
	long rows = (long)B * Tq * nh, ks = (long)nkv * hd;
	long Lmax = pos0 + Tq;

	for (long r = blockIdx.x; r < rows; r += gridDim.x) {
		int h = (int)(r % nh), t = (int)((r / nh) % Tq);
		long b = r / ((long)nh * Tq);
		int g = h / (nh / nkv);
		long row = ((b * Tq + t) * nh + h) * hd;
		long kb = (b * maxT * nkv + g) * hd;

		attend(out + row, scratch + r * Lmax, q + row, kc + kb, vc + kb,
		       ks, pos0 + t + 1, hd, scale, sh);
	}
}

extern "C" int fw_cuda_attn_fwd(float *out, float *att, const float *q,
				const float *k, const float *v, int B, int T,
				int nh, int nkv, int hd)
{
	long rows = (long)B * nh * T;

	if (rows > 0 && hd > 0)
		LAUNCH(attn_fwd, grid_rows(rows), AT, out, att, q, k, v, B, T,
		       nh, nkv, hd);
	return 0;
}

extern "C" int fw_cuda_attn_bwd(float *dq, float *dk, float *dv,
				float *scratch, const float *dout,
				const float *att, const float *q,
				const float *k, const float *v, int B, int T,
				int nh, int nkv, int hd)
{
	long rows = (long)B * nh * T;

	if (rows <= 0 || hd <= 0)
		return 0;
	LAUNCH(attn_bwd_rows, grid_rows(rows), AT, dq, scratch, dout, att, k,
	       v, B, T, nh, nkv, hd);
	LAUNCH(attn_bwd_keys, grid_rows((long)B * nkv * T), AT, dk, dv,
	       scratch, dout, att, q, B, T, nh, nkv, hd);
	return 0;
}

extern "C" int fw_cuda_attn_cached(float *out, float *scratch,
				   const float *q, const float *kc,
				   const float *vc, int B, int Tq, int pos0,
				   int maxT, int nh, int nkv, int hd)
{
	long rows = (long)B * Tq * nh;

	if (rows > 0 && hd > 0)
		LAUNCH(attn_cached, grid_rows(rows), AT, out, scratch, q, kc, vc,
		       B, Tq, pos0, maxT, nh, nkv, hd);
	return 0;
}

/* As attn_cached with a start position per sequence: row t of sequence b
 * attends to cache positions 0 .. pos0[b] + t; its scratch row is maxT
 * long. */
static __global__ void attn_cached_pos(float *out, float *scratch,
				       const float *q, const float *kc,
				       const float *vc, const int32_t *pos0,
				       int B, int Tq, int maxT, int nh, int nkv,
				       int hd)
{
	__shared__ float sh[AT];
	float scale = 1.0f / sqrtf((float)hd);
	long rows = (long)B * Tq * nh, ks = (long)nkv * hd;

	for (long r = blockIdx.x; r < rows; r += gridDim.x) {
		int h = (int)(r % nh), t = (int)((r / nh) % Tq);
		long b = r / ((long)nh * Tq);
		int g = h / (nh / nkv);
		long row = ((b * Tq + t) * nh + h) * hd;
		long kb = (b * maxT * nkv + g) * hd;

		attend(out + row, scratch + r * maxT, q + row, kc + kb, vc + kb,
		       ks, pos0[b] + t + 1, hd, scale, sh);
	}
}

extern "C" int fw_cuda_attn_cached_pos(float *out, float *scratch,
				       const float *q, const float *kc,
				       const float *vc, const int32_t *pos0,
				       int B, int Tq, int maxT, int nh,
				       int nkv, int hd)
{
	long rows = (long)B * Tq * nh;

	if (rows > 0 && hd > 0)
		LAUNCH(attn_cached_pos, grid_rows(rows), AT, out, scratch, q, kc,
		       vc, pos0, B, Tq, maxT, nh, nkv, hd);
	return 0;
}

/* ---- flash-style attention for training ----------------------------------
 *
 * No (T, T) matrix: a block per query row walks the keys in tiles of AT,
 * one key per thread, keeping the running maximum m, the running sum l of
 * exp(s - m) and the output accumulator (each thread its dimensions d,
 * d + AT, ...), rescaled by exp(m_old - m_new) when the maximum grows (the
 * online softmax).  Only lse = m + log l per row is kept for backward,
 * which recomputes p = exp(s - lse) tile by tile: pass 1 per query row for
 * dq (and D = dout . out, the row's sum of p dp), pass 2 per key row for dk
 * and dv.  Every output element still has one writer. */

/* Dimensions a thread accumulates: hd <= AT * FD. */
#define FD 4

static __global__ void flash_fwd(float *out, float *lse, const float *q,
				 const float *k, const float *v, int B, int T,
				 int nh, int nkv, int hd)
{
	__shared__ float sh[AT];
	__shared__ float p[AT];
	float scale = 1.0f / sqrtf((float)hd);
	long rows = (long)B * nh * T, ks = (long)nkv * hd;

	for (long r = blockIdx.x; r < rows; r += gridDim.x) {
		int t = (int)(r % T), h = (int)((r / T) % nh);
		long b = r / ((long)T * nh);
		int g = h / (nh / nkv);
		long row = ((b * T + t) * nh + h) * hd;
		const float *kb = k + (b * T * nkv + g) * hd;
		const float *vb = v + (b * T * nkv + g) * hd;
		float m = -INFINITY, l = 0, o[FD];

		for (int i = 0; i < FD; i++)
			o[i] = 0;
		for (int j0 = 0; j0 <= t; j0 += AT) {
			int j = j0 + threadIdx.x, n = t + 1 - j0 < AT ? t + 1 - j0 : AT;
			float s = j <= t ? dot(q + row, kb + j * ks, hd) * scale
					 : -INFINITY;
			float mn = fmaxf(m, block_max(s, sh));
			float e = j <= t ? expf(s - mn) : 0.0f;

			p[threadIdx.x] = e;
			/* block_sum is a barrier: every p[] is visible after. */
			float st = block_sum(e, sh), alpha = expf(m - mn);

			l = l * alpha + st;
			for (int i = 0; i < FD; i++) {
				int d = threadIdx.x + i * AT;

				if (d >= hd)
					break;
				float a = o[i] * alpha;

				for (int jj = 0; jj < n; jj++)
					a += p[jj] * vb[(j0 + jj) * ks + d];
				o[i] = a;
			}
			m = mn;
			/* p[] is written again by the next tile. */
			__syncthreads();
		}
		for (int i = 0; i < FD; i++) {
			int d = threadIdx.x + i * AT;

			if (d < hd)
				out[row + d] = o[i] / l;
		}
		if (threadIdx.x == 0)
			lse[r] = m + logf(l);
	}
}

/* Pass 1, per query row r = (b, h, t): D[r] = dout . out, then dq += sum_j
 * ds_j k_j, ds_j = p_j (dout . v_j - D) scale, p_j = exp(s_j - lse[r]). */
static __global__ void flash_bwd_rows(float *dq, float *D, const float *dout,
				      const float *out, const float *lse,
				      const float *q, const float *k,
				      const float *v, int B, int T, int nh,
				      int nkv, int hd)
{
	__shared__ float sh[AT];
	__shared__ float ds[AT];
	float scale = 1.0f / sqrtf((float)hd);
	long rows = (long)B * nh * T, ks = (long)nkv * hd;

	for (long r = blockIdx.x; r < rows; r += gridDim.x) {
		int t = (int)(r % T), h = (int)((r / T) % nh);
		long b = r / ((long)T * nh);
		int g = h / (nh / nkv);
		long row = ((b * T + t) * nh + h) * hd;
		const float *kb = k + (b * T * nkv + g) * hd;
		const float *vb = v + (b * T * nkv + g) * hd;
		float acc = 0, a[FD];

		for (int d = threadIdx.x; d < hd; d += blockDim.x)
			acc += dout[row + d] * out[row + d];
		float Dr = block_sum(acc, sh), L = lse[r];

		if (threadIdx.x == 0)
			D[r] = Dr;
		for (int i = 0; i < FD; i++)
			a[i] = 0;
		for (int j0 = 0; j0 <= t; j0 += AT) {
			int j = j0 + threadIdx.x, n = t + 1 - j0 < AT ? t + 1 - j0 : AT;

			if (j <= t) {
				float pj = expf(dot(q + row, kb + j * ks, hd) * scale - L);

				ds[threadIdx.x] = pj * (dot(dout + row, vb + j * ks, hd) - Dr) * scale;
			}
			__syncthreads();
			for (int i = 0; i < FD; i++) {
				int d = threadIdx.x + i * AT;

				if (d >= hd)
					break;
				for (int jj = 0; jj < n; jj++)
					a[i] += ds[jj] * kb[(j0 + jj) * ks + d];
			}
			__syncthreads();
		}
		for (int i = 0; i < FD; i++) {
			int d = threadIdx.x + i * AT;

			if (d < hd)
				dq[row + d] += a[i];
		}
	}
}

/* Pass 2, per key row (b, g, j): over the group's query heads h and rows
 * t >= j, tiles of AT rows, one row per thread: p = exp(s - lse), ds as in
 * pass 1; then dk_j += sum ds q_t, dv_j += sum p dout_t. */
static __global__ void flash_bwd_keys(float *dk, float *dv, const float *D,
				      const float *dout, const float *lse,
				      const float *q, const float *k,
				      const float *v, int B, int T, int nh,
				      int nkv, int hd)
{
	__shared__ float P[AT];
	__shared__ float DS[AT];
	float scale = 1.0f / sqrtf((float)hd);
	int rep = nh / nkv;
	long rows = (long)B * nkv * T;

	for (long r = blockIdx.x; r < rows; r += gridDim.x) {
		int j = (int)(r % T), g = (int)((r / T) % nkv);
		long b = r / ((long)T * nkv);
		long kr = ((b * T + j) * nkv + g) * hd;
		float ak[FD], av[FD];

		for (int i = 0; i < FD; i++)
			ak[i] = av[i] = 0;
		for (int h = g * rep; h < (g + 1) * rep; h++) {
			long hr = (b * nh + h) * T;

			for (int t0 = j; t0 < T; t0 += AT) {
				int t = t0 + threadIdx.x, n = T - t0 < AT ? T - t0 : AT;

				if (t < T) {
					long qr = ((b * T + t) * nh + h) * hd;
					float pt = expf(dot(q + qr, k + kr, hd) * scale - lse[hr + t]);

					P[threadIdx.x] = pt;
					DS[threadIdx.x] = pt * (dot(dout + qr, v + kr, hd) - D[hr + t]) * scale;
				}
				__syncthreads();
				for (int i = 0; i < FD; i++) {
					int d = threadIdx.x + i * AT;

					if (d >= hd)
						break;
					for (int tt = 0; tt < n; tt++) {
						long qr = ((b * T + t0 + tt) * nh + h) * hd;

						ak[i] += DS[tt] * q[qr + d];
						av[i] += P[tt] * dout[qr + d];
					}
				}
				__syncthreads();
			}
		}
		for (int i = 0; i < FD; i++) {
			int d = threadIdx.x + i * AT;

			if (d < hd) {
				dk[kr + d] += ak[i];
				dv[kr + d] += av[i];
			}
		}
	}
}

extern "C" int fw_cuda_attn_flash_fwd(float *out, float *lse, const float *q,
				      const float *k, const float *v, int B,
				      int T, int nh, int nkv, int hd)
{
	long rows = (long)B * nh * T;

	if (hd > AT * FD)
		return fw_cuda_fail(__FILE__, __LINE__, "fw_cuda_attn_flash_fwd",
				    "head_dim above 512");
	if (rows > 0 && hd > 0)
		LAUNCH(flash_fwd, grid_rows(rows), AT, out, lse, q, k, v, B, T,
		       nh, nkv, hd);
	return 0;
}

extern "C" int fw_cuda_attn_flash_bwd(float *dq, float *dk, float *dv,
				      float *scratch, const float *dout,
				      const float *out, const float *lse,
				      const float *q, const float *k,
				      const float *v, int B, int T, int nh,
				      int nkv, int hd)
{
	long rows = (long)B * nh * T;

	if (hd > AT * FD)
		return fw_cuda_fail(__FILE__, __LINE__, "fw_cuda_attn_flash_bwd",
				    "head_dim above 512");
	if (rows <= 0 || hd <= 0)
		return 0;
	LAUNCH(flash_bwd_rows, grid_rows(rows), AT, dq, scratch, dout, out, lse,
	       q, k, v, B, T, nh, nkv, hd);
	LAUNCH(flash_bwd_keys, grid_rows((long)B * nkv * T), AT, dk, dv, scratch,
	       dout, lse, q, k, v, B, T, nh, nkv, hd);
	return 0;
}
