#!/usr/bin/python3
"""The training step of train-step in PyTorch on CPU, for train-vs-torch.

usage: train_torch.py CKPT_DIR --batch B --seq T --steps N [--threads K]

The model of tests/ref/model_ref.py with the weights of CKPT_DIR as float32
parameters; each step: forward over B random sequences of T tokens, the mean
cross-entropy over every position, backward, clip_grad_norm_(1.0), one
torch.optim.AdamW step (lr 1e-5, betas 0.9/0.95, weight decay 0.1 on
matrices).  Prints "train-step: X tokens/s" over the steps after the first,
optimizer included.
"""
import argparse
import os
import sys
import time

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "ref"))
from model_ref import Config, forward, read_safetensors  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    cfg = Config(f"{a.ckpt}/config.json")
    P = read_safetensors(f"{a.ckpt}/model.safetensors")
    if cfg.tied:
        P.pop("lm_head.weight", None)
    params = [torch.nn.Parameter(v) for v in P.values()]
    P = dict(zip(P.keys(), params))
    opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() == 2], "weight_decay": 0.1},
                             {"params": [p for p in params if p.dim() != 2], "weight_decay": 0.0}],
                            lr=1e-5, betas=(0.9, 0.95), eps=1e-8)
    g = torch.Generator().manual_seed(1)
    tok = torch.randint(0, cfg.V, (a.batch, a.seq + 1), generator=g)
    x, y = tok[:, :-1], tok[:, 1:]
    t0 = None
    for step in range(a.steps):
        if step == 1:
            t0 = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        logits = forward(cfg, P, x)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, cfg.V), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
    dt = time.perf_counter() - t0
    print(f"train-step: {a.batch * a.seq * (a.steps - 1) / dt:.1f} tokens/s")


if __name__ == "__main__":
    main()
