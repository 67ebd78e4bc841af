/*
 * fw_stats.h — the statistics of fb-report(1): binomial intervals, a
 * cluster bootstrap for the difference of two rates, McNemar's exact test
 * and the sample size a verdict would need.
 *
 * All probabilities are in [0, 1]; "two-sided" tests double the smaller
 * tail.  Nothing here allocates: buffers come from the caller.
 */
#ifndef FW_STATS_H
#define FW_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "fw_base.h" /* fw_rand64() */

/* z of a two-sided 95% interval: the 0.975 quantile of the standard normal. */
#define FW_Z95 1.959963984540054

/*
 * Wilson score interval of a proportion: k successes in n trials, z the
 * normal quantile of the confidence (FW_Z95 for 95%).  Fills *lo and *hi
 * (0 <= lo <= k/n <= hi <= 1).  Returns 0, or -1 when n is 0 or k > n (then
 * lo = 0 and hi = 1).
 */
int fw_wilson(uint64_t k, uint64_t n, double z, double *lo, double *hi);

/* Quantile function of the standard normal: x with Phi(x) = p, for
 * 0 < p < 1 (relative error below 1e-12).  Returns -inf/+inf at 0/1 and NaN
 * outside [0, 1]. */
double fw_norm_ppf(double p);

/* Standard normal distribution function Phi(x).  Cannot fail. */
double fw_norm_cdf(double x);

/* P(X <= k) for X ~ Binomial(n, p), summed in log space (exact to about
 * 1e-12 for n up to 10^7).  Returns 1 when k >= n. */
double fw_binom_cdf(uint64_t k, uint64_t n, double p);

/*
 * McNemar's exact test on a paired 2x2 table: b pairs where only the first
 * arm succeeded, c pairs where only the second did.  Returns the two-sided
 * p-value min(1, 2 P(X <= min(b, c))) with X ~ Binomial(b + c, 1/2); 1 when
 * b + c is 0.
 */
double fw_mcnemar_exact(uint64_t b, uint64_t c);

/* One cluster (a user): votes and thumbs-up in arm 0 (A) and arm 1 (B). */
struct fw_cluster {
	uint32_t up[2];
	uint32_t n[2];
};

/*
 * Percentile bootstrap interval of rate(B) - rate(A), resampling whole
 * clusters with replacement (a user's votes stay together, so correlated
 * votes widen the interval as they should).  c[0..nc) are the clusters;
 * work has room for `resamples` doubles; level is the confidence (0.95).
 * The generator is splitmix64 seeded with seed, so the same inputs give the
 * same interval.  A resample in which an arm has no votes is drawn again
 * (at most 100 times in a row).  Fills *lo and *hi (linear interpolation
 * between order statistics).  Returns 0, or -1 when nc or resamples is 0
 * or an arm has no votes at all.
 */
int fw_boot_diff(const struct fw_cluster *c, size_t nc, uint64_t seed, unsigned resamples,
		 double level, double *work, double *lo, double *hi);

/*
 * Votes needed per arm for a two-sided two-proportion z-test at level alpha
 * to detect p1 versus p2 with the given power (normal approximation, no
 * continuity correction):
 *   n = (z_{1-alpha/2} sqrt(2 pbar qbar) + z_{power} sqrt(p1 q1 + p2 q2))^2 / (p1 - p2)^2
 * rounded up.  Returns 0 when p1 == p2 or an argument is out of range.
 */
uint64_t fw_n_needed(double p1, double p2, double alpha, double power);

#endif
