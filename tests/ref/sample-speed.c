/*
 * sample-speed.c — what tests/bench/sample runs: microseconds per token of
 * fw_sample (the vector passes of kernels/cpu/sample.c) against the plain
 * sampler it replaced (libm's exp in double for the log-prob's normalizer,
 * expf for the weights, one running double sum, a linear scan for the
 * draw), on one row of logits at a time as a decoding step samples them.
 *
 *   sample-speed V ROWS REPS   logits: V per row, ROWS rows drawn from a
 *                              normal of sd 2 (a seeded generator), the
 *                              rows visited in turn REPS times
 * Prints, per setting: "setting plain_us fw_us ratio same" (same: the
 * share of draws where both picked the same token, from the same uniform).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "fw_model.h"

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static uint64_t lcg(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 11;
}

/* the plain sampler, no truncation */
static int32_t plain(const float *l, int V, float temp, uint64_t *rng, float *p, float *logp)
{
	float mx = -INFINITY;
	int32_t best = 0, pick;
	double z = 0, tot = 0, u, acc = 0;

	for (int j = 0; j < V; j++)
		if (l[j] > mx) {
			mx = l[j];
			best = j;
		}
	for (int j = 0; j < V; j++)
		z += exp((double)l[j] - mx);
	for (int j = 0; j < V; j++)
		tot += p[j] = expf((l[j] - mx) / temp);
	/* fw_sample's uniforms, so both draw from the same ones */
	u = fw_sample_u01(rng) * tot;
	pick = best;
	for (int j = 0; j < V; j++) {
		acc += p[j];
		if (u < acc) {
			pick = j;
			break;
		}
	}
	*logp = (float)((double)l[pick] - mx - log(z));
	return pick;
}

int main(int argc, char **argv)
{
	int V = argc > 1 ? atoi(argv[1]) : 32000, rows = argc > 2 ? atoi(argv[2]) : 16,
	    reps = argc > 3 ? atoi(argv[3]) : 200;
	float *l = malloc(sizeof(float) * V * rows), *scr = malloc(sizeof(float) * 2 * V), lp;
	static const float temps[] = { 1.0f, 0.7f };
	uint64_t g = 1;

	if (V < 1 || rows < 1 || reps < 1 || !l || !scr) {
		fprintf(stderr, "usage: sample-speed V ROWS REPS\n");
		return 2;
	}
	for (long i = 0; i < (long)V * rows; i++) {
		/* Box-Muller, sd 2 */
		double a = (lcg(&g) + 1.0) / 9007199254740993.0, b = lcg(&g) / 9007199254740992.0;

		l[i] = (float)(2.0 * sqrt(-2.0 * log(a)) * cos(6.283185307179586 * b));
	}
	for (size_t t = 0; t < sizeof temps / sizeof temps[0]; t++) {
		struct fw_sampler s = { temps[t], 1.0f, 0 };
		double tp = 0, tf = 0;
		long same = 0, n = 0;
		uint64_t r1 = 7, r2 = 7;

		for (int k = 0; k < reps; k++)
			for (int r = 0; r < rows; r++) {
				const float *x = l + (size_t)r * V;
				double t0 = now();
				int32_t a = plain(x, V, temps[t], &r1, scr, &lp);
				double t1 = now();
				int32_t b = fw_sample(x, V, &s, &r2, scr, &lp);

				tf += now() - t1;
				tp += t1 - t0;
				same += a == b;
				n++;
			}
		printf("V=%d temp=%.1f logp %.1f %.1f %.2f %.4f\n", V, temps[t], tp / n * 1e6,
		       tf / n * 1e6, tp / tf, (double)same / n);
	}
	free(l);
	free(scr);
	return 0;
}
