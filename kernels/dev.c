/*
 * dev.c — the ops of kernels.h on the device chosen at run time
 * (kernels_dev.h): a switch per op between the C kernel and its CUDA twin.
 *
 * The only file of the library whose code depends on FW_CUDA: without it
 * every function exists and FW_DEV_CUDA is refused by fw_dev_select, so no
 * CUDA model can be made.  `make gpu-emu` compiles this file again with
 * FW_CUDA and links it with the emulated CUDA kernels.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "kernels_dev.h"
#ifdef FW_CUDA
#include "kernels_cuda.h"
#endif

static int cur = FW_DEV_CPU;
static int bf16;
static char name[320] = "cpu";

#ifdef FW_CUDA
/* The first failure of this thread since the last fw_dev_check. */
static __thread int failed;
static __thread char failmsg[512];

/* The CUDA device fw_dev_select chose (-1: none), and the one this thread
 * made current.  CUDA's current device is per thread and starts at 0, so a
 * thread that did not select (a -j worker, serve's decoding thread) is
 * bound to the chosen one before its first CUDA call. */
static int curdev = -1;
static __thread int bound = -1;

static void bind_thread(void)
{
	if (curdev >= 0 && bound != curdev && !failed) {
		if (fw_cuda_set_device(curdev)) {
			failed = 1;
			snprintf(failmsg, sizeof(failmsg), "%s", fw_cuda_error());
		} else {
			bound = curdev;
		}
	}
}

/* Runs a CUDA call unless an earlier one failed; keeps its failure. */
#define CU(call)                                                           \
	do {                                                               \
		bind_thread();                                             \
		if (!failed && (call)) {                                   \
			failed = 1;                                        \
			snprintf(failmsg, sizeof(failmsg), "%s",           \
				 fw_cuda_error());                         \
		}                                                          \
	} while (0)
#endif

#ifdef FW_CUDA
static int local_rank(void)
{
	const char *v = getenv("OMPI_COMM_WORLD_LOCAL_RANK");

	if (!v || !*v)
		v = getenv("SLURM_LOCALID");
	return v && *v ? atoi(v) : 0;
}
#endif

int fw_dev_select(const char *spec, char *err, size_t errlen)
{
	int n = -1, autosel = 0;
	char *end;
	const char *what = "device";

	if (!spec || !*spec) {
		spec = getenv("FW_DEVICE");
		what = "FW_DEVICE";
	}
	if (!spec || !*spec) {
		spec = "cuda";
		autosel = 1;
	}
	if (!strcmp(spec, "cpu")) {
#ifdef FW_CUDA
		curdev = -1;
#endif
		cur = FW_DEV_CPU;
		snprintf(name, sizeof(name), "cpu");
		return cur;
	}
	if (strncmp(spec, "cuda", 4) || (spec[4] && spec[4] != ':')) {
		snprintf(err, errlen, "bad %s '%s' (cpu, cuda or cuda:N)", what, spec);
		return -1;
	}
	if (spec[4] == ':') {
		n = (int)strtol(spec + 5, &end, 10);
		if (end == spec + 5 || *end || n < 0) {
			snprintf(err, errlen, "bad %s '%s' (cpu, cuda or cuda:N)", what, spec);
			return -1;
		}
	}
#ifdef FW_CUDA
	{
		int count = fw_cuda_device_count();
		char desc[256] = "";
		const char *p = getenv("FW_PRECISION");

		if (count <= 0) {
			if (autosel) {
				curdev = -1;
				cur = FW_DEV_CPU;
				snprintf(name, sizeof(name), "cpu");
				return cur;
			}
			snprintf(err, errlen, "device '%s': no CUDA device (%s)", spec,
				 *fw_cuda_error() ? fw_cuda_error() : "none found");
			return -1;
		}
		if (n < 0)
			n = local_rank() % count;
		if (n >= count) {
			snprintf(err, errlen, "device '%s': only %d CUDA device%s", spec,
				 count, count == 1 ? "" : "s");
			return -1;
		}
		if (fw_cuda_init(n, desc, sizeof(desc))) {
			snprintf(err, errlen, "device '%s': %s", spec, fw_cuda_error());
			return -1;
		}
		if (p && *p && strcmp(p, "f32") && strcmp(p, "bf16")) {
			snprintf(err, errlen, "bad FW_PRECISION '%s' (f32 or bf16)", p);
			return -1;
		}
		fw_dev_set_bf16(!(p && !strcmp(p, "f32")));
		cur = FW_DEV_CUDA;
		curdev = bound = n;
		snprintf(name, sizeof(name), "cuda:%d (%s, %s)", n, desc,
			 bf16 ? "bf16 products" : "f32");
		return cur;
	}
#else
	(void)n;
	if (autosel) {
		cur = FW_DEV_CPU;
		snprintf(name, sizeof(name), "cpu");
		return cur;
	}
	snprintf(err, errlen, "device '%s': this build has no CUDA (make CUDA=1)", spec);
	return -1;
#endif
}

int fw_dev_current(void)
{
	return cur;
}

const char *fw_dev_name(void)
{
	return name;
}

int fw_dev_bf16(void)
{
	return bf16;
}

void fw_dev_set_bf16(int on)
{
	bf16 = on;
#ifdef FW_CUDA
	fw_cuda_set_bf16(on);
#endif
}

/* ---- memory --------------------------------------------------------------- */

void *fw_dev_alloc(int dev, size_t bytes)
{
#ifdef FW_CUDA
	if (dev == FW_DEV_CUDA) {
		bind_thread();
		return fw_cuda_malloc(bytes);
	}
#endif
	(void)dev;
	return aligned_alloc(64, ((bytes ? bytes : 1) + 63) & ~(size_t)63);
}

void fw_dev_free(int dev, void *p)
{
#ifdef FW_CUDA
	if (dev == FW_DEV_CUDA) {
		bind_thread();
		fw_cuda_free(p);
		return;
	}
#endif
	(void)dev;
	free(p);
}

void fw_dev_h2d(int dev, void *dst, const void *src, size_t bytes)
{
#ifdef FW_CUDA
	if (dev == FW_DEV_CUDA) {
		CU(fw_cuda_memcpy_h2d(dst, src, bytes));
		return;
	}
#endif
	if (dst != src && bytes)
		memmove(dst, src, bytes);
}

void fw_dev_d2h(int dev, void *dst, const void *src, size_t bytes)
{
#ifdef FW_CUDA
	if (dev == FW_DEV_CUDA) {
		CU(fw_cuda_memcpy_d2h(dst, src, bytes));
		return;
	}
#endif
	if (dst != src && bytes)
		memmove(dst, src, bytes);
}

void fw_dev_d2d(int dev, void *dst, const void *src, size_t bytes)
{
#ifdef FW_CUDA
	if (dev == FW_DEV_CUDA) {
		if (bytes)
			CU(fw_cuda_memcpy_d2d(dst, src, bytes));
		return;
	}
#endif
	if (dst != src && bytes)
		memmove(dst, src, bytes);
}

void fw_dev_zero(int dev, void *p, size_t bytes)
{
#ifdef FW_CUDA
	if (dev == FW_DEV_CUDA) {
		if (bytes)
			CU(fw_cuda_zero(p, bytes));
		return;
	}
#endif
	if (bytes)
		memset(p, 0, bytes);
}

int fw_dev_check(int dev, char *err, size_t errlen)
{
#ifdef FW_CUDA
	if (dev == FW_DEV_CUDA) {
		CU(fw_cuda_sync());
		if (failed) {
			snprintf(err, errlen, "device: %s", failmsg);
			failed = 0;
			return -1;
		}
	}
#endif
	(void)dev;
	(void)err;
	(void)errlen;
	return 0;
}

/* ---- between processes ---------------------------------------------------- */

int fw_dev_comm_init(int rank, int nranks,
		     int (*bcast)(unsigned char *buf, int n, void *ctx),
		     void *ctx, char *err, size_t errlen)
{
#ifdef FW_CUDA
	unsigned char id[FW_NCCL_ID_BYTES];

	if (cur != FW_DEV_CUDA) {
		snprintf(err, errlen, "NCCL needs the CUDA device (--device cuda)");
		return -1;
	}
	memset(id, 0, sizeof(id));
	if (rank == 0 && fw_cuda_nccl_id(id, sizeof(id))) {
		snprintf(err, errlen, "nccl: %s", fw_cuda_error());
		return -1;
	}
	if (bcast(id, (int)sizeof(id), ctx)) {
		snprintf(err, errlen, "nccl: cannot pass the id to the other ranks");
		return -1;
	}
	if (fw_cuda_nccl_init(id, sizeof(id), nranks, rank)) {
		snprintf(err, errlen, "nccl: rank %d of %d: %s", rank, nranks,
			 fw_cuda_error());
		return -1;
	}
	return 0;
#else
	(void)rank;
	(void)nranks;
	(void)bcast;
	(void)ctx;
	snprintf(err, errlen, "NCCL needs a build with CUDA (make CUDA=1)");
	return -1;
#endif
}

int fw_dev_comm_sum(float *x, long n, void *ctx)
{
	(void)ctx;
#ifdef FW_CUDA
	CU(fw_cuda_nccl_sum(x, n));
	return failed ? -1 : 0;
#else
	(void)x;
	(void)n;
	return -1;
#endif
}

void fw_dev_comm_free(void)
{
#ifdef FW_CUDA
	fw_cuda_nccl_free();
#endif
}

/* ---- ops ------------------------------------------------------------------ */

/* Calls fw_cuda_OP on CUDA, fw_OP on the CPU, with the same arguments. */
#ifdef FW_CUDA
#define OP(op, ...)                                                        \
	do {                                                               \
		if (dev == FW_DEV_CUDA)                                    \
			CU(fw_cuda_##op(__VA_ARGS__));                     \
		else                                                       \
			fw_##op(__VA_ARGS__);                              \
	} while (0)
#else
#define OP(op, ...) fw_##op(__VA_ARGS__)
#endif

void fw_dev_matmul_fwd(int dev, float *out, const float *inp, const float *w,
		       const float *bias, int M, int K, int N)
{
	OP(matmul_fwd, out, inp, w, bias, M, K, N);
}

void fw_dev_matmul_bwd(int dev, float *dinp, float *dw, float *dbias,
		       const float *dout, const float *inp, const float *w,
		       int M, int K, int N)
{
	OP(matmul_bwd, dinp, dw, dbias, dout, inp, w, M, K, N);
}

void fw_dev_embed_fwd(int dev, float *out, const int32_t *ids,
		      const float *wte, int N, int C)
{
	OP(embed_fwd, out, ids, wte, N, C);
}

void fw_dev_embed_bwd(int dev, float *dwte, const float *dout,
		      const int32_t *ids, int N, int C)
{
	OP(embed_bwd, dwte, dout, ids, N, C);
}

void fw_dev_rmsnorm_fwd(int dev, float *out, float *rstd, const float *inp,
			const float *w, int N, int C, float eps)
{
	OP(rmsnorm_fwd, out, rstd, inp, w, N, C, eps);
}

void fw_dev_rmsnorm_bwd(int dev, float *dinp, float *dw, const float *dout,
			const float *inp, const float *w, const float *rstd,
			int N, int C)
{
	OP(rmsnorm_bwd, dinp, dw, dout, inp, w, rstd, N, C);
}

void fw_dev_rope_fwd(int dev, float *x, const int32_t *pos,
		     const float *cos_t, const float *sin_t, int N, int nh,
		     int hd)
{
	OP(rope_fwd, x, pos, cos_t, sin_t, N, nh, hd);
}

void fw_dev_rope_bwd(int dev, float *dx, const int32_t *pos,
		     const float *cos_t, const float *sin_t, int N, int nh,
		     int hd)
{
	OP(rope_bwd, dx, pos, cos_t, sin_t, N, nh, hd);
}

size_t fw_dev_attn_floats(int dev, int B, int T, int nh)
{
	if (dev == FW_DEV_CUDA)
		return (size_t)B * nh * T;
	return (size_t)B * nh * T * T;
}

void fw_dev_attn_fwd(int dev, float *out, float *att, const float *q,
		     const float *k, const float *v, int B, int T, int nh,
		     int nkv, int hd)
{
#ifdef FW_CUDA
	if (dev == FW_DEV_CUDA) {
		CU(fw_cuda_attn_flash_fwd(out, att, q, k, v, B, T, nh, nkv, hd));
		return;
	}
#endif
	fw_attn_fwd(out, att, q, k, v, B, T, nh, nkv, hd);
}

void fw_dev_attn_bwd(int dev, float *dq, float *dk, float *dv, float *scratch,
		     const float *dout, const float *out, const float *att,
		     const float *q, const float *k, const float *v, int B,
		     int T, int nh, int nkv, int hd)
{
#ifdef FW_CUDA
	if (dev == FW_DEV_CUDA) {
		CU(fw_cuda_attn_flash_bwd(dq, dk, dv, scratch, dout, out, att,
					  q, k, v, B, T, nh, nkv, hd));
		return;
	}
#endif
	(void)out;
	fw_attn_bwd(dq, dk, dv, scratch, dout, att, q, k, v, B, T, nh, nkv, hd);
}

void fw_dev_attn_cached(int dev, float *out, float *scratch, const float *q,
			const float *kc, const float *vc, int B, int Tq,
			int pos0, int maxT, int nh, int nkv, int hd)
{
	OP(attn_cached, out, scratch, q, kc, vc, B, Tq, pos0, maxT, nh, nkv, hd);
}

void fw_dev_attn_cached_pos(int dev, float *out, float *scratch,
			    const float *q, const float *kc, const float *vc,
			    const int32_t *pos0, int32_t *pos0_dev, int B,
			    int Tq, int maxT, int nh, int nkv, int hd)
{
#ifdef FW_CUDA
	if (dev == FW_DEV_CUDA) {
		CU(fw_cuda_memcpy_h2d(pos0_dev, pos0, sizeof(int32_t) * B));
		CU(fw_cuda_attn_cached_pos(out, scratch, q, kc, vc, pos0_dev, B,
					   Tq, maxT, nh, nkv, hd));
		return;
	}
#endif
	(void)pos0_dev;
	fw_attn_cached_pos(out, scratch, q, kc, vc, pos0, B, Tq, maxT, nh, nkv, hd);
}

void fw_dev_swiglu_fwd(int dev, float *out, const float *gate,
		       const float *up, long n)
{
	OP(swiglu_fwd, out, gate, up, n);
}

void fw_dev_swiglu_bwd(int dev, float *dgate, float *dup, const float *dout,
		       const float *gate, const float *up, long n)
{
	OP(swiglu_bwd, dgate, dup, dout, gate, up, n);
}

void fw_dev_xent_fwd(int dev, float *logp, float *lse, const float *logits,
		     const int32_t *targets, int N, int V)
{
	OP(xent_fwd, logp, lse, logits, targets, N, V);
}

void fw_dev_xent_bwd(int dev, float *dlogits, const float *logits,
		     const float *lse, const int32_t *targets,
		     const float *dlogp, int N, int V)
{
	OP(xent_bwd, dlogits, logits, lse, targets, dlogp, N, V);
}

void fw_dev_gather(int dev, float *out, const float *x, const int64_t *idx, long n)
{
	OP(gather, out, x, idx, n);
}

void fw_dev_scatter_add(int dev, float *x, const int64_t *idx, const float *val, long n)
{
	OP(scatter_add, x, idx, val, n);
}

void fw_dev_adamw(int dev, float *p, float *m, float *v, const float *g,
		  long n, float lr, float b1, float b2, float eps, float wd,
		  long step)
{
	OP(adamw, p, m, v, g, n, lr, b1, b2, eps, wd, step);
}

double fw_dev_sumsq(int dev, const float *x, long n)
{
#ifdef FW_CUDA
	if (dev == FW_DEV_CUDA) {
		/* A double of device memory kept for the process. */
		static double *d;
		double s = NAN;

		bind_thread();
		if (!d && !(d = fw_cuda_malloc(sizeof(double)))) {
			if (!failed) {
				failed = 1;
				snprintf(failmsg, sizeof(failmsg), "%s", fw_cuda_error());
			}
			return NAN;
		}
		CU(fw_cuda_sumsq(d, x, n));
		CU(fw_cuda_memcpy_d2h(&s, d, sizeof(s)));
		return failed ? NAN : s;
	}
#endif
	return fw_sumsq(x, n);
}

void fw_dev_scale(int dev, float *x, float s, long n)
{
	OP(scale, x, s, n);
}

void fw_dev_add(int dev, float *out, const float *a, const float *b, long n)
{
#ifdef FW_CUDA
	if (dev == FW_DEV_CUDA) {
		CU(fw_cuda_add(out, a, b, n));
		return;
	}
#endif
	for (long i = 0; i < n; i++)
		out[i] = a[i] + b[i];
}
