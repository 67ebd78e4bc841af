/*
 * kernels.h — the model's compute kernels, one signature per op.
 *
 * Every op of the decoder-only transformer (Llama / Qwen family) is here
 * once, forward and backward.  kernels/cpu/ implements them in C (plain
 * loops, OpenBLAS for matrix products, an AVX-512 kernel for decoding's
 * few-row products over packed weights, a small thread pool for the rest);
 * kernels/cuda/ provides the same ops with the prefix fw_cuda_ instead of
 * fw_, the same argument order and meaning, on device pointers.  The plain
 * C versions (the *_ref functions and every op without a BLAS twin) are the
 * oracle the other implementations are tested against.
 *
 * Conventions, for every function below:
 *  - Tensors are float32, row-major, contiguous; shapes are given as
 *    (rows, cols) or (B, T, ...) with the last index fastest.
 *  - Arguments: outputs first, then inputs, then sizes and scalars.
 *  - Forward ops write their outputs (=).  Backward ops ACCUMULATE into
 *    parameter and input gradients (+=), so the caller zeroes gradients
 *    once per step and residual branches simply add up.  Exceptions are
 *    stated (fw_xent_bwd writes, and may work in place).
 *  - Kernels never allocate, never print and cannot fail; buffers come from
 *    the caller.  Sizes are ints (element counts), except flat parameter
 *    vectors (long).
 *  - N is a number of token rows (B*T), C the model width, V the
 *    vocabulary, nh / nkv the query / key-value head counts, hd the head
 *    width.
 *
 * Build: part of libflywheel (make).  Test: build/tests/test_kernels
 * (finite-difference gradient checks, BLAS versus plain C).
 */
#ifndef FW_KERNELS_H
#define FW_KERNELS_H

#include <stdint.h>

/* ---- threads ------------------------------------------------------------ */

/* Sets the number of threads the CPU kernels use; n <= 0 means the value
 * of $FW_THREADS, else the number of online CPUs.  Matrix products are
 * split over the same threads, one single-threaded OpenBLAS call each
 * (this sets OpenBLAS to one thread).  Call before or between kernel
 * calls, not during one.  Cannot fail. */
void fw_kernels_set_threads(int n);

/* Returns the number of threads the CPU kernels use (>= 1), the default
 * of fw_kernels_set_threads(0) when none was set.  Threads may call it,
 * and the kernels, at once: the default is set once, by the first. */
int fw_kernels_threads(void);

/* Runs fn(ctx, i0, i1) over [0, n) split into contiguous chunks, one per
 * pool thread, and returns when all are done.  fn must not call
 * fw_parallel_for itself (nested calls run serially).  Cannot fail. */
void fw_parallel_for(int n, void (*fn)(void *ctx, int i0, int i1), void *ctx);

/* ---- matmul (a linear layer) ------------------------------------------- */

/* out (M, N) = inp (M, K) @ w^T + bias, with w (N, K) as a Hugging Face
 * nn.Linear stores it and bias (N) or NULL.  OpenBLAS sgemm. */
void fw_matmul_fwd(float *out, const float *inp, const float *w,
		   const float *bias, int M, int K, int N);

/* Backward of fw_matmul_fwd: dinp (M, K) += dout @ w; dw (N, K) +=
 * dout^T @ inp; dbias (N) += column sums of dout.  Any of dinp, dw, dbias
 * may be NULL to skip it.  OpenBLAS sgemm. */
void fw_matmul_bwd(float *dinp, float *dw, float *dbias, const float *dout,
		   const float *inp, const float *w, int M, int K, int N);

/* The same two ops in plain C loops: the oracle for the BLAS and CUDA
 * versions (agreement within 1e-5 relative in f32). */
void fw_matmul_fwd_ref(float *out, const float *inp, const float *w,
		       const float *bias, int M, int K, int N);
void fw_matmul_bwd_ref(float *dinp, float *dw, float *dbias,
		       const float *dout, const float *inp, const float *w,
		       int M, int K, int N);

/* The forward op for a few rows (decoding steps) over weights packed once.
 * fw_matmul_pack_len(K, N) is the floats a packed copy of w (N, K) takes:
 * N rounded up to a multiple of 48, times K.  fw_matmul_pack writes the
 * copy into wp: panels of 48 output columns, each K-major (for k = 0 ..
 * K-1 the 48 floats w[p*48 + j][k]), the last zero-padded.
 * fw_matmul_fwd_packed computes out (M, N) = inp (M, K) @ w^T + bias (N)
 * or NULL, as fw_matmul_fwd does, from wp (a packing of w, or NULL) with
 * an AVX-512 kernel where fw_matmul_pack_ok() and M <= 256, else from w
 * by fw_matmul_fwd.  The packed kernel sums each output over k in order
 * in float32 and then adds the bias, so its bits do not depend on the
 * other rows or on the threads (they differ from sgemm's by rounding).
 * fw_matmul_pack_ok returns 1 when the CPU has AVX-512F and
 * $FW_MATMUL_PACK is not "0" (read once), else 0.  None of them can
 * fail. */
long fw_matmul_pack_len(int K, int N);
void fw_matmul_pack(float *wp, const float *w, int K, int N);
void fw_matmul_fwd_packed(float *out, const float *inp, const float *w,
			  const float *wp, const float *bias, int M, int K,
			  int N);
int fw_matmul_pack_ok(void);


/* ---- sampling (host memory only; fw_sample's passes) --------------------- */

/* fw_logits_argmax returns the first index of the largest of x[0..n) that
 * is not NaN, its value in *mx (0 and -INFINITY when there is none).
 * fw_exp_shift writes out[j] = e((x[j] - shift) / temp) for j < n (no
 * division when temp is 1): e is exp for arguments in [-86, 0] (shift by
 * the largest x) to within 2 float ulps, 0 below -86 and for NaN.
 * fw_sum_block sums n <= FW_SUM_BLOCK floats in double, in 16 lanes (lane
 * l adds e[l], e[l + 16], ... in order; then the lanes in order);
 * fw_sum_blocks adds fw_sum_block of each FW_SUM_BLOCK floats in order.
 * Each has an AVX-512 version, chosen at run time, that gives the bits of
 * its *_ref (plain C) twin.  None can fail. */
#define FW_SUM_BLOCK 256
int fw_logits_argmax(const float *x, int n, float *mx);
void fw_exp_shift(float *out, const float *x, int n, float shift, float temp);
double fw_sum_block(const float *e, int n);
double fw_sum_blocks(const float *e, int n);
int fw_logits_argmax_ref(const float *x, int n, float *mx);
void fw_exp_shift_ref(float *out, const float *x, int n, float shift, float temp);
double fw_sum_block_ref(const float *e, int n);
/* ---- embedding ----------------------------------------------------------- */

/* out (N, C) = rows ids[i] of wte (V, C).  Every id must be in [0, V). */
void fw_embed_fwd(float *out, const int32_t *ids, const float *wte, int N,
		  int C);

/* dwte (V, C) += scatter of dout (N, C) onto rows ids[i]. */
void fw_embed_bwd(float *dwte, const float *dout, const int32_t *ids, int N,
		  int C);

/* ---- RMSNorm ------------------------------------------------------------- */

/* For each row r of inp (N, C): rstd[r] = 1 / sqrt(mean(inp[r]^2) + eps);
 * out[r] = inp[r] * rstd[r] * w, w (C).  rstd (N) is kept for backward.
 * out may alias inp.  (Qwen3's per-head q/k norm is this op with
 * N = rows * heads and C = hd.) */
void fw_rmsnorm_fwd(float *out, float *rstd, const float *inp,
		    const float *w, int N, int C, float eps);

/* Backward of fw_rmsnorm_fwd: dinp (N, C) += ..., dw (C) += ...; inp and
 * rstd as the forward saw and produced them.  dinp must not alias dout. */
void fw_rmsnorm_bwd(float *dinp, float *dw, const float *dout,
		    const float *inp, const float *w, const float *rstd, int N,
		    int C);

/* ---- RoPE ---------------------------------------------------------------- */

/* Fills the rotary tables cos, sin (maxT, hd/2): angle(p, i) =
 * p * theta^(-2i/hd), computed in double.  hd must be even. */
void fw_rope_table(float *cos_t, float *sin_t, int maxT, int hd,
		   double theta);

/* As fw_rope_table with the hd/2 frequencies given: angle(p, i) =
 * p * inv_freq[i] (for scaled RoPE variants, computed by the caller). */
void fw_rope_table_inv(float *cos_t, float *sin_t, int maxT, int hd,
		       const float *inv_freq);

/* Rotates x (N, nh, hd) in place, row r at position pos[r] (< maxT of the
 * tables), in the Hugging Face "rotate_half" layout: element i pairs with
 * i + hd/2.  x1' = x1 cos - x2 sin, x2' = x2 cos + x1 sin. */
void fw_rope_fwd(float *x, const int32_t *pos, const float *cos_t,
		 const float *sin_t, int N, int nh, int hd);

/* Backward of fw_rope_fwd, in place on the gradient dx (N, nh, hd): the
 * rotation by the opposite angle (writes, as the op is its own buffer). */
void fw_rope_bwd(float *dx, const int32_t *pos, const float *cos_t,
		 const float *sin_t, int N, int nh, int hd);

/* ---- causal attention with grouped-query heads ------------------------- */

/* Causal self-attention within each of B sequences of length T.
 * q (B, T, nh, hd), k and v (B, T, nkv, hd), nh a multiple of nkv (query
 * head h reads key-value head h / (nh / nkv)); scale 1 / sqrt(hd).
 * out (B, T, nh, hd); att (B, nh, T, T) receives the softmax
 * probabilities (upper triangle zero), kept for backward. */
void fw_attn_fwd(float *out, float *att, const float *q, const float *k,
		 const float *v, int B, int T, int nh, int nkv, int hd);

/* Backward of fw_attn_fwd: dq, dk, dv += ...; scratch (B, nh, T, T) is
 * overwritten. */
void fw_attn_bwd(float *dq, float *dk, float *dv, float *scratch,
		 const float *dout, const float *att, const float *q,
		 const float *k, const float *v, int B, int T, int nh, int nkv,
		 int hd);

/* The same two ops as plain loops over the causal triangle: the oracle
 * for the sgemm versions above and the CUDA ones (1e-5 relative). */
void fw_attn_fwd_ref(float *out, float *att, const float *q, const float *k,
		     const float *v, int B, int T, int nh, int nkv, int hd);
void fw_attn_bwd_ref(float *dq, float *dk, float *dv, float *scratch,
		     const float *dout, const float *att, const float *q,
		     const float *k, const float *v, int B, int T, int nh,
		     int nkv, int hd);

/* Attention of Tq new query rows against a key-value cache, for
 * incremental decoding.  q (B, Tq, nh, hd) holds positions pos0 ..
 * pos0+Tq-1 of each of B sequences; kc, vc (B, maxT, nkv, hd) already hold
 * keys and values for positions 0 .. pos0+Tq-1.  Query row t attends to
 * cache positions 0 .. pos0+t.  out (B, Tq, nh, hd); scratch holds at
 * least B*Tq*nh*(pos0+Tq) floats.  Forward only. */
void fw_attn_cached(float *out, float *scratch, const float *q,
		    const float *kc, const float *vc, int B, int Tq, int pos0,
		    int maxT, int nh, int nkv, int hd);

/* As fw_attn_cached with a start position per sequence: sequence b's rows
 * are positions pos0[b] .. pos0[b]+Tq-1 and its cache holds 0 ..
 * pos0[b]+Tq-1, so sequences of different lengths decode together.
 * scratch holds at least B*Tq*nh*maxT floats. */
void fw_attn_cached_pos(float *out, float *scratch, const float *q,
			const float *kc, const float *vc, const int32_t *pos0,
			int B, int Tq, int maxT, int nh, int nkv, int hd);

/* ---- SwiGLU -------------------------------------------------------------- */

/* out (n) = silu(gate) * up, silu(x) = x / (1 + exp(-x)). */
void fw_swiglu_fwd(float *out, const float *gate, const float *up, long n);

/* dgate, dup (n) += ... from dout (n). */
void fw_swiglu_bwd(float *dgate, float *dup, const float *dout,
		   const float *gate, const float *up, long n);

/* ---- log-softmax / cross-entropy ------------------------------------------ */

/* For each row r of logits (N, V): lse[r] = log sum exp logits[r];
 * logp[r] = logits[r][targets[r]] - lse[r], or 0 where targets[r] < 0
 * (an ignored position).  Per-token weights enter through fw_xent_bwd. */
void fw_xent_fwd(float *logp, float *lse, const float *logits,
		 const int32_t *targets, int N, int V);

/* Backward through logp = log_softmax(logits)[target]: given dlogp (N),
 * the gradient of the loss with respect to each logp (for a weighted
 * loss -sum w_r logp_r / norm it is -w_r / norm), WRITES
 * dlogits[r] = dlogp[r] * (onehot(targets[r]) - softmax(logits[r])), zero
 * rows where targets[r] < 0.  dlogits may alias logits (in place). */
void fw_xent_bwd(float *dlogits, const float *logits, const float *lse,
		 const int32_t *targets, const float *dlogp, int N, int V);

/* out[i] = x[idx[i]] for i < n (soft targets' logits).  Cannot fail. */
void fw_gather(float *out, const float *x, const int64_t *idx, long n);

/* x[idx[i]] += val[i] for i < n; the indices must be distinct (so the
 * result does not depend on an order of additions).  Cannot fail. */
void fw_scatter_add(float *x, const int64_t *idx, const float *val, long n);

/* ---- optimizer ------------------------------------------------------------ */

/* One AdamW step (PyTorch's torch.optim.AdamW) over n parameters:
 * p -= lr*wd*p; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 * p -= lr * (m / (1-b1^step)) / (sqrt(v / (1-b2^step)) + eps).
 * step counts from 1.  p, m, v updated in place; g read. */
void fw_adamw(float *p, float *m, float *v, const float *g, long n, float lr,
	      float b1, float b2, float eps, float wd, long step);

/* Returns sum of x[i]^2 over n floats, accumulated in double. */
double fw_sumsq(const float *x, long n);

/* x (n) *= s. */
void fw_scale(float *x, float s, long n);

#endif
