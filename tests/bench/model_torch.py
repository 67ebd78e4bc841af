#!/usr/bin/python3
"""PyTorch side of tests/bench/model-vs-torch.

usage: model_torch.py CKPT_DIR train|decode [--batch B] [--seq T] [--steps N] [-n N] [--threads J]

train: forward+backward tokens/s of the reference model (tests/ref/model_ref.py)
over random tokens; decode: greedy decoding with a key-value cache after a
16-token prompt, one sequence.  Prints one line like the bench harness (tests/unit/test_ckpt_harness.c).
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ref"))
import model_ref as R  # noqa: E402


def decode(cfg, P, prompt, n):
    """Greedy decoding with a per-layer key-value cache; returns tokens/s
    of the steps after the prefill, and the prefill time."""
    maxT = prompt.shape[1] + n
    cos_all, sin_all = R.rope_tables(maxT, cfg.hd, cfg.theta, cfg.rope_scaling)
    rep = cfg.nh // cfg.nkv
    cache = [None] * cfg.L
    lm = P["model.embed_tokens.weight"] if cfg.tied else P["lm_head.weight"]

    def run(tokens, pos0):
        B, T = tokens.shape
        x = P["model.embed_tokens.weight"][tokens]
        cos, sin = cos_all[pos0:pos0 + T], sin_all[pos0:pos0 + T]
        for l in range(cfg.L):
            p = lambda s: P.get(f"model.layers.{l}.{s}")
            h = R.rms_norm(x, p("input_layernorm.weight"), cfg.eps)
            q = R.linear(h, p("self_attn.q_proj.weight"), p("self_attn.q_proj.bias"))
            k = R.linear(h, p("self_attn.k_proj.weight"), p("self_attn.k_proj.bias"))
            v = R.linear(h, p("self_attn.v_proj.weight"), p("self_attn.v_proj.bias"))
            q = q.view(B, T, cfg.nh, cfg.hd)
            k = k.view(B, T, cfg.nkv, cfg.hd)
            v = v.view(B, T, cfg.nkv, cfg.hd)
            if cfg.qk_norm:
                q = R.rms_norm(q, p("self_attn.q_norm.weight"), cfg.eps)
                k = R.rms_norm(k, p("self_attn.k_norm.weight"), cfg.eps)
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))
            q = q * cos + R.rotate_half(q) * sin
            k = k * cos + R.rotate_half(k) * sin
            if cache[l] is not None:
                k = torch.cat((cache[l][0], k), dim=2)
                v = torch.cat((cache[l][1], v), dim=2)
            cache[l] = (k, v)
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
            L = k.shape[2]
            att = (q @ k.transpose(-1, -2)) / (cfg.hd ** 0.5)
            if T > 1:
                att = att + torch.full((T, L), float("-inf")).triu(L - T + 1)
            y = (att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, cfg.nh * cfg.hd)
            x = x + R.linear(y, p("self_attn.o_proj.weight"), p("self_attn.o_proj.bias"))
            h = R.rms_norm(x, p("post_attention_layernorm.weight"), cfg.eps)
            g = R.linear(h, p("mlp.gate_proj.weight"))
            u = R.linear(h, p("mlp.up_proj.weight"))
            x = x + R.linear(torch.nn.functional.silu(g) * u, p("mlp.down_proj.weight"))
        x = R.rms_norm(x[:, -1:], P["model.norm.weight"], cfg.eps)
        return x @ lm.t()

    with torch.no_grad():
        t0 = time.perf_counter()
        logits = run(prompt, 0)
        t1 = time.perf_counter()
        pos = prompt.shape[1]
        for i in range(n - 1):
            nxt = logits[:, -1].argmax(-1, keepdim=True)
            logits = run(nxt, pos)
            pos += 1
        t2 = time.perf_counter()
    return (n - 1) / (t2 - t1), (t1 - t0) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt")
    ap.add_argument("what", choices=["train", "decode"])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("-n", type=int, default=100)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    cfg = R.Config(f"{a.ckpt}/config.json")
    P = R.read_safetensors(f"{a.ckpt}/model.safetensors")
    if cfg.tied:
        P.pop("lm_head.weight", None)
    g = torch.Generator().manual_seed(1)
    tok = torch.randint(0, cfg.V, (a.batch, a.seq + 1), generator=g)
    if a.what == "train":
        for t in P.values():
            t.requires_grad_(True)
        for step in range(-1, a.steps):
            if step == 0:
                t0 = time.perf_counter()
            for t in P.values():
                t.grad = None
            logits = R.forward(cfg, P, tok[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, cfg.V), tok[:, 1:].reshape(-1))
            loss.backward()
        t1 = time.perf_counter()
        print(f"train: {a.batch * a.seq * a.steps / (t1 - t0):.1f} tokens/s "
              f"(batch {a.batch} x {a.seq}, {a.steps} steps, {a.threads} threads)")
    else:
        tps, pre = decode(cfg, P, tok[:, :16][:1], a.n)
        print(f"decode: {tps:.1f} tokens/s ({a.n} tokens after a 16-token prompt, prefill {pre:.1f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
