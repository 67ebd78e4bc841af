/*
 * emu.cuh — the subset of CUDA and cuBLAS that kernels/cuda/ uses, on the
 * CPU (private; included by common.cuh when FW_CUDA_EMU is defined).
 *
 * Why: the kernels must be checked where there is no GPU.  Compiled as C++
 * with -DFW_CUDA_EMU=1, each .cu file runs unchanged on the CPU: a launch
 * runs the blocks one after another; the threads of a block are fibers
 * (ucontext) that run until they return or reach __syncthreads(), so a
 * barrier is a real barrier, and __shared__ arrays are static variables
 * that the threads of the running block share.  The fibers of a block run
 * in a fresh pseudo-random order between two barriers, so code that reads
 * what another thread wrote without a barrier in between gets stale data
 * and fails the comparison.  A barrier reached by some threads of a block
 * and not others (undefined in CUDA) is reported as a launch failure.
 * cublasSgemm is cblas_sgemm in column-major order, which has the same
 * meaning, so the operand swaps of matmul.cu are checked too.
 *
 * Not emulated: concurrency between blocks (blocks never share data here),
 * warp-level operations, streams (everything is synchronous).  Launches
 * must come from one host thread at a time.
 *
 * Build and run: `make gpu-emu` (tests/gpu/check --emu).
 */
#ifndef FW_CUDA_EMU_CUH
#define FW_CUDA_EMU_CUH

#include <cblas.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <functional>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __shared__ static
#define __forceinline__ inline

struct dim3 {
	unsigned x, y, z;
	dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1)
		: x(x_), y(y_), z(z_) {}
};

inline dim3 threadIdx, blockIdx, blockDim, gridDim;

/* ---- runtime ---------------------------------------------------------- */

enum cudaError_t {
	cudaSuccess = 0,
	cudaErrorInvalidValue = 1,
	cudaErrorMemoryAllocation = 2,
	cudaErrorInvalidConfiguration = 9,
	cudaErrorInvalidDevice = 101,
	cudaErrorLaunchFailure = 719,
};

enum cudaMemcpyKind {
	cudaMemcpyHostToDevice = 1,
	cudaMemcpyDeviceToHost = 2,
	cudaMemcpyDeviceToDevice = 3,
};

struct cudaDeviceProp {
	char name[256];
	int major, minor;
	size_t totalGlobalMem;
};

/* The sticky error a failed launch leaves, as on a GPU. */
inline cudaError_t fw_emu_sticky = cudaSuccess;

inline const char *cudaGetErrorString(cudaError_t e)
{
	switch (e) {
	case cudaSuccess: return "no error";
	case cudaErrorInvalidValue: return "invalid argument";
	case cudaErrorMemoryAllocation: return "out of memory";
	case cudaErrorInvalidConfiguration: return "invalid configuration argument";
	case cudaErrorInvalidDevice: return "invalid device ordinal";
	case cudaErrorLaunchFailure:
		return "unspecified launch failure (emulation: __syncthreads "
		       "not reached by every thread of a block)";
	}
	return "unknown error";
}

inline cudaError_t cudaGetLastError(void)
{
	cudaError_t e = fw_emu_sticky;

	fw_emu_sticky = cudaSuccess;
	return e;
}

/* One emulated device, or FW_EMU_DEVICES (1 to 8) of them, all the same
 * CPU memory: enough to check which device each thread makes current. */
inline int fw_emu_devices(void)
{
	const char *v = getenv("FW_EMU_DEVICES");
	int n = v && *v ? atoi(v) : 1;

	return n < 1 ? 1 : n > 8 ? 8 : n;
}

/* The thread's current device, 0 until it sets one, as with CUDA. */
inline thread_local int fw_emu_current = 0;

inline cudaError_t cudaGetDeviceCount(int *n)
{
	*n = fw_emu_devices();
	return cudaSuccess;
}

inline cudaError_t cudaSetDevice(int d)
{
	if (d < 0 || d >= fw_emu_devices())
		return cudaErrorInvalidDevice;
	fw_emu_current = d;
	return cudaSuccess;
}

inline cudaError_t cudaGetDevice(int *d)
{
	*d = fw_emu_current;
	return cudaSuccess;
}

inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d)
{
	if (d < 0 || d >= fw_emu_devices())
		return cudaErrorInvalidDevice;
	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "no GPU: CUDA emulated on the CPU "
		 "(kernels/cuda/emu.cuh)");
	p->major = 0;
	p->minor = 0;
	return cudaSuccess;
}

inline cudaError_t cudaMalloc(void **p, size_t n)
{
	*p = malloc(n ? n : 1);
	return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}

inline cudaError_t cudaFree(void *p)
{
	free(p);
	return cudaSuccess;
}

inline cudaError_t cudaMemcpy(void *d, const void *s, size_t n,
			      cudaMemcpyKind k)
{
	(void)k;
	if (n)
		memmove(d, s, n);
	return cudaSuccess;
}

inline cudaError_t cudaMemset(void *p, int v, size_t n)
{
	if (n)
		memset(p, v, n);
	return cudaSuccess;
}

inline cudaError_t cudaDeviceSynchronize(void)
{
	return fw_emu_sticky;
}

/* ---- cuBLAS ----------------------------------------------------------- */

typedef struct fw_emu_blas *cublasHandle_t;
enum cublasStatus_t {
	CUBLAS_STATUS_SUCCESS = 0,
	CUBLAS_STATUS_INVALID_VALUE = 7,
};
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cublasMath_t { CUBLAS_DEFAULT_MATH = 0 };

inline const char *cublasGetStatusString(cublasStatus_t s)
{
	return s == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS"
					  : "CUBLAS_STATUS_INVALID_VALUE";
}

inline cublasStatus_t cublasCreate(cublasHandle_t *h)
{
	static int one;

	*h = (cublasHandle_t)&one;
	return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t cublasDestroy(cublasHandle_t h)
{
	(void)h;
	return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m)
{
	(void)h;
	(void)m;
	return CUBLAS_STATUS_SUCCESS;
}

/* cuBLAS's leading-dimension rules, which cblas would report by printing
 * and exiting: checked here so a wrong call fails as on a GPU. */
inline cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta,
				  cublasOperation_t tb, int m, int n, int k,
				  const float *alpha, const float *A, int lda,
				  const float *B, int ldb, const float *beta,
				  float *C, int ldc)
{
	(void)h;
	if (m < 0 || n < 0 || k < 0 || ldc < (m > 1 ? m : 1) ||
	    lda < ((ta == CUBLAS_OP_N ? m : k) > 1 ? (ta == CUBLAS_OP_N ? m : k) : 1) ||
	    ldb < ((tb == CUBLAS_OP_N ? k : n) > 1 ? (tb == CUBLAS_OP_N ? k : n) : 1))
		return CUBLAS_STATUS_INVALID_VALUE;
	if (m == 0 || n == 0)
		return CUBLAS_STATUS_SUCCESS;
	cblas_sgemm(CblasColMajor, ta == CUBLAS_OP_N ? CblasNoTrans : CblasTrans,
		    tb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans, m, n, k,
		    *alpha, A, lda, B, ldb, *beta, C, ldc);
	return CUBLAS_STATUS_SUCCESS;
}

enum cudaDataType { CUDA_R_32F = 0 };
enum cublasComputeType_t {
	CUBLAS_COMPUTE_32F = 68,
	CUBLAS_COMPUTE_32F_FAST_16BF = 75,
};
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };

/* x rounded to the nearest bf16 (ties to even), as the tensor cores see
 * an f32 operand under CUBLAS_COMPUTE_32F_FAST_16BF. */
inline float fw_emu_bf16(float x)
{
	uint32_t u;

	memcpy(&u, &x, 4);
	if ((u & 0x7f800000u) != 0x7f800000u)
		u = (u + 0x7fffu + ((u >> 16) & 1)) & 0xffff0000u;
	memcpy(&x, &u, 4);
	return x;
}

/* f32 matrices only; with the fast-bf16 compute type A and B are rounded
 * to bf16 first and the product accumulated in f32, which is what the GPU
 * does, so the bf16 tolerances are checked against real rounding. */
inline cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta,
				   cublasOperation_t tb, int m, int n, int k,
				   const void *alpha, const void *A,
				   cudaDataType at, int lda, const void *B,
				   cudaDataType bt, int ldb, const void *beta,
				   void *C, cudaDataType ct, int ldc,
				   cublasComputeType_t comp, cublasGemmAlgo_t algo)
{
	(void)at;
	(void)bt;
	(void)ct;
	(void)algo;
	if (comp != CUBLAS_COMPUTE_32F_FAST_16BF)
		return cublasSgemm(h, ta, tb, m, n, k, (const float *)alpha,
				   (const float *)A, lda, (const float *)B, ldb,
				   (const float *)beta, (float *)C, ldc);
	/* The stored extents of A and B, column-major. */
	long na = (long)lda * ((ta == CUBLAS_OP_N ? k : m) - 1) +
		  (ta == CUBLAS_OP_N ? m : k);
	long nb = (long)ldb * ((tb == CUBLAS_OP_N ? n : k) - 1) +
		  (tb == CUBLAS_OP_N ? k : n);
	std::vector<float> a16(na > 0 ? na : 1), b16(nb > 0 ? nb : 1);

	for (long i = 0; i < na; i++)
		a16[i] = fw_emu_bf16(((const float *)A)[i]);
	for (long i = 0; i < nb; i++)
		b16[i] = fw_emu_bf16(((const float *)B)[i]);
	return cublasSgemm(h, ta, tb, m, n, k, (const float *)alpha, a16.data(),
			   lda, b16.data(), ldb, (const float *)beta, (float *)C,
			   ldc);
}

/* ---- launches ------------------------------------------------------------ */

enum { FW_EMU_READY, FW_EMU_BARRIER, FW_EMU_DONE };

struct fw_emu_fiber {
	ucontext_t ctx;
	int state;
};

#define FW_EMU_STACK (64 * 1024)

inline ucontext_t fw_emu_main;
inline fw_emu_fiber *fw_emu_cur;
inline const std::function<void()> *fw_emu_body;
inline uint64_t fw_emu_rng = 0x9e3779b97f4a7c15ull;

inline void __syncthreads(void)
{
	fw_emu_cur->state = FW_EMU_BARRIER;
	swapcontext(&fw_emu_cur->ctx, &fw_emu_main);
}

inline void fw_emu_entry(void)
{
	(*fw_emu_body)();
	fw_emu_cur->state = FW_EMU_DONE;
	/* Returning resumes uc_link, the scheduler. */
}

/* Kept out of line: getcontext "returns twice" for the compiler, which
 * must not see it in the scheduler's loops. */
__attribute__((noinline)) inline void fw_emu_start(fw_emu_fiber *f,
						   char *stack)
{
	getcontext(&f->ctx);
	f->ctx.uc_stack.ss_sp = stack;
	f->ctx.uc_stack.ss_size = FW_EMU_STACK;
	f->ctx.uc_link = &fw_emu_main;
	makecontext(&f->ctx, fw_emu_entry, 0);
	f->state = FW_EMU_READY;
}

/* Runs fiber f until it returns or reaches a barrier. */
__attribute__((noinline)) inline void fw_emu_resume(fw_emu_fiber *f,
						    unsigned tid)
{
	f->state = FW_EMU_READY;
	threadIdx = dim3(tid);
	fw_emu_cur = f;
	swapcontext(&fw_emu_main, &f->ctx);
}

/* Runs body once per thread of every block of grid g, blocks of b threads
 * (one-dimensional: y and z must be 1).  Sets the sticky launch error on a
 * bad configuration or a divergent barrier. */
template <class F>
void fw_emu_launch(dim3 g, dim3 b, F body)
{
	static std::vector<fw_emu_fiber> fib;
	static std::vector<char> stacks;
	static std::vector<unsigned> order;
	std::function<void()> fn = body;
	unsigned nt = b.x;

	if (g.x == 0 || b.x == 0 || b.x > 1024 || g.y != 1 || g.z != 1 ||
	    b.y != 1 || b.z != 1) {
		fw_emu_sticky = cudaErrorInvalidConfiguration;
		return;
	}
	if (fib.size() < nt) {
		fib.resize(nt);
		stacks.resize((size_t)nt * FW_EMU_STACK);
		order.resize(nt);
	}
	fw_emu_body = &fn;
	gridDim = dim3(g.x);
	blockDim = dim3(b.x);
	for (unsigned bx = 0; bx < g.x; bx++) {
		blockIdx = dim3(bx);
		for (unsigned i = 0; i < nt; i++) {
			fw_emu_start(&fib[i], &stacks[(size_t)i * FW_EMU_STACK]);
			order[i] = i;
		}
		for (;;) {
			/* A fresh order for each stretch between barriers. */
			for (unsigned i = nt - 1; i > 0; i--) {
				fw_emu_rng ^= fw_emu_rng << 13;
				fw_emu_rng ^= fw_emu_rng >> 7;
				fw_emu_rng ^= fw_emu_rng << 17;
				unsigned j = (unsigned)(fw_emu_rng % (i + 1));
				unsigned t = order[i];

				order[i] = order[j];
				order[j] = t;
			}
			for (unsigned k = 0; k < nt; k++) {
				fw_emu_fiber *f = &fib[order[k]];

				if (f->state != FW_EMU_DONE)
					fw_emu_resume(f, order[k]);
			}
			unsigned done = 0, wait = 0;

			for (unsigned i = 0; i < nt; i++) {
				done += fib[i].state == FW_EMU_DONE;
				wait += fib[i].state == FW_EMU_BARRIER;
			}
			if (done == nt)
				break;
			if (wait != nt) {
				fw_emu_sticky = cudaErrorLaunchFailure;
				fw_emu_body = nullptr;
				return;
			}
		}
	}
	fw_emu_body = nullptr;
}

#endif
