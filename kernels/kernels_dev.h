/*
 * kernels_dev.h — the ops of kernels.h on a device chosen at run time: the
 * CPU (the C kernels of kernels/cpu/) or a CUDA GPU (kernels_cuda.h).
 *
 * The model (lib/model/fw_model.c) is written once against these functions; each
 * takes the device first and calls the C op or its fw_cuda_ twin, with the
 * same arguments and meaning (read the contracts in kernels.h).  Pointers
 * are device pointers of that device: for FW_DEV_CPU plain host memory,
 * for FW_DEV_CUDA memory from fw_dev_alloc.  Host pointers are named so
 * where an argument is one.
 *
 * Errors: on the CPU nothing can fail.  On CUDA the ops are queued and a
 * failure (a refused launch, a cuBLAS error) is kept, the first one per
 * thread, with the later ops of the thread skipped; fw_dev_check waits for
 * the device and reports it.  Callers check once per forward, backward or
 * step, not per op.
 *
 * Only this file's implementation (kernels/dev.c) knows whether the build
 * has CUDA; a build without it has the same functions, and asking it for
 * FW_DEV_CUDA fails with a message saying so.
 */
#ifndef FW_KERNELS_DEV_H
#define FW_KERNELS_DEV_H

#include <stddef.h>
#include <stdint.h>

enum { FW_DEV_CPU = 0, FW_DEV_CUDA = 1 };

/* ---- choosing the device ------------------------------------------------ */

/* Chooses the device later fw_model_new / fw_model_load put models on
 * (the process's default; FW_DEV_CPU until this is called).  spec is
 * "cpu", "cuda" or "cuda:N"; NULL means $FW_DEVICE, and when that is unset
 * or empty "cuda" if this build has CUDA and sees a GPU, else "cpu".
 * "cuda" alone picks GPU (local rank mod GPUs) under an MPI or Slurm
 * launcher ($OMPI_COMM_WORLD_LOCAL_RANK, $SLURM_LOCALID), else GPU 0.
 * Matrix products on CUDA run in bf16 with f32 accumulation unless
 * $FW_PRECISION is "f32".  Returns the device (FW_DEV_*), or -1 with err
 * filled: a bad spec, "cuda" in a build without CUDA, no such GPU. */
int fw_dev_select(const char *spec, char *err, size_t errlen);

/* The device fw_dev_select chose (FW_DEV_CPU before any call). */
int fw_dev_current(void);

/* A description of the chosen device ("cpu", "cuda:0 (NAME, sm_90, ...)"),
 * owned by the library. */
const char *fw_dev_name(void);

/* 1 when matrix products on the CUDA device run in bf16 (f32 accumulate),
 * 0 in full f32. */
int fw_dev_bf16(void);

/* Sets bf16 (on = 1) or f32 (on = 0) products for CUDA; for checks. */
void fw_dev_set_bf16(int on);

/* ---- memory and errors -------------------------------------------------- */

/* bytes of memory on dev, 64-byte aligned on the CPU.  Returns it
 * (fw_dev_free), or NULL. */
void *fw_dev_alloc(int dev, size_t bytes);

/* Frees what fw_dev_alloc(dev, ...) returned; NULL does nothing. */
void fw_dev_free(int dev, void *p);

/* Copies bytes: host src to device dst (h2d), device src to host dst
 * (d2h, waits for queued ops), device to device (d2d), and zeroes device
 * memory.  On the CPU these are memmove / memset (and nothing when dst is
 * src).  A CUDA failure is kept as the ops' are. */
void fw_dev_h2d(int dev, void *dst, const void *src, size_t bytes);
void fw_dev_d2h(int dev, void *dst, const void *src, size_t bytes);
void fw_dev_d2d(int dev, void *dst, const void *src, size_t bytes);
void fw_dev_zero(int dev, void *p, size_t bytes);

/* Waits for every op queued on dev, then returns 0, or -1 with err
 * ("device: MESSAGE") holding this thread's first failure since the last
 * check, which is then cleared. */
int fw_dev_check(int dev, char *err, size_t errlen);

/* ---- between processes ------------------------------------------------------ */

/* Joins the all-reduce between the nranks processes of a data-parallel
 * run for sums on the chosen CUDA device (NCCL, one GPU per rank).  Rank 0
 * draws the communicator's id and bcast(buf, n, ctx) must give every rank
 * rank 0's n bytes (MPI in train-step).  Every rank calls it.  Returns 0,
 * or -1 with err filled (the CPU chosen, a build without CUDA, NCCL
 * refused). */
int fw_dev_comm_init(int rank, int nranks,
		     int (*bcast)(unsigned char *buf, int n, void *ctx),
		     void *ctx, char *err, size_t errlen);

/* Sums x (n floats of device memory) in place over the ranks of
 * fw_dev_comm_init; ctx is unused (the shape of struct fw_train_cfg's
 * allreduce_dev).  Returns 0, or -1 (the failure kept for
 * fw_dev_check). */
int fw_dev_comm_sum(float *x, long n, void *ctx);

/* Leaves the all-reduce; nothing when not joined. */
void fw_dev_comm_free(void);

/* ---- the ops ------------------------------------------------------------- */

void fw_dev_matmul_fwd(int dev, float *out, const float *inp, const float *w,
		       const float *bias, int M, int K, int N);
void fw_dev_matmul_bwd(int dev, float *dinp, float *dw, float *dbias,
		       const float *dout, const float *inp, const float *w,
		       int M, int K, int N);
void fw_dev_embed_fwd(int dev, float *out, const int32_t *ids,
		      const float *wte, int N, int C);
void fw_dev_embed_bwd(int dev, float *dwte, const float *dout,
		      const int32_t *ids, int N, int C);
void fw_dev_rmsnorm_fwd(int dev, float *out, float *rstd, const float *inp,
			const float *w, int N, int C, float eps);
void fw_dev_rmsnorm_bwd(int dev, float *dinp, float *dw, const float *dout,
			const float *inp, const float *w, const float *rstd,
			int N, int C);
void fw_dev_rope_fwd(int dev, float *x, const int32_t *pos,
		     const float *cos_t, const float *sin_t, int N, int nh,
		     int hd);
void fw_dev_rope_bwd(int dev, float *dx, const int32_t *pos,
		     const float *cos_t, const float *sin_t, int N, int nh,
		     int hd);

/* Training attention.  The CPU keeps the (B, nh, T, T) probabilities in
 * att for backward (fw_attn_fwd); CUDA runs a flash-style kernel (online
 * softmax) that keeps only the log-sum-exp of each row, (B, nh, T) floats,
 * in att.  fw_dev_attn_floats says how many floats att and the backward
 * scratch need on dev.  Backward also reads the forward's output out. */
size_t fw_dev_attn_floats(int dev, int B, int T, int nh);
void fw_dev_attn_fwd(int dev, float *out, float *att, const float *q,
		     const float *k, const float *v, int B, int T, int nh,
		     int nkv, int hd);
void fw_dev_attn_bwd(int dev, float *dq, float *dk, float *dv, float *scratch,
		     const float *dout, const float *out, const float *att,
		     const float *q, const float *k, const float *v, int B,
		     int T, int nh, int nkv, int hd);
void fw_dev_attn_cached(int dev, float *out, float *scratch, const float *q,
			const float *kc, const float *vc, int B, int Tq,
			int pos0, int maxT, int nh, int nkv, int hd);
/* pos0 (B) is a HOST array; the CUDA path copies it to pos0_dev (B int32
 * of device memory the caller provides; unused on the CPU). */
void fw_dev_attn_cached_pos(int dev, float *out, float *scratch,
			    const float *q, const float *kc, const float *vc,
			    const int32_t *pos0, int32_t *pos0_dev, int B,
			    int Tq, int maxT, int nh, int nkv, int hd);
void fw_dev_swiglu_fwd(int dev, float *out, const float *gate,
		       const float *up, long n);
void fw_dev_swiglu_bwd(int dev, float *dgate, float *dup, const float *dout,
		       const float *gate, const float *up, long n);
void fw_dev_xent_fwd(int dev, float *logp, float *lse, const float *logits,
		     const int32_t *targets, int N, int V);
void fw_dev_xent_bwd(int dev, float *dlogits, const float *logits,
		     const float *lse, const int32_t *targets,
		     const float *dlogp, int N, int V);
void fw_dev_gather(int dev, float *out, const float *x, const int64_t *idx, long n);
void fw_dev_scatter_add(int dev, float *x, const int64_t *idx, const float *val, long n);
void fw_dev_adamw(int dev, float *p, float *m, float *v, const float *g,
		  long n, float lr, float b1, float b2, float eps, float wd,
		  long step);
/* Sum of x[i]^2 (double), waiting for the device; NAN after a failure. */
double fw_dev_sumsq(int dev, const float *x, long n);
void fw_dev_scale(int dev, float *x, float s, long n);
/* out (n) = a + b; out may alias a or b. */
void fw_dev_add(int dev, float *out, const float *a, const float *b, long n);

#endif
