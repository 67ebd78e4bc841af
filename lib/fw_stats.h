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

/* ---- A/B verdicts ------------------------------------------------------------ */

/* Fewer users than this in a pair of arms: the bootstrap is no basis for a
 * verdict. */
#define FW_AB_MIN_USERS 10

/* One vote: user and arm are dense indices, up 1 for a thumbs-up, 0 down. */
struct fw_ab_vote {
	uint32_t user, arm;
	int up;
};

/* The votes of one paired item (the same prompt answered by several arms)
 * in one arm. */
struct fw_ab_item {
	uint32_t key, arm;
	uint32_t up, down;
};

/* An arm: thumbs-up, votes, distinct users, and the Wilson 95% interval of
 * its rate. */
struct fw_ab_arm {
	uint64_t up, votes, users;
	double lo, hi;
};

/* The comparison of arms a and b. */
struct fw_ab_pair {
	uint32_t a, b;
	double pa, pb, diff, lo, hi, deff; /* rates, pb - pa and its interval; design effect */
	int ok;          /* the bootstrap ran */
	int verdict;     /* 1: b preferred, -1: a preferred, 0: none */
	uint64_t need;   /* votes per arm for a verdict, 0 unknown */
	uint64_t users;  /* users who voted in a or b */
	int paired;      /* the items below were counted */
	uint64_t npairs, a_only, b_only; /* items with an outcome in both; won by one arm only */
	double p_mcnemar;
};

/* The level of each of npairs comparisons, so that the family of them keeps
 * a 5% chance of any false verdict (Bonferroni): 0.05 / npairs (0.05 for
 * none).  Cannot fail. */
double fw_ab_alpha(size_t npairs);

/* Bootstrap resamples enough that each tail of an interval at level alpha
 * holds at least 10 of them, and at least 2000.  Cannot fail. */
unsigned fw_ab_resamples(double alpha);

/* Sorts votes by user then arm, and items by key then arm, as fw_ab_arms()
 * and fw_ab_compare() need them.  Either may be NULL when its count is 0.
 * Cannot fail. */
void fw_ab_sort(struct fw_ab_vote *v, size_t nv, struct fw_ab_item *it, size_t nit);

/* Fills as[0..narms) from the sorted votes v[0..nv) (each arm < narms):
 * counts, users once per arm, Wilson intervals.  Cannot fail. */
void fw_ab_arms(struct fw_ab_arm *as, size_t narms, const struct fw_ab_vote *v, size_t nv);

/*
 * The verdict between arms p->a and p->b (set by the caller; the rest of *p
 * is filled): the cluster bootstrap of pb - pa over the users who voted in
 * either (fw_boot_diff() at level 1 - alpha with seed and resamples), a
 * verdict when at least FW_AB_MIN_USERS users voted and the interval leaves
 * 0 out, the votes a verdict would need (fw_n_needed() at power 0.8 times
 * the design effect), and when it is not NULL McNemar's exact test over the
 * sorted items it[0..nit) (one outcome per item and arm: the majority of
 * its votes; a tie gives none).  v[0..nv) are sorted as fw_ab_sort() does;
 * as from fw_ab_arms().  cl has room for one cluster per user, work for
 * resamples doubles.  Cannot fail (p->ok says whether the bootstrap ran).
 */
void fw_ab_compare(struct fw_ab_pair *p, const struct fw_ab_vote *v, size_t nv,
		   const struct fw_ab_arm *as, const struct fw_ab_item *it, size_t nit,
		   uint64_t seed, unsigned resamples, double alpha, struct fw_cluster *cl,
		   double *work);

#endif
