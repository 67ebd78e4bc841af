/*
 * matmul.c — linear layers: OpenBLAS sgemm and the plain C oracle.
 *
 * Build: part of libflywheel.  Test: build/tests/test_kernels compares the
 * sgemm versions with the plain loops (1e-5 relative) and checks the
 * gradients by finite differences.
 */
#include <string.h>
#include <cblas.h>

#include "kernels.h"

void fw_matmul_fwd(float *out, const float *inp, const float *w,
		   const float *bias, int M, int K, int N)
{
	float beta = 0.0f;

	if (bias) {
		for (int i = 0; i < M; i++)
			memcpy(out + (long)i * N, bias, sizeof(float) * N);
		beta = 1.0f;
	}
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f,
		    inp, K, w, K, beta, out, N);
}

void fw_matmul_bwd(float *dinp, float *dw, float *dbias, const float *dout,
		   const float *inp, const float *w, int M, int K, int N)
{
	if (dinp)
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, K,
			    N, 1.0f, dout, N, w, K, 1.0f, dinp, K);
	if (dw)
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, K, M,
			    1.0f, dout, N, inp, K, 1.0f, dw, K);
	if (dbias)
		for (int i = 0; i < M; i++) {
			const float *d = dout + (long)i * N;

			for (int j = 0; j < N; j++)
				dbias[j] += d[j];
		}
}

void fw_matmul_fwd_ref(float *out, const float *inp, const float *w,
		       const float *bias, int M, int K, int N)
{
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++) {
			double s = bias ? bias[j] : 0.0;

			for (int k = 0; k < K; k++)
				s += (double)inp[(long)i * K + k] *
				     w[(long)j * K + k];
			out[(long)i * N + j] = (float)s;
		}
}

void fw_matmul_bwd_ref(float *dinp, float *dw, float *dbias,
		       const float *dout, const float *inp, const float *w,
		       int M, int K, int N)
{
	if (dinp)
		for (int i = 0; i < M; i++)
			for (int k = 0; k < K; k++) {
				double s = 0;

				for (int j = 0; j < N; j++)
					s += (double)dout[(long)i * N + j] *
					     w[(long)j * K + k];
				dinp[(long)i * K + k] += (float)s;
			}
	if (dw)
		for (int j = 0; j < N; j++)
			for (int k = 0; k < K; k++) {
				double s = 0;

				for (int i = 0; i < M; i++)
					s += (double)dout[(long)i * N + j] *
					     inp[(long)i * K + k];
				dw[(long)j * K + k] += (float)s;
			}
	if (dbias)
		for (int j = 0; j < N; j++) {
			double s = 0;

			for (int i = 0; i < M; i++)
				s += dout[(long)i * N + j];
			dbias[j] += (float)s;
		}
}
