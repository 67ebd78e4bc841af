/* stats.c — descriptive statistics over arrays of doubles. */
#include <stdlib.h>

#include "tally.h"

double tally_sum(const double *x, size_t n)
{
	/* Kahan summation keeps long sums of mixed magnitudes accurate. */
	double s = 0, c = 0;
	for (size_t i = 0; i < n; i++) {
		double y = x[i] - c;
		double t = s + y;
		c = (t - s) - y;
		s = t;
	}
	return s;
}

double tally_mean(const double *x, size_t n)
{
	return n ? tally_sum(x, n) / (double)n : 0;
}

double tally_variance(const double *x, size_t n)
{
	if (n < 2)
		return 0;
	double m = tally_mean(x, n), ss = 0;
	for (size_t i = 0; i < n; i++)
		ss += (x[i] - m) * (x[i] - m);
	return ss / (double)(n - 1);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double tally_median(double *x, size_t n)
{
	if (n == 0)
		return 0;
	qsort(x, n, sizeof *x, cmp_double);
	return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

double tally_min(const double *x, size_t n)
{
	double m = n ? x[0] : 0;
	for (size_t i = 1; i < n; i++)
		if (x[i] < m)
			m = x[i];
	return m;
}

double tally_max(const double *x, size_t n)
{
	double m = n ? x[0] : 0;
	for (size_t i = 1; i < n; i++)
		if (x[i] > m)
			m = x[i];
	return m;
}

size_t tally_argmax(const double *x, size_t n)
{
	size_t best = 0;
	for (size_t i = 1; i < n; i++)
		if (x[i] > x[best])
			best = i;
	return best;
}

double tally_dot(const double *a, const double *b, size_t n)
{
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += a[i] * b[i];
	return s;
}

void tally_cumsum(double *out, const double *x, size_t n)
{
	double s = 0;
	for (size_t i = 0; i < n; i++) {
		s += x[i];
		out[i] = s;
	}
}

double tally_lerp(double a, double b, double t)
{
	return a + (b - a) * t;
}

long tally_gcd(long a, long b)
{
	if (a < 0)
		a = -a;
	if (b < 0)
		b = -b;
	while (b) {
		long t = a % b;
		a = b;
		b = t;
	}
	return a;
}

long tally_lcm(long a, long b)
{
	if (a == 0 || b == 0)
		return 0;
	long g = tally_gcd(a, b);
	long l = a / g * b;
	return l < 0 ? -l : l;
}

int tally_is_prime(long n)
{
	if (n < 2)
		return 0;
	if (n % 2 == 0)
		return n == 2;
	for (long d = 3; d * d <= n; d += 2)
		if (n % d == 0)
			return 0;
	return 1;
}
