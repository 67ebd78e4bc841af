/*
 * runtime.cu — device selection, memory, copies, errors and the cuBLAS
 * handle for the CUDA kernels (kernels_cuda.h).
 *
 * Build: make CUDA=1 (nvcc, into libflywheel.a); on the CPU for tests:
 * make gpu-emu.  Test: tests/gpu/check (needs a GPU; exits 77 without
 * one), tests/gpu/check --emu (no GPU needed).
 */
#include <stdio.h>
#include <string.h>

#include "common.cuh"

static thread_local char errbuf[512];
static cublasHandle_t blas;

int fw_cuda_fail(const char *file, int line, const char *call,
		 const char *why)
{
	snprintf(errbuf, sizeof(errbuf), "%s:%d: %s: %s", file, line, call,
		 why);
	return -1;
}

int fw_cuda_blas(cublasHandle_t *h)
{
	if (!blas) {
		cublasHandle_t nb;

		CUBLAS_CHECK(cublasCreate(&nb));
		/* Full f32 products: TF32 would miss the 1e-5 agreement with
		 * the C kernels that training relies on. */
		CUBLAS_CHECK(cublasSetMathMode(nb, CUBLAS_DEFAULT_MATH));
		blas = nb;
	}
	*h = blas;
	return 0;
}

extern "C" const char *fw_cuda_error(void)
{
	return errbuf;
}

extern "C" int fw_cuda_device_count(void)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);

	if (e != cudaSuccess) {
		fw_cuda_fail(__FILE__, __LINE__, "cudaGetDeviceCount(&n)",
			     cudaGetErrorString(e));
		/* A failed query leaves a sticky error; clear it so the
		 * caller's next call does not see it. */
		(void)cudaGetLastError();
		return 0;
	}
	return n;
}

extern "C" int fw_cuda_init(int dev, char *name, size_t namelen)
{
	cudaDeviceProp p;
	cublasHandle_t h;

	CUDA_CHECK(cudaSetDevice(dev));
	CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
	if (fw_cuda_blas(&h))
		return -1;
	/* The CPU emulation reports no compute capability. */
	if (name && namelen && p.major == 0)
		snprintf(name, namelen, "%s", p.name);
	else if (name && namelen)
		snprintf(name, namelen, "%s, sm_%d%d, %zu MiB", p.name,
			 p.major, p.minor, p.totalGlobalMem >> 20);
	return 0;
}

extern "C" int fw_cuda_set_device(int dev)
{
	CUDA_CHECK(cudaSetDevice(dev));
	return 0;
}

extern "C" int fw_cuda_current_device(void)
{
	int d = -1;

	return cudaGetDevice(&d) == cudaSuccess ? d : -1;
}

extern "C" void fw_cuda_shutdown(void)
{
	if (blas)
		cublasDestroy(blas);
	blas = NULL;
}

extern "C" void *fw_cuda_malloc(size_t bytes)
{
	void *p = NULL;
	cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);

	if (e != cudaSuccess) {
		fw_cuda_fail(__FILE__, __LINE__, "cudaMalloc(&p, bytes)",
			     cudaGetErrorString(e));
		return NULL;
	}
	return p;
}

extern "C" void fw_cuda_free(void *p)
{
	if (p)
		cudaFree(p);
}

extern "C" int fw_cuda_memcpy_h2d(void *dst, const void *src, size_t bytes)
{
	CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
	return 0;
}

extern "C" int fw_cuda_memcpy_d2h(void *dst, const void *src, size_t bytes)
{
	CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
	return 0;
}

extern "C" int fw_cuda_memcpy_d2d(void *dst, const void *src, size_t bytes)
{
	CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
	return 0;
}

extern "C" int fw_cuda_zero(void *p, size_t bytes)
{
	CUDA_CHECK(cudaMemset(p, 0, bytes));
	return 0;
}

extern "C" int fw_cuda_sync(void)
{
	CUDA_CHECK(cudaDeviceSynchronize());
	CUDA_CHECK(cudaGetLastError());
	return 0;
}
