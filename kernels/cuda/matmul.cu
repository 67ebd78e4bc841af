/*
 * matmul.cu — linear layers on the GPU: cuBLAS sgemm for the products, two
 * small kernels for the bias.
 *
 * cuBLAS is column-major; a row-major (r, c) matrix is the column-major
 * (c, r) matrix of its transpose.  So each row-major product P = X @ Y is
 * computed as the column-major P^T = Y^T @ X^T: the operands swap places
 * and the leading dimension of each is its row-major row length.
 *
 * Build: make CUDA=1 (nvcc, into libflywheel.a); on the CPU for tests:
 * make gpu-emu (sgemm becomes cblas_sgemm in column-major order).  Test:
 * tests/gpu/check, against fw_matmul_fwd_ref / fw_matmul_bwd_ref.
 */
#include "common.cuh"

/* 1: products in bf16 with f32 accumulation (fw_cuda_set_bf16). */
static int use_bf16;

extern "C" void fw_cuda_set_bf16(int on)
{
	use_bf16 = on;
}

/* C = alpha op(A) op(B) + beta C, column-major, all f32 in memory.  In
 * bf16 mode cuBLAS rounds A and B to bf16 on the fly for the tensor cores
 * and accumulates in f32 (CUBLAS_COMPUTE_32F_FAST_16BF), so weights stay
 * f32 masters and no converted copy is kept. */
static cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta,
			   cublasOperation_t tb, int m, int n, int k,
			   const float *alpha, const float *A, int lda,
			   const float *B, int ldb, const float *beta, float *C,
			   int ldc)
{
	if (!use_bf16)
		return cublasSgemm(h, ta, tb, m, n, k, alpha, A, lda, B, ldb,
				   beta, C, ldc);
	return cublasGemmEx(h, ta, tb, m, n, k, alpha, A, CUDA_R_32F, lda, B,
			    CUDA_R_32F, ldb, beta, C, CUDA_R_32F, ldc,
			    CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT);
}

/* out (M, N): every row = bias (N). */
static __global__ void bias_rows(float *out, const float *bias, long M, int N)
{
	long n = M * N;

	for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
	     i += (long)gridDim.x * blockDim.x)
		out[i] = bias[i % N];
}

/* dbias (N) += column sums of dout (M, N); one thread per column, rows in
 * order, as the C version adds them. */
static __global__ void bias_grad(float *dbias, const float *dout, int M, int N)
{
	for (long j = blockIdx.x * (long)blockDim.x + threadIdx.x; j < N;
	     j += (long)gridDim.x * blockDim.x) {
		float s = dbias[j];

		for (long i = 0; i < M; i++)
			s += dout[i * N + j];
		dbias[j] = s;
	}
}

extern "C" int fw_cuda_matmul_fwd(float *out, const float *inp,
				  const float *w, const float *bias, int M,
				  int K, int N)
{
	cublasHandle_t h = NULL;
	const float one = 1.0f, zero = 0.0f;

	if (M <= 0 || N <= 0)
		return 0;
	if (K <= 0) {
		/* An empty product: cuBLAS refuses leading dimensions of 0. */
		if (bias)
			LAUNCH(bias_rows, grid_for((long)M * N), NT, out, bias,
			       (long)M, N);
		else
			CUDA_CHECK(cudaMemset(out, 0, sizeof(float) * M * N));
		return 0;
	}
	if (fw_cuda_blas(&h))
		return -1;
	if (bias)
		LAUNCH(bias_rows, grid_for((long)M * N), NT, out, bias,
		       (long)M, N);
	/* out^T (N, M) = w (N, K) @ inp^T (K, M), column-major: w is stored
	 * as w^T (K, N) with ld K, hence OP_T; inp as inp^T (K, M), ld K. */
	CUBLAS_CHECK(gemm(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one,
				 w, K, inp, K, bias ? &one : &zero, out, N));
	return 0;
}

extern "C" int fw_cuda_matmul_bwd(float *dinp, float *dw, float *dbias,
				  const float *dout, const float *inp,
				  const float *w, int M, int K, int N)
{
	cublasHandle_t h = NULL;
	const float one = 1.0f;

	if (M <= 0 || N <= 0)
		return 0;
	if ((dinp || dw) && K > 0 && fw_cuda_blas(&h))
		return -1;
	/* dinp^T (K, M) += w^T (K, N) @ dout^T (N, M): both stored that way
	 * already (lds K and N). */
	if (dinp && K > 0)
		CUBLAS_CHECK(gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, K, M, N,
					 &one, w, K, dout, N, &one, dinp, K));
	/* dw^T (K, N) += inp^T (K, M) @ dout (M, N): inp stored as inp^T
	 * (ld K), dout stored as dout^T (N, M), ld N, hence OP_T. */
	if (dw && K > 0)
		CUBLAS_CHECK(gemm(h, CUBLAS_OP_N, CUBLAS_OP_T, K, N, M,
					 &one, inp, K, dout, N, &one, dw, K));
	if (dbias)
		LAUNCH(bias_grad, grid_for(N), NT, dbias, dout, M, N);
	return 0;
}
