#!/usr/bin/python3
"""Peer of fb-report's A/B figures for the tests, with SciPy: thumbs-up
rate per arm with its Wilson 95% interval, and for each pair of arms the
McNemar exact test on the majority vote per item.  Reads traj records as
JSON Lines on stdin; prints one line per arm and per pair:
  arm NAME UP VOTES LO HI
  pair A B PAIRS A_ONLY B_ONLY P
usage: fbreport.py BY_FIELD PAIRED_FIELD < traj.jsonl   (fields are dotted paths)"""
import itertools, json, sys
from collections import defaultdict
from scipy import stats


def get(r, path):
    for k in path.strip(".").split("."):
        if not isinstance(r, dict) or k not in r:
            return "(none)"
        r = r[k]
    return r if isinstance(r, str) else json.dumps(r, separators=(",", ":"))


by, paired = sys.argv[1], sys.argv[2]
up, n = defaultdict(int), defaultdict(int)
item = defaultdict(lambda: [0, 0])
for line in sys.stdin:
    r = json.loads(line)
    arm, key = get(r, by), get(r, paired)
    for f in r.get("feedback", []):
        if f.get("rating", 0) == 0:
            continue
        n[arm] += 1
        up[arm] += f["rating"] > 0
        item[key, arm][0 if f["rating"] > 0 else 1] += 1
for arm in sorted(n):
    ci = stats.binomtest(up[arm], n[arm]).proportion_ci(0.95, method="wilson")
    print("arm %s %d %d %.6f %.6f" % (arm, up[arm], n[arm], ci.low, ci.high))
keys = {k for k, _ in item}
for a, b in itertools.combinations(sorted(n), 2):
    pairs = aonly = bonly = 0
    for k in keys:
        ua, da = item.get((k, a), (0, 0))
        ub, db = item.get((k, b), (0, 0))
        if ua == da or ub == db:
            continue
        pairs += 1
        aonly += ua > da and ub < db
        bonly += ub > db and ua < da
    p = 1.0 if aonly + bonly == 0 else stats.binomtest(min(aonly, bonly), aonly + bonly, 0.5).pvalue
    print("pair %s %s %d %d %d %.6g" % (a, b, pairs, aonly, bonly, p))
