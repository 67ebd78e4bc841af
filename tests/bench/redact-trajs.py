#!/usr/bin/env python3
"""Trajectories for tests/bench/redact, as OpenAI chat logs fb-ingest reads.

  redact-trajs.py secrets CORPUS.tsv          one trajectory per secret, in
                                              the user's message
  redact-trajs.py code MAX_BYTES FILE...      the files as an agent reads
                                              them: read_file calls and their
                                              tool results, 32 KB a result
  redact-trajs.py score CORPUS.tsv SECRETS.json CODE.json BYTES
                                              the table row data (JSON) from
                                              `rec json` of both outputs
"""
import json
import sys


def unescape(t):
    out, i = [], 0
    while i < len(t):
        if t[i] == "\\" and i + 1 < len(t):
            out.append({"n": "\n", "t": "\t", "\\": "\\"}.get(t[i + 1], "\\" + t[i + 1]))
            i += 2
        else:
            out.append(t[i])
            i += 1
    return "".join(out)


def corpus(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#"):
                continue
            rule, secret, text = line.rstrip("\n").split("\t")
            rows.append((rule, unescape(secret), unescape(text)))
    return rows


def traj(i, messages):
    return {"id": "chatcmpl-bench%06d" % i, "object": "chat.completion",
            "created": 1793919780, "model": "bench", "metadata": {"item": "b%d" % i},
            "request": {"messages": messages},
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Done."},
                         "finish_reason": "stop"}]}


def secrets(path):
    for i, (rule, secret, text) in enumerate(corpus(path)):
        print(json.dumps(traj(i, [{"role": "user", "content": "Please check this:\n" + text}])))


def code(max_bytes, files):
    total, n, msgs = 0, 0, []
    for path in files:
        if total >= max_bytes:
            break
        try:
            with open(path, "rb") as f:
                data = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        total += len(data.encode())
        msgs = [{"role": "user", "content": "Fix the failing test."}]
        for k in range(0, max(len(data), 1), 32768):
            cid = "call_%d_%d" % (n, k)
            msgs.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": cid, "type": "function",
                 "function": {"name": "read_file",
                              "arguments": json.dumps({"path": path, "offset": k})}}]})
            msgs.append({"role": "tool", "tool_call_id": cid, "content": data[k:k + 32768]})
        print(json.dumps(traj(n, msgs)))
        n += 1
    print("%d" % total, file=sys.stderr)


def score(cpath, spath, kpath, nbytes):
    rows = corpus(cpath)
    recs = {}
    with open(spath, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            recs[r["meta"]["item"]] = r
    found, total = {}, {}
    for i, (rule, secret, text) in enumerate(rows):
        r = recs.get("b%d" % i)
        total[rule] = total.get(rule, 0) + 1
        if r is None:
            continue
        body = "\n".join(t.get("text", "") for t in r["turns"])
        if secret not in body and r["meta"].get("redactions"):
            found[rule] = found.get(rule, 0) + 1
    fp = {}
    with open(kpath, encoding="utf-8") as f:
        for line in f:
            for k, v in json.loads(line)["meta"].get("redactions", {}).items():
                fp[k] = fp.get(k, 0) + v
    json.dump({"found": found, "total": total, "fp": fp, "mb": nbytes / 1e6}, sys.stdout)


if __name__ == "__main__":
    if sys.argv[1] == "secrets":
        secrets(sys.argv[2])
    elif sys.argv[1] == "code":
        code(int(sys.argv[2]), sys.argv[3:])
    else:
        score(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
