#!/usr/bin/python3
"""PyTorch reference for train-step's losses and its AdamW step.

usage: train_ref.py make CKPT_DIR N SEED > RECORDS.jsonl
       train_ref.py same DIR_A DIR_B [--tol R] [--ulps K]
       train_ref.py check BEFORE_DIR AFTER_DIR RECORDS.jsonl METRICS.jsonl
                    [--objective LIST] [--lr X] [--clip-grad X] [--weight-decay X]
                    [--beta1 X] [--beta2 X] [--eps X] [--clip-low X] [--clip-high X]
                    [--no-std] [--norm token|seq] [--kl-coef X --ref DIR]
                    [--is-clip X] [--tol-loss R] [--tol-update R]

`make` writes N training records (JSON lines) of random tokens for the
model in CKPT_DIR: "tokens" with a prompt masked out ("mask"), "logprobs"
near the model's own (PyTorch's log-probs plus noise, so that some PPO
ratios are clipped), groups of four rollouts ("group") with a 0/1
"grade.reward" (one group all equal, one group alone), "teach.adv", and
on two records of three "teach.topk" (3 tokens per credited token, from
the first or the second).

`check` builds the model of BEFORE_DIR in float64 PyTorch (the model of
model_ref.py), computes the objectives of train-step(1) from their
definitions with autograd over the whole batch as one step (constant
learning rate, no warmup), clips the gradient with clip_grad_norm_ and takes
one torch.optim.AdamW step (weight decay on matrices only).  It compares the
losses and gradient norm of the step's metrics record, and the update of
every parameter (AFTER - BEFORE, relative to that tensor's largest update)
with train-step's checkpoint in AFTER_DIR.  Prints one line per quantity and
exits 1 when any fails, 2 on bad usage.

`same` compares the parameters of two checkpoints (relative to each
tensor's largest value), e.g. a data-parallel run with one process's.
With --ulps K it compares them in one norm instead: the L2 norm of A - B
over all parameters must be at most K * u * |B| (u = 2^-24, float32's
unit roundoff, so K counts roundings of every parameter).
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model_ref import Config, forward, read_safetensors  # noqa: E402


def load(ckpt, dtype):
    cfg = Config(f"{ckpt}/config.json")
    P = read_safetensors(f"{ckpt}/model.safetensors")
    if cfg.tied:
        P.pop("lm_head.weight", None)
    return cfg, {k: v.to(dtype) for k, v in P.items()}


def all_logp(cfg, P, ids):
    """log p(. | ids[:i]) for i >= 1, as a (n-1, V) tensor."""
    t = torch.tensor([ids], dtype=torch.long)
    return forward(cfg, P, t).log_softmax(-1)[0, :-1]


def token_logp(cfg, P, ids):
    """log p(ids[i] | ids[:i]) for i >= 1, as a (n-1,) tensor."""
    t = torch.tensor([ids], dtype=torch.long)
    return all_logp(cfg, P, ids).gather(-1, t[0, 1:, None])[:, 0]


def make(a):
    cfg, P = load(a.ckpt, torch.float64)
    rng = np.random.default_rng(a.seed)
    krng = np.random.default_rng(a.seed + 1000)
    for i in range(a.n):
        n = int(rng.integers(6, 20))
        ids = [int(x) for x in rng.integers(0, min(cfg.V, 256), n)]
        prompt = int(rng.integers(1, 4))
        mask = [0] * prompt + [1] * (n - prompt)
        with torch.no_grad():
            lp = token_logp(cfg, P, ids).numpy()
        old = [None] + [float(x + rng.normal(0, 0.3)) for x in lp]
        g = i // 4
        if g == 1:
            reward = 1.0                       # a group with all rewards equal
        elif i == a.n - 1 and a.n % 4 == 1:
            reward = 0.5                       # a group of one
        else:
            reward = float(rng.integers(0, 2)) if i % 4 else float(i % 8 == 0)
        adv = [float(x) for x in rng.normal(0, 0.5, sum(mask[1:]))]
        rec = {"kind": "rollout", "id": f"r{i}", "group": f"g{g}", "tokens": ids,
               "mask": mask, "logprobs": [x for x in old[1:]],
               "grade": {"reward": reward}, "teach": {"adv": adv}}
        if i % 3:
            K, frm = 3, i % 3 - 1
            ids_k, lps_k = [], []
            for _ in range(len(adv) - frm):
                ids_k += [int(x) for x in krng.choice(min(cfg.V, 256), K, replace=False)]
                lps_k += sorted((float(-x) for x in krng.exponential(1.5, K)), reverse=True)
            rec["teach"]["topk"] = {"k": K, "from": frm, "ids": ids_k, "logprobs": lps_k}
        print(json.dumps(rec))
    return 0


def parse_objective(s):
    w = {"sft": 0.0, "pg": 0.0, "distill": 0.0, "topk": 0.0}
    for part in s.split(","):
        name, _, val = part.partition(":")
        w[name] = float(val) if val else 1.0
    return w


def rel(a, b):
    d = (a - b).abs().max().item()
    s = b.abs().max().item()
    return d / s if s > 0 else d


def check(a):
    dt = torch.float64
    cfg, P = load(a.before, dt)
    for t in P.values():
        t.requires_grad_(True)
    _, AF = load(a.after, dt)
    R = load(a.ref, dt)[1] if a.ref else None
    w = parse_objective(a.objective)
    recs = [json.loads(line) for line in open(a.records) if line.strip()]
    metrics = [json.loads(line) for line in open(a.metrics) if line.strip()]
    if len(metrics) != 1:
        print(f"FAIL expected one metrics record, got {len(metrics)}")
        return 1
    M = metrics[0]

    # GRPO advantages per group: sample std (ddof 1) + 1e-4
    groups = {}
    for i, r in enumerate(recs):
        groups.setdefault(r.get("group"), []).append(i)
    adv = [0.0] * len(recs)
    used = [False] * len(recs)
    skipped = 0
    for g, idx in groups.items():
        rw = np.array([recs[i]["grade"]["reward"] for i in idx], dtype=np.float64)
        if len(idx) < 2 or rw.min() == rw.max():
            skipped += 1
            continue
        x = rw - rw.mean()
        if not a.no_std:
            x = x / (rw.std(ddof=1) + 1e-4)
        for i, v in zip(idx, x):
            adv[i], used[i] = float(v), True

    per = []  # (i, logp, mask, old, tadv, ref_logp)
    topk_terms = []  # per record: KL(q || p) of each token with the teacher's top-k
    for i, r in enumerate(recs):
        ids = r["tokens"]
        m = torch.tensor([bool(x) for x in r.get("mask", [1] * len(ids))][1:])
        full = all_logp(cfg, P, ids)
        lp = full.gather(-1, torch.tensor(ids[1:])[:, None])[:, 0]
        tk = r.get("teach", {}).get("topk")
        if tk and w["topk"]:
            K, frm = tk["k"], tk.get("from", 0)
            rows = m.nonzero()[:, 0]  # position (in lp) of each teach.adv entry
            kls = []
            for j in range(len(tk["ids"]) // K):
                tid = torch.tensor(tk["ids"][j * K:(j + 1) * K])
                q = torch.tensor(tk["logprobs"][j * K:(j + 1) * K], dtype=dt).softmax(-1)
                pj = full[rows[frm + j]][tid]
                kls.append((q * (q.log() - pj)).sum())
            topk_terms.append(torch.stack(kls))
        lps = r.get("logprobs")
        if lps is not None and len(lps) == len(ids):
            lps = lps[1:]
        old = torch.tensor([math.nan if v is None else v for v in lps], dtype=dt) \
            if lps is not None else torch.full((len(ids) - 1,), math.nan, dtype=dt)
        old = torch.where(torch.isnan(old), lp.detach(), old)
        ta = torch.full((len(ids) - 1,), math.nan, dtype=dt)
        if "teach" in r:
            ta[m] = torch.tensor(r["teach"]["adv"], dtype=dt)
        rl = token_logp(cfg, R, ids).detach() if R is not None else None
        per.append((i, lp[m], old[m], ta[m], rl[m] if rl is not None else None))

    seq = a.norm == "seq"

    def reduce(terms, which):
        """terms: list of per-sequence token tensors -> token or seq mean."""
        terms = [t for t in terms if t.numel()]
        if not terms:
            return torch.zeros((), dtype=dt)
        if seq:
            return sum(t.mean() for t in terms) / len(terms)
        return torch.cat(terms).sum() / sum(t.numel() for t in terms)

    sft = reduce([-lp for (_, lp, _, _, _) in per], "sft")
    surr, kls, clipn, pgn = [], [], 0, 0
    for (i, lp, old, _, rl) in per:
        if not used[i] or w["pg"] == 0:
            continue
        ratio = torch.exp(lp - old)
        A = adv[i]
        s = torch.minimum(ratio * A, ratio.clamp(1 - a.clip_low, 1 + a.clip_high) * A)
        surr.append(-s)
        clipn += int(((A > 0) & (ratio > 1 + a.clip_high) | (A < 0) & (ratio < 1 - a.clip_low)).sum())
        pgn += ratio.numel()
        if rl is not None:
            d = rl - lp
            kls.append(torch.exp(d) - d - 1)
    pg = reduce(surr, "pg")
    kl = reduce(kls, "pg")
    dist_terms, dist_vals = [], []
    for (_, lp, old, ta, _) in per:
        keep = ~torch.isnan(ta)
        if w["distill"] == 0 or not keep.any():
            continue
        iw = torch.exp(lp - old).clamp(max=a.is_clip).detach()[keep]
        dist_terms.append(-iw * ta[keep] * lp[keep])
        dist_vals.append(-iw * ta[keep])
    dist = reduce(dist_terms, "distill")
    dist_val = reduce(dist_vals, "distill")
    topk = reduce(topk_terms, "topk")
    loss = w["sft"] * sft + w["pg"] * (pg + a.kl_coef * kl) + w["distill"] * dist + \
        w["topk"] * topk
    loss.backward()

    fails = []

    def report(what, ours, theirs, tol):
        e = abs(ours - theirs) / max(abs(theirs), 1e-6)
        ok = e <= tol
        print(f"{'ok  ' if ok else 'FAIL'} {what}: train-step {ours:.8g}, pytorch {theirs:.8g} "
              f"(relative {e:.3g}, tolerance {tol:g})")
        if not ok:
            fails.append(what)

    if w["sft"]:
        report("sft loss", M["loss_sft"], sft.item(), a.tol_loss)
    if w["pg"]:
        report("pg loss", M["loss_pg"], pg.item(), a.tol_loss)
        report("clip fraction", M["clip_frac"], clipn / max(pgn, 1), 1e-9)
        report("skipped groups", M["skipped_groups"], skipped, 0)
        if a.kl_coef:
            report("kl", M["kl"], kl.item(), a.tol_loss)
    if w["distill"]:
        report("distill loss", M["loss_distill"], dist_val.item(), a.tol_loss)
    if w["topk"]:
        report("topk loss", M["loss_topk"], topk.item(), a.tol_loss)
    params = list(P.values())
    gn = torch.nn.utils.clip_grad_norm_(params, a.clip_grad)
    report("gradient norm", M["grad_norm"], gn.item(), a.tol_loss)
    before = {k: v.detach().clone() for k, v in P.items()}
    opt = torch.optim.AdamW([{"params": [t for t in params if t.dim() == 2],
                              "weight_decay": a.weight_decay},
                             {"params": [t for t in params if t.dim() != 2],
                              "weight_decay": 0.0}],
                            lr=a.lr, betas=(a.beta1, a.beta2), eps=a.eps)
    opt.step()
    worst, wn = 0.0, ""
    for name, t in P.items():
        e = rel(AF[name] - before[name], t.detach() - before[name])
        if e > worst:
            worst, wn = e, name
    ok = worst <= a.tol_update
    print(f"{'ok  ' if ok else 'FAIL'} update of every parameter after one AdamW step, worst "
          f"relative error ({wn}): {worst:.3g} (tolerance {a.tol_update:g})")
    if not ok:
        fails.append("update")
    return 1 if fails else 0


def same(a):
    """Every parameter of A within tol (relative to the tensor's largest
    value) of B."""
    A = read_safetensors(f"{a.a}/model.safetensors")
    B = read_safetensors(f"{a.b}/model.safetensors")
    if A.keys() != B.keys():
        print("FAIL the checkpoints hold different tensors")
        return 1
    if a.ulps is not None:
        d = sum(((A[k].double() - B[k].double()) ** 2).sum() for k in A).sqrt().item()
        nb = sum((B[k].double() ** 2).sum() for k in A).sqrt().item()
        bound = a.ulps * 2.0 ** -24 * nb
        ok = d <= bound
        print(f"{'ok  ' if ok else 'FAIL'} parameters, |A - B| = {d:.3g} = {d / (2.0 ** -24 * nb):.3g} "
              f"u |B| (|B| = {nb:.4g}, bound {a.ulps:g} u |B| = {bound:.3g})")
        return 0 if ok else 1
    worst, wn = max((rel(A[k].double(), B[k].double()), k) for k in A)
    ok = worst <= a.tol
    print(f"{'ok  ' if ok else 'FAIL'} parameters, worst relative difference ({wn}): "
          f"{worst:.3g} (tolerance {a.tol:g})")
    return 0 if ok else 1


def main(argv):
    ap = argparse.ArgumentParser(prog="train_ref.py")
    sub = ap.add_subparsers(dest="cmd", required=True)
    mk = sub.add_parser("make")
    mk.add_argument("ckpt")
    mk.add_argument("n", type=int)
    mk.add_argument("seed", type=int)
    ck = sub.add_parser("check")
    ck.add_argument("before")
    ck.add_argument("after")
    ck.add_argument("records")
    ck.add_argument("metrics")
    ck.add_argument("--objective", default="sft")
    ck.add_argument("--lr", type=float, default=1e-5)
    ck.add_argument("--clip-grad", type=float, default=1.0)
    ck.add_argument("--weight-decay", type=float, default=0.1)
    ck.add_argument("--beta1", type=float, default=0.9)
    ck.add_argument("--beta2", type=float, default=0.95)
    ck.add_argument("--eps", type=float, default=1e-8)
    ck.add_argument("--clip-low", type=float, default=0.2)
    ck.add_argument("--clip-high", type=float, default=0.28)
    ck.add_argument("--no-std", action="store_true")
    ck.add_argument("--norm", default="token", choices=["token", "seq"])
    ck.add_argument("--kl-coef", type=float, default=0.0)
    ck.add_argument("--ref")
    ck.add_argument("--is-clip", type=float, default=2.0)
    ck.add_argument("--tol-loss", type=float, default=1e-4)
    ck.add_argument("--tol-update", type=float, default=1e-3)
    sm = sub.add_parser("same")
    sm.add_argument("a")
    sm.add_argument("b")
    sm.add_argument("--tol", type=float, default=1e-5)
    sm.add_argument("--ulps", type=float)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    return {"make": make, "check": check, "same": same}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
