#!/usr/bin/python3
"""Reference values for tests/unit/test_fbstats.c, computed with SciPy
(independently of lib/base/fw_stats.c).  Run: /usr/bin/python3 tests/ref/fbstats.py"""
from math import ceil, sqrt
from scipy import stats

Z = stats.norm.ppf(0.975)
print("z95 %.15f" % Z)
for k, n in [(0, 10), (3, 10), (10, 10), (81, 263), (1, 1000), (500, 1000)]:
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    print("wilson %d %d %.12f %.12f" % (k, n, ci.low, ci.high))
for p in [1e-10, 0.001, 0.025, 0.2, 0.5, 0.8, 0.975, 0.999999]:
    print("ppf %g %.15g" % (p, stats.norm.ppf(p)))
for k, n, p in [(3, 10, 0.5), (0, 20, 0.5), (7, 30, 0.3), (480, 1000, 0.5), (15, 100, 0.1)]:
    print("binom_cdf %d %d %g %.15g" % (k, n, p, stats.binom.cdf(k, n, p)))
for b, c in [(0, 0), (0, 5), (3, 12), (10, 10), (25, 40), (1, 30)]:
    p = 1.0 if b + c == 0 else stats.binomtest(min(b, c), b + c, 0.5).pvalue
    print("mcnemar %d %d %.15g" % (b, c, p))
for p1, p2 in [(0.5, 0.6), (0.3, 0.35), (0.9, 0.8), (0.1, 0.5)]:
    za, zb = stats.norm.ppf(0.975), stats.norm.ppf(0.8)
    pb = (p1 + p2) / 2
    n = (za * sqrt(2 * pb * (1 - pb)) + zb * sqrt(p1 * (1 - p1) + p2 * (1 - p2))) ** 2 / (p1 - p2) ** 2
    print("n_needed %g %g %d" % (p1, p2, ceil(n)))
