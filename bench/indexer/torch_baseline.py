#!/usr/bin/env python3
"""What an engine without its own kernels does: the indexer in plain PyTorch, bf16 keys (contiguous, no
paging), bmm + relu + weighted sum + torch.topk(2048). Same cases as bench_indexer (decode batch 1 and 32,
prefill 4K x 4K causal). Median of CUDA-event timings after warm-up. Usage: torch_baseline.py OUT.json"""
import json
import sys

import torch


def indexer(q, k, w, k_top, mask=None):
    # q [B, 32, 128] bf16, k [B, L, 128] bf16, w [B, 32] f32 -> top-k indices [B, k_top]
    s = torch.relu(torch.bmm(q, k.transpose(1, 2)).float() * 128 ** -0.5)  # [B, 32, L]
    s = (s * w[:, :, None]).sum(1)  # [B, L]
    if mask is not None:
        s = s.masked_fill(mask, float("-inf"))
    return torch.topk(s, min(k_top, s.shape[-1]), dim=-1).indices


def prefill(q, k, w, k_top):
    # q [T, 32, 128], k [L, 128], causal: row t sees keys 0..t
    T, L = q.shape[0], k.shape[0]
    s = torch.relu(torch.einsum("thd,ld->thl", q, k).float() * 128 ** -0.5)
    s = (s * w[:, :, None]).sum(1)
    mask = torch.arange(L, device=q.device)[None, :] > torch.arange(T, device=q.device)[:, None]
    s = s.masked_fill(mask, float("-inf"))
    return torch.topk(s, min(k_top, L), dim=-1).indices


def time_us(fn, reps=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    times.sort()
    return times[len(times) // 2]


def main():
    out = sys.argv[1]
    dev = torch.device("cuda")
    cases = []
    for batch in (1, 32):
        for ctx in (1024, 8192, 32768, 131072, 202752):
            q = torch.randn(batch, 32, 128, device=dev).bfloat16()
            k = torch.randn(batch, ctx, 128, device=dev).bfloat16()
            w = torch.randn(batch, 32, device=dev) * 32 ** -0.5
            us = time_us(lambda: indexer(q, k, w, 2048))
            cases.append({"name": f"decode_bf16_b{batch}_ctx{ctx}", "batch": batch, "context": ctx, "torch_us": us})
            print(f"torch {cases[-1]['name']:28s} {us:10.1f} us", flush=True)
            del q, k, w
    q = torch.randn(4096, 32, 128, device=dev).bfloat16()
    k = torch.randn(4096, 128, device=dev).bfloat16()
    w = torch.randn(4096, 32, device=dev) * 32 ** -0.5
    us = time_us(lambda: prefill(q, k, w, 2048), reps=5)
    cases.append({"name": "prefill_bf16_4096x4096", "batch": 0, "context": 4096, "torch_us": us})
    print(f"torch {cases[-1]['name']:28s} {us:10.1f} us", flush=True)
    with open(out, "w") as f:
        json.dump({"baseline": "torch bmm+relu+sum+topk, bf16 keys", "torch": torch.__version__,
                   "device": torch.cuda.get_device_name(0), "cases": cases}, f, indent=1)


if __name__ == "__main__":
    main()
