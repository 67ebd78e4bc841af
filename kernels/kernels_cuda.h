/*
 * kernels_cuda.h — the model's kernels on an NVIDIA GPU (CUDA, cuBLAS).
 *
 * Every op of kernels.h has a twin here with the prefix fw_cuda_ instead of
 * fw_, the same argument order (outputs, inputs, sizes and scalars), the
 * same shapes (float32, row-major, contiguous) and the same meaning,
 * including which backward ops ACCUMULATE (+=) and which write.  Read the
 * contract of each op in kernels.h; this header states only what differs:
 *
 *  - Every tensor and index argument is a DEVICE pointer (fw_cuda_malloc),
 *    except where a host pointer is said.  Scalars are passed by value.
 *  - Ops are queued on the default stream and return before the GPU is
 *    done; results are visible to later ops and to fw_cuda_memcpy_d2h in
 *    queue order.  fw_cuda_sync waits for all of them.
 *  - Every function returns 0 on success or -1 on failure (a CUDA or
 *    cuBLAS call failed, a launch was refused).  The message, "FILE:LINE:
 *    call: reason", is kept per thread and read with fw_cuda_error().
 *    Faults inside a kernel surface asynchronously, at the next call that
 *    waits (fw_cuda_sync, a copy).  Nothing here prints or exits.
 *  - The plain C ops of kernels.h are the oracle: tests/gpu/check compares
 *    each op here with them on random inputs, with stated tolerances.
 *  - Ops with several blocks that add into the same output are written so
 *    that each output element has exactly one writer: results do not depend
 *    on scheduling (no atomics), so two runs give the same bits.
 *  - Ops need nothing from fw_cuda_init except fw_cuda_matmul_*, which use
 *    the cuBLAS handle it creates (created on first use otherwise; call
 *    fw_cuda_init once before using the ops from several threads).
 *
 * fw_rope_table has no twin: compute the tables on the host and copy them.
 *
 * The functions exist only in a build with CUDA=1 (the library is then
 * compiled with -DFW_CUDA=1); tests/gpu/README says how to check them.
 */
#ifndef FW_KERNELS_CUDA_H
#define FW_KERNELS_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- device, memory, errors ------------------------------------------- */

/* Returns the number of CUDA devices this process can use, 0 when there is
 * none or no usable driver (fw_cuda_error() then says why).  Cannot fail. */
int fw_cuda_device_count(void);

/* Makes device dev (0-based) current for this thread and creates the
 * cuBLAS handle.  When name is not NULL it receives a description of the
 * device ("NAME, sm_XY, N MiB"), truncated to namelen bytes.  Returns 0,
 * or -1 (no such device, no driver, cuBLAS unavailable). */
int fw_cuda_init(int dev, char *name, size_t namelen);

/* Makes device dev current for the calling thread (after fw_cuda_init in
 * another thread: CUDA's current device is per thread).  Returns 0 or -1. */
int fw_cuda_set_device(int dev);

/* The calling thread's current device, -1 when it cannot be read. */
int fw_cuda_current_device(void);

/* Destroys the cuBLAS handle (fw_cuda_init or first use creates it again).
 * Cannot fail. */
void fw_cuda_shutdown(void);

/* The message of the last failure in this thread ("" when none).  The
 * string is owned by the library and valid until the next call. */
const char *fw_cuda_error(void);

/* Allocates bytes of device memory (bytes 0 gives a valid unique pointer
 * too).  Returns it (fw_cuda_free), or NULL. */
void *fw_cuda_malloc(size_t bytes);

/* Frees what fw_cuda_malloc returned; fw_cuda_free(NULL) does nothing. */
void fw_cuda_free(void *p);

/* Copies bytes from host src to device dst, in queue order; src may be
 * reused when it returns.  Returns 0, or -1. */
int fw_cuda_memcpy_h2d(void *dst, const void *src, size_t bytes);

/* Copies bytes from device src to host dst after every queued op is done.
 * Returns 0, or -1 (also for an earlier kernel's asynchronous fault). */
int fw_cuda_memcpy_d2h(void *dst, const void *src, size_t bytes);

/* Copies bytes between device buffers (queued).  Returns 0, or -1. */
int fw_cuda_memcpy_d2d(void *dst, const void *src, size_t bytes);

/* Sets bytes of device memory at p to zero (queued).  Returns 0, or -1. */
int fw_cuda_zero(void *p, size_t bytes);

/* Waits until every queued op is done.  Returns 0, or -1 with the first
 * asynchronous fault. */
int fw_cuda_sync(void);

/* ---- the ops of kernels.h ----------------------------------------------- */

/* As fw_matmul_fwd: out (M, N) = inp (M, K) @ w^T + bias, w (N, K), bias
 * (N) or NULL.  cuBLAS sgemm in full f32 (no TF32). */
int fw_cuda_matmul_fwd(float *out, const float *inp, const float *w,
		       const float *bias, int M, int K, int N);

/* Sets how fw_cuda_matmul_* multiply: on = 1 in bf16 on the tensor
 * cores with f32 accumulation (cuBLAS CUBLAS_COMPUTE_32F_FAST_16BF: the
 * f32 operands are rounded to bf16, the sums kept in f32), on = 0 in full
 * f32 (the default).  Cannot fail. */
void fw_cuda_set_bf16(int on);

/* As fw_matmul_bwd: dinp (M, K) += dout @ w; dw (N, K) += dout^T @ inp;
 * dbias (N) += column sums of dout; any of the three may be NULL. */
int fw_cuda_matmul_bwd(float *dinp, float *dw, float *dbias,
		       const float *dout, const float *inp, const float *w,
		       int M, int K, int N);

/* As fw_embed_fwd: out (N, C) = rows ids[i] of wte (V, C). */
int fw_cuda_embed_fwd(float *out, const int32_t *ids, const float *wte,
		      int N, int C);

/* As fw_embed_bwd: dwte (V, C) += scatter of dout (N, C) onto rows
 * ids[i], summed in row order (the same order as the C version). */
int fw_cuda_embed_bwd(float *dwte, const float *dout, const int32_t *ids,
		      int N, int C);

/* As fw_rmsnorm_fwd: out (N, C), rstd (N) from inp (N, C) and w (C).  out
 * may alias inp. */
int fw_cuda_rmsnorm_fwd(float *out, float *rstd, const float *inp,
			const float *w, int N, int C, float eps);

/* As fw_rmsnorm_bwd: dinp (N, C) += ..., dw (C) += ....  dinp must not
 * alias dout. */
int fw_cuda_rmsnorm_bwd(float *dinp, float *dw, const float *dout,
			const float *inp, const float *w, const float *rstd,
			int N, int C);

/* As fw_rope_fwd: rotates x (N, nh, hd) in place; pos (N) device ids,
 * cos_t and sin_t (maxT, hd/2) device copies of fw_rope_table's. */
int fw_cuda_rope_fwd(float *x, const int32_t *pos, const float *cos_t,
		     const float *sin_t, int N, int nh, int hd);

/* As fw_rope_bwd: rotates the gradient dx (N, nh, hd) back, in place. */
int fw_cuda_rope_bwd(float *dx, const int32_t *pos, const float *cos_t,
		     const float *sin_t, int N, int nh, int hd);

/* As fw_attn_fwd: out (B, T, nh, hd), att (B, nh, T, T) from q (B, T, nh,
 * hd), k and v (B, T, nkv, hd). */
int fw_cuda_attn_fwd(float *out, float *att, const float *q, const float *k,
		     const float *v, int B, int T, int nh, int nkv, int hd);

/* As fw_attn_bwd: dq, dk, dv += ...; scratch (B, nh, T, T) overwritten. */
int fw_cuda_attn_bwd(float *dq, float *dk, float *dv, float *scratch,
		     const float *dout, const float *att, const float *q,
		     const float *k, const float *v, int B, int T, int nh,
		     int nkv, int hd);

/* As fw_attn_cached: out (B, Tq, nh, hd) from q and the caches kc, vc (B,
 * maxT, nkv, hd); scratch at least B*Tq*nh*(pos0+Tq) floats. */
int fw_cuda_attn_cached(float *out, float *scratch, const float *q,
			const float *kc, const float *vc, int B, int Tq,
			int pos0, int maxT, int nh, int nkv, int hd);

/* As fw_attn_cached_pos: a start position per sequence, pos0 (B) in
 * device memory; scratch at least B*Tq*nh*maxT floats. */
int fw_cuda_attn_cached_pos(float *out, float *scratch, const float *q,
			    const float *kc, const float *vc,
			    const int32_t *pos0, int B, int Tq, int maxT,
			    int nh, int nkv, int hd);

/* Causal GQA attention as fw_attn_fwd without the (T, T) matrix
 * (flash-style, online softmax): out (B, T, nh, hd) from q (B, T, nh, hd),
 * k and v (B, T, nkv, hd); lse (B, nh, T) receives each row's log-sum-exp
 * of the scaled scores, kept for backward.  hd <= 512. */
int fw_cuda_attn_flash_fwd(float *out, float *lse, const float *q,
			   const float *k, const float *v, int B, int T,
			   int nh, int nkv, int hd);

/* Backward of fw_cuda_attn_flash_fwd: dq, dk, dv += ..., recomputing the
 * probabilities from q, k and lse; out is the forward's output, scratch
 * (B, nh, T) floats overwritten. */
int fw_cuda_attn_flash_bwd(float *dq, float *dk, float *dv, float *scratch,
			   const float *dout, const float *out,
			   const float *lse, const float *q, const float *k,
			   const float *v, int B, int T, int nh, int nkv,
			   int hd);

/* As fw_swiglu_fwd: out (n) = silu(gate) * up. */
int fw_cuda_swiglu_fwd(float *out, const float *gate, const float *up,
		       long n);

/* As fw_swiglu_bwd: dgate, dup (n) += ... from dout (n). */
int fw_cuda_swiglu_bwd(float *dgate, float *dup, const float *dout,
		       const float *gate, const float *up, long n);

/* As fw_xent_fwd: logp (N), lse (N) from logits (N, V) and targets (N). */
int fw_cuda_xent_fwd(float *logp, float *lse, const float *logits,
		     const int32_t *targets, int N, int V);

/* As fw_xent_bwd: WRITES dlogits (N, V) from logits, lse, targets and
 * dlogp (N); dlogits may alias logits. */
int fw_cuda_xent_bwd(float *dlogits, const float *logits, const float *lse,
		     const int32_t *targets, const float *dlogp, int N, int V);

/* As fw_gather: out[i] = x[idx[i]] (n). */
int fw_cuda_gather(float *out, const float *x, const int64_t *idx, long n);

/* As fw_scatter_add: x[idx[i]] += val[i] (n), the indices distinct. */
int fw_cuda_scatter_add(float *x, const int64_t *idx, const float *val, long n);

/* As fw_adamw: one AdamW step over p, m, v (n, updated) with g (n); the
 * bias corrections are computed on the host as the C version does. */
int fw_cuda_adamw(float *p, float *m, float *v, const float *g, long n,
		  float lr, float b1, float b2, float eps, float wd,
		  long step);

/* As fw_sumsq, but the sum of x[i]^2 over n floats (accumulated in double)
 * is WRITTEN to *out, one double in device memory (copy it back with
 * fw_cuda_memcpy_d2h).  One block does the whole sum, so the result does
 * not depend on scheduling. */
int fw_cuda_sumsq(double *out, const float *x, long n);

/* As fw_scale: x (n) *= s. */
int fw_cuda_scale(float *x, float s, long n);

/* ---- NCCL: the all-reduce between GPUs ----------------------------------- */

/* Bytes of an NCCL id (ncclUniqueId). */
#define FW_NCCL_ID_BYTES 128

/* Draws a new id (rank 0 does, then gives it to every rank) into id, len
 * >= FW_NCCL_ID_BYTES bytes.  Returns 0, or -1. */
int fw_cuda_nccl_id(unsigned char *id, size_t len);

/* Joins the communicator of nranks processes named by id as rank, on the
 * current device (fw_cuda_init first; one GPU per rank).  Every rank must
 * call it.  Returns 0, or -1. */
int fw_cuda_nccl_init(const unsigned char *id, size_t len, int nranks,
		      int rank);

/* Sums x (n floats, device memory) in place over the ranks, and waits for
 * it.  Returns 0, or -1. */
int fw_cuda_nccl_sum(float *x, long n);

/* Leaves the communicator; nothing when there is none. */
void fw_cuda_nccl_free(void);

/* ---- helpers a model on the GPU needs ---------------------------------- */

/* out (n) = a + b (a residual connection); out may alias a or b. */
int fw_cuda_add(float *out, const float *a, const float *b, long n);

#ifdef __cplusplus
}
#endif

#endif
