#!/usr/bin/env python3
"""Writes realistic trajectory JSON Lines of about SIZE bytes to stdout:
long texts, nested turns with tool calls, numbers.  Deterministic.
usage: gen-traj.py SIZE_BYTES"""
import json, random, sys

rng = random.Random(42)
WORDS = ("the test fails because the function returns None instead of a list when "
         "input is empty so we should check the length first and then call helper "
         "with parsed arguments from config file def return import class self "
         "assert raise ValueError pytest tmp_path fixture module path os sys").split()
MODELS = ["ckpt-a", "ckpt-b", "ckpt-c", "gpt-4o-2024-08-06", "claude-sonnet-4"]

def text(n):
    return " ".join(rng.choice(WORDS) for _ in range(n))

def code(n):
    lines = []
    for i in range(n):
        lines.append("    " * rng.randint(0, 3) + "%s = %s(%d)  # %s" % (
            rng.choice(WORDS), rng.choice(WORDS), rng.randint(0, 999), text(4)))
    return "\n".join(lines)

def traj(i):
    turns = [{"role": "system", "text": "You are a coding agent. " + text(30)},
             {"role": "user", "text": text(rng.randint(10, 80))}]
    for k in range(rng.randint(2, 8)):
        cid = "call_%d_%d" % (i, k)
        cmd = rng.choice(["pytest -q tests/", "cat src/app.py", "grep -rn TODO .",
                          "python3 -m build", "git diff"])
        turns.append({"role": "assistant", "text": text(rng.randint(5, 40)),
                      "calls": [{"id": cid, "name": "bash",
                                 "args": json.dumps({"cmd": cmd})}],
                      "tokens": rng.randint(20, 400)})
        turns.append({"role": "tool", "call_id": cid, "text": code(rng.randint(3, 40)),
                      "is_error": rng.random() < 0.2})
    turns.append({"role": "assistant", "text": text(rng.randint(20, 120))})
    fb = [{"rating": rng.choice([1, -1]), "user": "u%d" % rng.randint(1, 500),
           "origin": rng.choice(["external", "internal"]),
           "at": 1764000000 + rng.randint(0, 10**7)} for _ in range(rng.randint(0, 3))]
    return {"kind": "traj", "id": "%016x" % rng.getrandbits(64), "v": 1,
            "source": "openai", "model": rng.choice(MODELS),
            "created": 1764000000 + i, "turns": turns, "feedback": fb,
            "usage": {"input_tokens": rng.randint(100, 90000),
                      "output_tokens": rng.randint(10, 4000), "cost": rng.random()},
            "tags": rng.sample(["tests", "refactor", "bugfix", "docs", "ci"], 2)}

size = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000_000
out = sys.stdout
n = i = 0
while n < size:
    line = json.dumps(traj(i), ensure_ascii=False, separators=(",", ":")) + "\n"
    out.write(line)
    n += len(line.encode())
    i += 1
