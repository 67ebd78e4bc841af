#!/usr/bin/python3
"""Peer of traj-filter --decontam for the tests: prints the ids of the
records (JSON Lines on stdin) that share a 13-gram of normalized words with
the user-written text of the reference records in EVAL (JSON Lines).
usage: decontam.py EVAL.jsonl < records.jsonl"""
import json, re, sys

N = 13
WORD = re.compile(rb"[A-Za-z0-9\x80-\xff]+")


def words(s):
    return [w.lower() for w in WORD.findall(s.encode())]


def grams(s):
    w = words(s)
    return {tuple(w[i:i + N]) for i in range(len(w) - N + 1)}


def ref_texts(r):
    out = [r[k] for k in ("prompt", "text", "question", "problem_statement") if isinstance(r.get(k), str)]
    if isinstance(r.get("task"), dict) and isinstance(r["task"].get("prompt"), str):
        out.append(r["task"]["prompt"])
    if isinstance(r.get("turns"), list):
        out += [t["text"] for t in r["turns"] if t.get("role") == "user" and isinstance(t.get("text"), str)]
    return out


def strings(v):
    if isinstance(v, str):
        yield v
    elif isinstance(v, list):
        for x in v:
            yield from strings(x)
    elif isinstance(v, dict):
        for x in v.values():
            yield from strings(x)


bad = set()
for line in open(sys.argv[1]):
    if line.strip():
        for t in ref_texts(json.loads(line)):
            bad |= grams(t)
for line in sys.stdin:
    r = json.loads(line)
    if any(grams(s) & bad for s in strings(r)):
        print(r.get("id"))
