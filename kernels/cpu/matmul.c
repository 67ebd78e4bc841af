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

/*
 * The matrix products are split over the kernels' own thread pool, each
 * slice one single-threaded sgemm, rather than left to OpenBLAS's threads:
 * OpenBLAS workers spin between calls and would steal the CPUs from the
 * pool running the other kernels in between.  Slices are 16 columns wide
 * multiples so each stays a good sgemm shape.
 */
struct mm {
	float *out;
	const float *a, *b;
	int M, K, N, op;
};

enum { FWD, BWD_DINP, BWD_DW };

static void slice(int n, int part, int parts, int *i0, int *i1)
{
	int blocks = (n + 15) / 16;

	*i0 = (int)((long)blocks * part / parts) * 16;
	*i1 = (int)((long)blocks * (part + 1) / parts) * 16;
	if (*i1 > n)
		*i1 = n;
	if (*i0 > n)
		*i0 = n;
}

static void mm_part(void *ctx, int p0, int p1)
{
	struct mm *c = ctx;
	int parts = fw_kernels_threads(), i0, i1, e;

	slice(c->op == BWD_DINP ? c->K : c->N, p0, parts, &i0, &e);
	slice(c->op == BWD_DINP ? c->K : c->N, p1 - 1, parts, &e, &i1);
	if (i1 <= i0)
		return;
	switch (c->op) {
	case FWD: /* out[:, i0:i1] += inp @ w[i0:i1]^T */
		if (c->M <= 2) {
			/* Decoding: sgemm would copy (pack) the whole weight
			 * slice for one row; sgemv streams it once. */
			for (int m = 0; m < c->M; m++)
				cblas_sgemv(CblasRowMajor, CblasNoTrans, i1 - i0,
					    c->K, 1.0f, c->b + (long)i0 * c->K,
					    c->K, c->a + (long)m * c->K, 1, 1.0f,
					    c->out + (long)m * c->N + i0, 1);
			break;
		}
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c->M,
			    i1 - i0, c->K, 1.0f, c->a, c->K,
			    c->b + (long)i0 * c->K, c->K, 1.0f, c->out + i0,
			    c->N);
		break;
	case BWD_DINP: /* dinp[:, i0:i1] += dout @ w[:, i0:i1] */
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, c->M,
			    i1 - i0, c->N, 1.0f, c->a, c->N, c->b + i0, c->K,
			    1.0f, c->out + i0, c->K);
		break;
	case BWD_DW: /* dw[i0:i1] += dout[:, i0:i1]^T @ inp */
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, i1 - i0,
			    c->K, c->M, 1.0f, c->a + i0, c->N, c->b, c->K, 1.0f,
			    c->out + (long)i0 * c->K, c->K);
		break;
	}
}

static void mm_run(struct mm *c)
{
	int n = c->op == BWD_DINP ? c->K : c->N;
	int parts = fw_kernels_threads();

	/* Tiny products are not worth waking the pool for. */
	if ((long)c->M * c->N * c->K < (1L << 16) || n < 32)
		parts = 1;
	if (parts == 1)
		mm_part(c, 0, fw_kernels_threads());
	else
		fw_parallel_for(parts, mm_part, c);
}

void fw_matmul_fwd(float *out, const float *inp, const float *w,
		   const float *bias, int M, int K, int N)
{
	struct mm c = { out, inp, w, M, K, N, FWD };

	for (int i = 0; i < M; i++)
		if (bias)
			memcpy(out + (long)i * N, bias, sizeof(float) * N);
		else
			memset(out + (long)i * N, 0, sizeof(float) * N);
	mm_run(&c);
}

void fw_matmul_bwd(float *dinp, float *dw, float *dbias, const float *dout,
		   const float *inp, const float *w, int M, int K, int N)
{
	if (dinp) {
		struct mm c = { dinp, dout, w, M, K, N, BWD_DINP };

		mm_run(&c);
	}
	if (dw) {
		struct mm c = { dw, dout, inp, M, K, N, BWD_DW };

		mm_run(&c);
	}
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
