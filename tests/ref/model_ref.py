#!/usr/bin/python3
"""PyTorch reference for flywheel's model (Llama / Qwen2 / Qwen3).

usage: model_ref.py CKPT_DIR DUMP.safetensors [--tol-logits R] [--tol-grad R]
       model_ref.py CKPT_DIR --scores RECORDS.jsonl

Builds the model described by CKPT_DIR/config.json in plain PyTorch (the
modules are written here, after the Hugging Face definitions), loads
CKPT_DIR/model.safetensors with a reader written here from the format's
description, runs the batch recorded in DUMP (written by the dump harness, tests/unit/test_ckpt_harness.c) and
compares, in float32:

  - logits (B, T, V), relative to the largest logit (max |a - b| / max |b|);
  - per-token log-probs and the weighted loss;
  - the gradient of every parameter, relative to that tensor's largest
    gradient;
  - the key-value-cache log-probs of the dump against the full forward.

With --scores, each JSON line's "logprobs" (written by `ckpt score`) is
compared with the log-probs of its "tokens" under the PyTorch model.

A quantity passes when it is within the tolerance of PyTorch in float32, or
when it is no further from a float64 PyTorch run than twice PyTorch float32's
own error (two float32 implementations differ in summation order; the float64
run says which is closer to the exact value).  Prints one line per quantity
and exits 1 when any fails, 2 on bad usage.
"""
import argparse
import json
import math
import struct
import sys

import numpy as np
import torch

DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}


def read_safetensors(path):
    """name -> float32 torch tensor, for F32 / F16 / BF16 entries."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        raw = np.frombuffer(data[base + b:base + end], dtype=DTYPES[e["dtype"]])
        if e["dtype"] == "BF16":
            raw = (raw.astype(np.uint32) << 16).view(np.float32)
        out[name] = torch.from_numpy(raw.astype(np.float32).reshape(e["shape"]))
    return out


class Config:
    def __init__(self, path):
        with open(path) as f:
            c = json.load(f)
        self.arch = c["architectures"][0]
        self.V = c["vocab_size"]
        self.C = c["hidden_size"]
        self.I = c["intermediate_size"]
        self.L = c["num_hidden_layers"]
        self.nh = c["num_attention_heads"]
        self.nkv = c.get("num_key_value_heads", self.nh)
        self.hd = c.get("head_dim") or self.C // self.nh
        self.theta = c.get("rope_theta", 10000.0)
        self.rope_scaling = c.get("rope_scaling")
        self.eps = c.get("rms_norm_eps", 1e-6)
        self.tied = c.get("tie_word_embeddings", False)
        self.qk_norm = self.arch == "Qwen3ForCausalLM"
        self.qkv_bias = self.arch == "Qwen2ForCausalLM" or c.get("attention_bias", False)
        self.o_bias = self.arch != "Qwen2ForCausalLM" and c.get("attention_bias", False)


def rms_norm(x, w, eps):
    var = x.pow(2).mean(-1, keepdim=True)
    return x * torch.rsqrt(var + eps) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def rope_tables(T, hd, theta, scaling=None):
    inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
    kind = (scaling or {}).get("rope_type", (scaling or {}).get("type"))
    if kind == "linear":
        inv = inv / scaling["factor"]
    elif kind == "llama3":
        # as transformers' _compute_llama3_parameters
        factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
        old = scaling["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > old / low, inv / factor, inv)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < old / high) * ~(wavelen > old / low)
        inv = torch.where(medium, smoothed, scaled)
    freqs = torch.arange(T, dtype=torch.float32)[:, None] * inv[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def linear(x, w, b=None):
    y = x @ w.t()
    return y + b if b is not None else y


def forward(cfg, P, tokens):
    """tokens (B, T) int64 -> logits (B, T, V)."""
    B, T = tokens.shape
    x = P["model.embed_tokens.weight"][tokens]
    cos, sin = rope_tables(T, cfg.hd, cfg.theta, cfg.rope_scaling)
    rep = cfg.nh // cfg.nkv
    mask = torch.full((T, T), float("-inf")).triu(1)
    for l in range(cfg.L):
        p = lambda s: P.get(f"model.layers.{l}.{s}")
        h = rms_norm(x, p("input_layernorm.weight"), cfg.eps)
        q = linear(h, p("self_attn.q_proj.weight"), p("self_attn.q_proj.bias"))
        k = linear(h, p("self_attn.k_proj.weight"), p("self_attn.k_proj.bias"))
        v = linear(h, p("self_attn.v_proj.weight"), p("self_attn.v_proj.bias"))
        q = q.view(B, T, cfg.nh, cfg.hd)
        k = k.view(B, T, cfg.nkv, cfg.hd)
        v = v.view(B, T, cfg.nkv, cfg.hd)
        if cfg.qk_norm:
            q = rms_norm(q, p("self_attn.q_norm.weight"), cfg.eps)
            k = rms_norm(k, p("self_attn.k_norm.weight"), cfg.eps)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B, heads, T, hd)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-1, -2)) / (cfg.hd ** 0.5) + mask
        y = att.softmax(-1) @ v
        y = y.transpose(1, 2).reshape(B, T, cfg.nh * cfg.hd)
        x = x + linear(y, p("self_attn.o_proj.weight"), p("self_attn.o_proj.bias"))
        h = rms_norm(x, p("post_attention_layernorm.weight"), cfg.eps)
        g = linear(h, p("mlp.gate_proj.weight"))
        u = linear(h, p("mlp.up_proj.weight"))
        x = x + linear(torch.nn.functional.silu(g) * u, p("mlp.down_proj.weight"))
    x = rms_norm(x, P["model.norm.weight"], cfg.eps)
    lm = P["model.embed_tokens.weight"] if cfg.tied else P["lm_head.weight"]
    return x @ lm.t()


def rel(a, b):
    d = (a - b).abs().max().item()
    s = b.abs().max().item()
    return d / s if s > 0 else d


def check_scores(cfg, P, path, tol):
    worst, n = 0.0, 0
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            toks = torch.tensor(r["tokens"], dtype=torch.int64)[None]
            with torch.no_grad():
                lp = forward(cfg, P, toks).log_softmax(-1)[0]
            want = lp[:-1].gather(-1, toks[0, 1:, None])[:, 0]
            got = torch.tensor(r["logprobs"], dtype=torch.float32)
            if got.shape != want.shape:
                print(f"FAIL record {n + 1}: {got.shape[0]} logprobs for {toks.shape[1]} tokens")
                return 1
            worst = max(worst, (got - want).abs().max().item())
            n += 1
    ok = worst <= tol and n > 0
    print(f"{'ok  ' if ok else 'FAIL'} {n} scored records, max abs error {worst:.3g} (tolerance {tol:g})")
    return 0 if ok else 1


def main(argv):
    ap = argparse.ArgumentParser(prog="model_ref.py")
    ap.add_argument("ckpt")
    ap.add_argument("dump", nargs="?")
    ap.add_argument("--scores")
    ap.add_argument("--tol-logits", type=float, default=1e-5)
    ap.add_argument("--tol-grad", type=float, default=1e-4)
    a = ap.parse_args(argv)
    ckpt, dump, tol_logits, tol_grad = a.ckpt, a.dump, a.tol_logits, a.tol_grad
    if (dump is None) == (a.scores is None):
        ap.print_usage(sys.stderr)
        return 2
    torch.set_num_threads(1)
    cfg = Config(f"{ckpt}/config.json")
    P = read_safetensors(f"{ckpt}/model.safetensors")
    if cfg.tied:
        P.pop("lm_head.weight", None)
    if a.scores:
        return check_scores(cfg, P, a.scores, 10 * tol_logits)
    for t in P.values():
        t.requires_grad_(True)
    D = read_safetensors(dump)
    tokens = D["tokens"].long()
    targets = D["targets"].long()
    weights = D["weights"]

    def run(P, dtype):
        logits = forward(cfg, P, tokens)
        logp_all = logits.log_softmax(-1)
        valid = targets >= 0
        logp = torch.where(valid, logp_all.gather(-1, targets.clamp(min=0)[..., None])[..., 0],
                           torch.zeros((), dtype=dtype))
        w = weights.to(dtype)
        norm = w[valid].sum()
        if norm == 0:
            norm = torch.ones((), dtype=dtype)
        loss = -(w * logp).sum() / norm
        loss.backward()
        return logits.detach(), logp.detach(), loss.detach().reshape(1)

    # float32 as flywheel computes, and float64 as the truth both are judged by
    P64 = {k: v.detach().double().requires_grad_(True) for k, v in P.items()}
    l32, p32, s32 = run(P, torch.float32)
    l64, p64, s64 = run(P64, torch.float64)

    fails = []

    def report(what, ours, theirs, truth, tol):
        """ours passes when within tol of PyTorch f32, or no further from the
        float64 truth than twice PyTorch f32's own error."""
        e = rel(ours.double(), theirs.double())
        e_ours, e_theirs = rel(ours.double(), truth), rel(theirs.double(), truth)
        ok = e <= tol or e_ours <= max(tol, 2 * e_theirs)
        print(f"{'ok  ' if ok else 'FAIL'} {what}: {e:.3g} vs pytorch f32 (tolerance {tol:g}); "
              f"vs f64: flywheel {e_ours:.3g}, pytorch f32 {e_theirs:.3g}")
        if not ok:
            fails.append(what)
        return e

    report("logits max relative error", D["logits"], l32, l64, tol_logits)
    report("logp max relative error", D["logp"], p32, p64, tol_logits)
    report("loss relative error", D["loss"], s32, s64, tol_logits)
    worst, wname = 0.0, ""
    for name, t in P.items():
        g = D.get("grad." + name)
        if g is None:
            print(f"FAIL gradient of {name} missing from the dump")
            fails.append(name)
            continue
        e = rel(g, t.grad)
        ok = e <= tol_grad or rel(g.double(), P64[name].grad) <= max(
            tol_grad, 2 * rel(t.grad.double(), P64[name].grad))
        if e > worst:
            worst, wname = e, name
        if not ok:
            print(f"FAIL gradient of {name}: {e:.3g}")
            fails.append(name)
    # one AdamW step as the dump harness takes it: clip to 0.5, lr 1e-2, betas
    # (0.9, 0.95), eps 1e-8, weight decay 0.1 on matrices only
    if "grad_norm" in D:
        params = list(P.values())
        with torch.no_grad():
            for t in params:
                t.grad = D["grad." + next(n for n, v in P.items() if v is t)].clone()
        gn = torch.nn.utils.clip_grad_norm_(params, 0.5)
        report("global gradient norm", D["grad_norm"], gn.reshape(1).float(),
               gn.reshape(1).double(), tol_logits)
        opt = torch.optim.AdamW([{"params": [t for t in params if t.dim() == 2], "weight_decay": 0.1},
                                 {"params": [t for t in params if t.dim() != 2], "weight_decay": 0.0}],
                                lr=1e-2, betas=(0.9, 0.95), eps=1e-8)
        opt.step()
        werst, wn = 0.0, ""
        for name, t in P.items():
            e = rel(D["step." + name], t.detach())
            if e > werst:
                werst, wn = e, name
        ok = werst <= 1e-5
        print(f"{'ok  ' if ok else 'FAIL'} weights after one AdamW step, worst relative error "
              f"({wn}): {werst:.3g} (tolerance 1e-05)")
        if not ok:
            fails.append("adamw")
    extra = [n[5:] for n in D if n.startswith("grad.") and n[5:] not in P]
    if extra:
        print(f"FAIL gradients of unknown tensors: {extra}")
        fails.append("extra")
    print(f"{'ok  ' if not fails else 'FAIL'} gradients worst relative error "
          f"({wname}): {worst:.3g} (tolerance {tol_grad:g})")
    T = tokens.shape[1]
    kv = D["kv_logp"]
    P0 = T - kv.shape[1]
    report("kv-cache logp vs full forward", kv, D["logp"][:, P0 - 1:T - 1],
           p64[:, P0 - 1:T - 1], tol_logits)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
