/*
 * fw_stats.c — binomial intervals, cluster bootstrap, McNemar, sample size.
 */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fw_stats.h"

int fw_wilson(uint64_t k, uint64_t n, double z, double *lo, double *hi)
{
	if (n == 0 || k > n) {
		*lo = 0;
		*hi = 1;
		return -1;
	}
	double nn = (double)n, p = (double)k / nn, z2 = z * z;
	double den = 1 + z2 / nn;
	double mid = (p + z2 / (2 * nn)) / den;
	double half = z * sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn)) / den;
	*lo = mid - half;
	*hi = mid + half;
	/* Rounding must not push the bounds past the estimate or [0, 1]. */
	if (*lo < 0 || k == 0)
		*lo = 0;
	if (*hi > 1 || k == n)
		*hi = 1;
	return 0;
}

double fw_norm_cdf(double x)
{
	return 0.5 * erfc(-x / M_SQRT2);
}

double fw_norm_ppf(double p)
{
	/* Acklam's rational approximation (relative error 1.15e-9), then one
	 * Halley step on Phi(x) - p, which brings it to machine precision. */
	static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
				   -2.759285104469687e+02, 1.383577518672690e+02,
				   -3.066479806614716e+01, 2.506628277459239e+00};
	static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
				   -1.556989798598866e+02, 6.680131188771972e+01,
				   -1.328068155288572e+01};
	static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
				   -2.400758277161838e+00, -2.549732539343734e+00,
				   4.374664141464968e+00, 2.938163982698783e+00};
	static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
				   2.445134137142996e+00, 3.754408661907416e+00};
	if (isnan(p) || p < 0 || p > 1)
		return NAN;
	if (p == 0)
		return -INFINITY;
	if (p == 1)
		return INFINITY;
	/* Upper half by symmetry: 1 - p is exact there (Sterbenz), and the
	 * refinement step is accurate only where Phi(x) is small. */
	if (p > 0.5)
		return -fw_norm_ppf(1 - p);
	double q, r, x;
	if (p < 0.02425) {
		q = sqrt(-2 * log(p));
		x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
		    ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
	} else {
		q = p - 0.5;
		r = q * q;
		x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
		    (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
	}
	double e = fw_norm_cdf(x) - p;
	double u = e * sqrt(2 * M_PI) * exp(x * x / 2);
	return x - u / (1 + x * u / 2);
}

double fw_binom_cdf(uint64_t k, uint64_t n, double p)
{
	if (k >= n)
		return 1;
	if (p <= 0)
		return 1;
	if (p >= 1)
		return 0;
	double nn = (double)n, lp = log(p), lq = log1p(-p), s = 0;
	double lgn = lgamma(nn + 1);
	for (uint64_t i = 0; i <= k; i++) {
		double di = (double)i;
		s += exp(lgn - lgamma(di + 1) - lgamma(nn - di + 1) + di * lp + (nn - di) * lq);
	}
	return s > 1 ? 1 : s;
}

double fw_mcnemar_exact(uint64_t b, uint64_t c)
{
	uint64_t n = b + c;
	if (n == 0)
		return 1;
	double p = 2 * fw_binom_cdf(b < c ? b : c, n, 0.5);
	return p > 1 ? 1 : p;
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return (a > b) - (a < b);
}

/* Quantile q of sorted x[0..m) with linear interpolation (type 7). */
static double quantile(const double *x, unsigned m, double q)
{
	double h = (m - 1) * q;
	unsigned i = (unsigned)floor(h);
	if (i + 1 >= m)
		return x[m - 1];
	return x[i] + (h - i) * (x[i + 1] - x[i]);
}

int fw_boot_diff(const struct fw_cluster *c, size_t nc, uint64_t seed, unsigned resamples,
		 double level, double *work, double *lo, double *hi)
{
	uint64_t n0 = 0, n1 = 0;
	for (size_t i = 0; i < nc; i++) {
		n0 += c[i].n[0];
		n1 += c[i].n[1];
	}
	if (nc == 0 || resamples == 0 || n0 == 0 || n1 == 0)
		return -1;
	uint64_t rng = seed;
	for (unsigned r = 0; r < resamples; r++) {
		uint64_t up[2], n[2];
		int tries = 0;
		do {
			up[0] = up[1] = n[0] = n[1] = 0;
			for (size_t i = 0; i < nc; i++) {
				/* Multiply-shift maps 64 random bits onto [0, nc). */
				size_t j = (size_t)(((unsigned __int128)fw_rand64(&rng) * nc) >> 64);
				up[0] += c[j].up[0];
				up[1] += c[j].up[1];
				n[0] += c[j].n[0];
				n[1] += c[j].n[1];
			}
		} while ((n[0] == 0 || n[1] == 0) && ++tries < 100);
		if (n[0] == 0 || n[1] == 0)
			return -1;
		work[r] = (double)up[1] / (double)n[1] - (double)up[0] / (double)n[0];
	}
	qsort(work, resamples, sizeof *work, cmp_double);
	double a = (1 - level) / 2;
	*lo = quantile(work, resamples, a);
	*hi = quantile(work, resamples, 1 - a);
	return 0;
}

uint64_t fw_n_needed(double p1, double p2, double alpha, double power)
{
	if (!(p1 >= 0 && p1 <= 1 && p2 >= 0 && p2 <= 1 && alpha > 0 && alpha < 1 && power > 0 &&
	      power < 1) || p1 == p2)
		return 0;
	double za = fw_norm_ppf(1 - alpha / 2), zb = fw_norm_ppf(power);
	double pbar = (p1 + p2) / 2, d = p1 - p2;
	double t = za * sqrt(2 * pbar * (1 - pbar)) + zb * sqrt(p1 * (1 - p1) + p2 * (1 - p2));
	double n = ceil(t * t / (d * d) - 1e-9);
	return n < 1 ? 1 : (uint64_t)n;
}

/* ---- A/B verdicts ------------------------------------------------------------ */

double fw_ab_alpha(size_t npairs)
{
	return 0.05 / (double)(npairs ? npairs : 1);
}

unsigned fw_ab_resamples(double alpha)
{
	double want = ceil(20 / alpha);

	return want > 2000 ? (unsigned)want : 2000;
}

/* Votes by user, then arm. */
static int cmp_vote_user(const void *x, const void *y)
{
	const struct fw_ab_vote *a = x, *b = y;

	if (a->user != b->user)
		return a->user < b->user ? -1 : 1;
	return a->arm < b->arm ? -1 : a->arm > b->arm;
}

static int cmp_item(const void *x, const void *y)
{
	const struct fw_ab_item *a = x, *b = y;

	if (a->key != b->key)
		return a->key < b->key ? -1 : 1;
	return a->arm < b->arm ? -1 : a->arm > b->arm;
}

void fw_ab_sort(struct fw_ab_vote *v, size_t nv, struct fw_ab_item *it, size_t nit)
{
	/* qsort() wants a valid pointer even for no elements. */
	if (nv)
		qsort(v, nv, sizeof *v, cmp_vote_user);
	if (nit)
		qsort(it, nit, sizeof *it, cmp_item);
}

void fw_ab_arms(struct fw_ab_arm *as, size_t narms, const struct fw_ab_vote *v, size_t nv)
{
	memset(as, 0, narms * sizeof *as);
	for (size_t i = 0; i < nv; i++) {
		assert(v[i].arm < narms);
		as[v[i].arm].votes++;
		as[v[i].arm].up += (uint64_t)v[i].up;
		/* Votes are sorted by user and arm: count a user once per arm. */
		as[v[i].arm].users += i == 0 || v[i - 1].user != v[i].user || v[i - 1].arm != v[i].arm;
	}
	for (size_t i = 0; i < narms; i++)
		fw_wilson(as[i].up, as[i].votes, FW_Z95, &as[i].lo, &as[i].hi);
}

void fw_ab_compare(struct fw_ab_pair *ps, const struct fw_ab_vote *v, size_t nv,
		   const struct fw_ab_arm *as, const struct fw_ab_item *it, size_t nit,
		   uint64_t seed, unsigned resamples, double alpha, struct fw_cluster *cl,
		   double *work)
{
	/* Clusters: users with a vote in arm a or b (votes sorted by user). */
	size_t nc = 0;
	for (size_t i = 0; i < nv;) {
		size_t j = i;
		struct fw_cluster c = {{0, 0}, {0, 0}};
		for (; j < nv && v[j].user == v[i].user; j++) {
			int side = v[j].arm == ps->a ? 0 : v[j].arm == ps->b ? 1 : -1;
			if (side < 0)
				continue;
			c.n[side]++;
			c.up[side] += (uint32_t)v[j].up;
		}
		if (c.n[0] + c.n[1])
			cl[nc++] = c;
		i = j;
	}
	ps->users = nc;
	ps->pa = as[ps->a].votes ? (double)as[ps->a].up / (double)as[ps->a].votes : 0;
	ps->pb = as[ps->b].votes ? (double)as[ps->b].up / (double)as[ps->b].votes : 0;
	ps->diff = ps->pb - ps->pa;
	ps->ok = fw_boot_diff(cl, nc, seed, resamples, 1 - alpha, work, &ps->lo, &ps->hi) == 0;
	ps->verdict = !ps->ok || nc < FW_AB_MIN_USERS ? 0 : ps->lo > 0 ? 1 : ps->hi < 0 ? -1 : 0;
	/* Design effect: how much wider the cluster interval is than one over
	 * independent votes; the sample size scales by it. */
	ps->deff = 1;
	if (ps->ok && as[ps->a].votes && as[ps->b].votes) {
		double se = sqrt(ps->pa * (1 - ps->pa) / (double)as[ps->a].votes +
				 ps->pb * (1 - ps->pb) / (double)as[ps->b].votes);
		if (se > 0) {
			double z = fw_norm_ppf(1 - alpha / 2);
			double r = (ps->hi - ps->lo) / (2 * z * se);
			if (r * r > 1)
				ps->deff = r * r;
		}
	}
	uint64_t n = fw_n_needed(ps->pa, ps->pb, alpha, 0.8);
	ps->need = n ? (uint64_t)ceil((double)n * ps->deff) : 0;
	ps->paired = it != NULL;
	ps->npairs = ps->a_only = ps->b_only = 0;
	ps->p_mcnemar = 0;
	if (!it)
		return;
	/* One outcome per (item, arm): the majority of its votes. */
	for (size_t i = 0; i < nit;) {
		size_t j = i;
		int oa = -1, ob = -1;
		uint32_t ua = 0, da = 0, ub = 0, db = 0;
		for (; j < nit && it[j].key == it[i].key; j++) {
			if (it[j].arm == ps->a)
				ua += it[j].up, da += it[j].down;
			else if (it[j].arm == ps->b)
				ub += it[j].up, db += it[j].down;
		}
		if (ua != da)
			oa = ua > da;
		if (ub != db)
			ob = ub > db;
		if (oa >= 0 && ob >= 0) {
			ps->npairs++;
			ps->a_only += oa && !ob;
			ps->b_only += ob && !oa;
		}
		i = j;
	}
	ps->p_mcnemar = fw_mcnemar_exact(ps->a_only, ps->b_only);
}
