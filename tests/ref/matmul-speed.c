/*
 * matmul-speed — the few-row forward product, packed kernel against sgemm.
 *
 *   matmul-speed [REPS]
 *	for each weight shape of the bench model (tests/bench/matmul-pack)
 *	and M rows, times fw_matmul_fwd (OpenBLAS: sgemv for M <= 2, sgemm
 *	above) and fw_matmul_fwd_packed, alternating call by call so both
 *	run under the same load, and prints the median microseconds and
 *	GFLOP/s of each and their ratio.  Each call reads a different copy
 *	of the weights out of at least 256 MB of copies, as a decoding
 *	step reads every layer's weights once, from memory rather than
 *	cache.  Exits 1 when the two results disagree beyond 1e-4 relative.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels.h"

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	static const struct { const char *name; int K, N; } shapes[] = {
		{ "lm head", 512, 32000 }, { "gate/up", 512, 1408 },
		{ "down", 1408, 512 }, { "q/o", 512, 512 }, { "k/v", 512, 256 },
	};
	static const int rows[] = { 1, 2, 4, 8, 16, 32, 64, 128, 256 };
	int reps = argc > 1 ? atoi(argv[1]) : 40, bad = 0;
	double *t1, *t2;

	if (reps < 1) {
		fprintf(stderr, "usage: matmul-speed [REPS]\n");
		return 2;
	}
	if (!fw_matmul_pack_ok()) {
		fprintf(stderr, "matmul-speed: no packed kernel here "
			"(no AVX-512F, or FW_MATMUL_PACK=0)\n");
		return 1;
	}
	t1 = malloc(sizeof(double) * reps);
	t2 = malloc(sizeof(double) * reps);
	printf("%-8s %5s %5s %3s  %9s %7s  %9s %7s  %6s\n", "shape", "K", "N", "M",
	       "sgemm us", "GFLOP/s", "packed us", "GFLOP/s", "ratio");
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		int K = shapes[s].K, N = shapes[s].N;
		long wl = (long)K * N, pl = fw_matmul_pack_len(K, N);
		int copies = (int)((256L << 20) / (sizeof(float) * wl)) + 1;
		float *w = malloc(sizeof(float) * wl * copies);
		float *wp = malloc(sizeof(float) * pl * copies);
		float *x = malloc(sizeof(float) * 256 * K);
		float *o1 = malloc(sizeof(float) * 256 * N);
		float *o2 = malloc(sizeof(float) * 256 * N);

		srand(1);
		for (long i = 0; i < wl; i++)
			w[i] = (float)rand() / RAND_MAX - 0.5f;
		for (int c = 1; c < copies; c++)
			memcpy(w + c * wl, w, sizeof(float) * wl);
		for (int c = 0; c < copies; c++)
			fw_matmul_pack(wp + c * pl, w + c * wl, K, N);
		for (long i = 0; i < 256L * K; i++)
			x[i] = (float)rand() / RAND_MAX - 0.5f;
		for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
			int M = rows[r];
			double flop = 2.0 * M * K * N;

			for (int i = 0; i < reps; i++) {
				int c = i % copies;
				double a = now_us();

				fw_matmul_fwd(o1, x, w + c * wl, NULL, M, K, N);
				t1[i] = now_us() - a;
				c = (i + copies / 2) % copies;
				a = now_us();
				fw_matmul_fwd_packed(o2, x, w + c * wl, wp + c * pl, NULL, M, K, N);
				t2[i] = now_us() - a;
			}
			for (long i = 0; i < (long)M * N; i++)
				if (fabsf(o1[i] - o2[i]) > 1e-4f * (1 + fabsf(o1[i])))
					bad = 1;
			qsort(t1, reps, sizeof(double), cmp);
			qsort(t2, reps, sizeof(double), cmp);
			printf("%-8s %5d %5d %3d  %9.1f %7.1f  %9.1f %7.1f  %5.2fx\n",
			       shapes[s].name, K, N, M, t1[reps / 2],
			       flop / t1[reps / 2] / 1e3, t2[reps / 2],
			       flop / t2[reps / 2] / 1e3, t1[reps / 2] / t2[reps / 2]);
			fflush(stdout);
		}
		free(w);
		free(wp);
		free(x);
		free(o1);
		free(o2);
	}
	free(t1);
	free(t2);
	if (bad)
		fprintf(stderr, "matmul-speed: the packed product disagrees with sgemm\n");
	return bad;
}
