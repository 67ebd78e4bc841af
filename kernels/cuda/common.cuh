/*
 * common.cuh — what every .cu file of kernels/cuda shares (private): the
 * checked-call macros, launch geometry, block reductions.
 *
 * Kernels keep to a small subset of CUDA on purpose: one-dimensional grids
 * and blocks, __shared__ arrays of fixed size, __syncthreads(), plain
 * arithmetic.  No warp shuffles, no atomics, no dynamic shared memory.
 * That keeps each kernel obviously right, and lets the same source also run
 * on the CPU under kernels/cuda/emu.cuh (-DFW_CUDA_EMU=1, `make gpu-emu`),
 * which is how the kernels are tested where no GPU is present.
 */
#ifndef FW_CUDA_COMMON_CUH
#define FW_CUDA_COMMON_CUH

#ifdef FW_CUDA_EMU
#include "emu.cuh"
#else
#include <cuda_runtime.h>
#include <cublas_v2.h>
#endif

#include <math.h>
#include <stdint.h>

#include "kernels_cuda.h"

/* Records "file:line: call: why" as this thread's error; returns -1. */
int fw_cuda_fail(const char *file, int line, const char *call,
		 const char *why);

/* Returns the process's cuBLAS handle in *h, creating it on first use.
 * Returns 0, or -1 with the error recorded. */
int fw_cuda_blas(cublasHandle_t *h);

/* Checks a CUDA runtime call; on failure records it and returns -1 from
 * the calling function. */
#define CUDA_CHECK(call)                                                   \
	do {                                                               \
		cudaError_t e_ = (call);                                   \
		if (e_ != cudaSuccess)                                     \
			return fw_cuda_fail(__FILE__, __LINE__, #call,     \
					    cudaGetErrorString(e_));       \
	} while (0)

/* Checks a cuBLAS call the same way. */
#define CUBLAS_CHECK(call)                                                 \
	do {                                                               \
		cublasStatus_t s_ = (call);                                \
		if (s_ != CUBLAS_STATUS_SUCCESS)                           \
			return fw_cuda_fail(__FILE__, __LINE__, #call,     \
					    cublasGetStatusString(s_));    \
	} while (0)

/* Launches kernel k on grid g of blocks of b threads and checks the launch
 * (a refused configuration, or a fault left by an earlier kernel). */
#ifdef FW_CUDA_EMU
#define LAUNCH(k, g, b, ...)                                               \
	do {                                                               \
		fw_emu_launch((g), (b), [&] { k(__VA_ARGS__); });          \
		CUDA_CHECK(cudaGetLastError());                            \
	} while (0)
#else
#define LAUNCH(k, g, b, ...)                                               \
	do {                                                               \
		k<<<(g), (b)>>>(__VA_ARGS__);                              \
		CUDA_CHECK(cudaGetLastError());                            \
	} while (0)
#endif

/* Threads per block: NT for element-wise ops and ops with a block per row.
 * The reductions below need a power of two. */
#define NT 256
#ifdef FW_CUDA_EMU
/* Few blocks, so that every grid-stride loop makes several passes. */
#define MAX_BLOCKS 7
#else
#define MAX_BLOCKS 65535
#endif

/* Blocks for n independent items, each block doing NT of them per pass of
 * a grid-stride loop. */
static inline unsigned grid_for(long n)
{
	long g = (n + NT - 1) / NT;

	return (unsigned)(g < 1 ? 1 : g < MAX_BLOCKS ? g : MAX_BLOCKS);
}

/* Blocks for n rows, one block per row and pass. */
static inline unsigned grid_rows(long n)
{
	return (unsigned)(n < 1 ? 1 : n < MAX_BLOCKS ? n : MAX_BLOCKS);
}

/* Sum of v over the threads of the block (blockDim.x a power of two, sh
 * a __shared__ array of blockDim.x elements).  Every thread of the block
 * must call it; every thread gets the sum.  Also a barrier: what threads
 * wrote before the call is visible to all after it. */
template <typename T>
__device__ inline T block_sum(T v, T *sh)
{
	unsigned t = threadIdx.x;

	sh[t] = v;
	__syncthreads();
	for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
		if (t < s)
			sh[t] += sh[t + s];
		__syncthreads();
	}
	T r = sh[0];
	/* sh may be written again right after the call. */
	__syncthreads();
	return r;
}

/* Maximum of v over the threads of the block; as block_sum. */
__device__ inline float block_max(float v, float *sh)
{
	unsigned t = threadIdx.x;

	sh[t] = v;
	__syncthreads();
	for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
		if (t < s)
			sh[t] = fmaxf(sh[t], sh[t + s]);
		__syncthreads();
	}
	float r = sh[0];
	__syncthreads();
	return r;
}

#endif
