#!/usr/bin/python3
"""PyTorch side of tests/bench/rollout.

usage: rollout_torch.py CKPT_DIR PROMPT_TOKENS K N [THREADS]

Samples K continuations of N tokens after a prompt of PROMPT_TOKENS random
tokens with the reference model (tests/ref/model_ref.py) and a key-value
cache, the prompt repeated for each sequence as Hugging Face generate()
does with num_return_sequences.  Prints "TOKENS SECONDS" (prefill
included).
"""
import os
import sys
import time

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "ref"))
import model_ref as R  # noqa: E402
import model_torch as M  # noqa: E402


def main():
    ckpt, p, k, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(int(sys.argv[5]) if len(sys.argv) > 5 else os.cpu_count())
    cfg = R.Config(f"{ckpt}/config.json")
    P = R.read_safetensors(f"{ckpt}/model.safetensors")
    g = torch.Generator().manual_seed(1)
    prompt = torch.randint(0, 256, (1, p), generator=g).repeat(k, 1)
    t0 = time.perf_counter()
    M.decode(cfg, P, prompt, n)
    print(k * n, time.perf_counter() - t0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
