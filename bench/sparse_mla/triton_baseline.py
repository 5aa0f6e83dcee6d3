#!/usr/bin/env python3
"""Baseline: the seeds' Triton design for sparse MLA, written here from its description, plus the ceilings.

The design the seeds used on GPUs without a sparse MLA backend: an MLA *decode* kernel (flash-decoding,
stage 1 = per (token, block of 16 heads, KV split) online softmax over a block table, stage 2 = combine
the splits with their LSEs) fed the top-k slots as a page-size-1 "virtual block table". Heads are grouped
16 per program (tl.dot needs M >= 16, so H = 8 pads to 16), each program reloads the selected rows, and
the block table is read like paged attention. Best of several KV split counts per shape.

Also measured in the same run (the roofline's two ceilings): device copy bandwidth (bytes read +
written, torch copy_) and the cuBLAS bf16 GEMM rate (8192^3, random inputs, torch.matmul).

Timing: a CUDA graph of K calls rotating over index sets (as the C++ benchmark does, so small T does not
read L2-resident rows), replayed; the per-call time is replay time / K. Writes JSON (--json).
"""
import argparse
import json
import math
import sys
import time

import torch
import triton
import triton.language as tl


@triton.jit
def _mla_decode_stage1(Q, KV, BT, MidO, MidL, scale_log2, topk, split_len, num_tokens, H,
                       stride_qt, stride_qh, stride_bt, stride_kv,
                       BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr, DV: tl.constexpr, DR: tl.constexpr):
    t = tl.program_id(0)
    hb = tl.program_id(1)
    s = tl.program_id(2)
    offs_h = hb * BLOCK_H + tl.arange(0, BLOCK_H)
    mask_h = offs_h < H
    offs_d = tl.arange(0, DV)
    offs_r = DV + tl.arange(0, DR)
    q_ptr = Q + t * stride_qt + offs_h[:, None] * stride_qh
    q = tl.load(q_ptr + offs_d[None, :], mask=mask_h[:, None], other=0.0)
    q_pe = tl.load(q_ptr + offs_r[None, :], mask=mask_h[:, None], other=0.0)
    start = s * split_len
    end = tl.minimum(start + split_len, topk)
    m = tl.full([BLOCK_H], float("-inf"), dtype=tl.float32)
    l = tl.zeros([BLOCK_H], dtype=tl.float32)
    acc = tl.zeros([BLOCK_H, DV], dtype=tl.float32)
    for n0 in range(start, end, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        # page size 1: the block-table entry is the physical slot itself
        slot = tl.load(BT + t * stride_bt + offs_n, mask=offs_n < end, other=-1)
        valid = slot >= 0
        kv_ptr = KV + slot.to(tl.int64)[:, None] * stride_kv
        k = tl.load(kv_ptr + offs_d[None, :], mask=valid[:, None], other=0.0)
        k_pe = tl.load(kv_ptr + offs_r[None, :], mask=valid[:, None], other=0.0)
        qk = tl.dot(q, tl.trans(k)) + tl.dot(q_pe, tl.trans(k_pe))
        qk = tl.where(valid[None, :], qk * scale_log2, float("-inf"))
        m_new = tl.maximum(m, tl.max(qk, 1))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp2(qk - m_use[:, None])
        alpha = tl.exp2(m - m_use)
        acc = acc * alpha[:, None] + tl.dot(p.to(k.dtype), k)
        l = l * alpha + tl.sum(p, 1)
        m = m_new
    l_safe = tl.where(l > 0, l, 1.0)
    out = acc / l_safe[:, None]
    lse = tl.where(l > 0, m + tl.log2(l_safe), float("-inf"))
    row = (s * num_tokens + t) * H + offs_h
    tl.store(MidO + row[:, None] * DV + offs_d[None, :], out, mask=mask_h[:, None])
    tl.store(MidL + row, lse, mask=mask_h)


@triton.jit
def _mla_decode_stage2(MidO, MidL, O, LSE, num_splits, TH, DV: tl.constexpr, MAX_SPLITS: tl.constexpr):
    row = tl.program_id(0)
    offs_s = tl.arange(0, MAX_SPLITS)
    ls = tl.load(MidL + offs_s * TH + row, mask=offs_s < num_splits, other=float("-inf"))
    m = tl.max(ls, 0)
    m_use = tl.where(m == float("-inf"), 0.0, m)
    w = tl.where(ls == float("-inf"), 0.0, tl.exp2(ls - m_use))
    wsum = tl.sum(w, 0)
    offs_d = tl.arange(0, DV)
    acc = tl.zeros([DV], dtype=tl.float32)
    for s in range(0, num_splits):
        l_s = tl.load(MidL + s * TH + row)
        w_s = tl.where(l_s == float("-inf"), 0.0, tl.exp2(l_s - m_use))
        acc += w_s * tl.load(MidO + (s * TH + row) * DV + offs_d)
    out = acc / tl.where(wsum > 0, wsum, 1.0)
    tl.store(O + row * DV + offs_d, out.to(tl.bfloat16))
    tl.store(LSE + row, tl.where(wsum > 0, (m + tl.log2(tl.where(wsum > 0, wsum, 1.0))) * 0.6931471805599453,
                                 float("-inf")))


class TritonSparseMla:
    BLOCK_H = 16
    BLOCK_N = 32

    def __init__(self, T, H, topk, splits, device):
        self.T, self.H, self.topk, self.splits = T, H, topk, splits
        self.mid_o = torch.empty(splits * T * H * 512, dtype=torch.float32, device=device)
        self.mid_l = torch.empty(splits * T * H, dtype=torch.float32, device=device)
        self.out = torch.empty(T, H, 512, dtype=torch.bfloat16, device=device)
        self.lse = torch.empty(T, H, dtype=torch.float32, device=device)
        self.max_splits = triton.next_power_of_2(max(splits, 2))

    def __call__(self, q, kv, table, scale):
        T, H, topk, S = self.T, self.H, self.topk, self.splits
        split_len = triton.cdiv(triton.cdiv(topk, S), self.BLOCK_N) * self.BLOCK_N
        grid = (T, triton.cdiv(H, self.BLOCK_H), S)
        _mla_decode_stage1[grid](q, kv, table, self.mid_o, self.mid_l, scale * 1.4426950408889634, topk, split_len,
                                 T, H, q.stride(0), q.stride(1), table.stride(0), kv.stride(0),
                                 BLOCK_H=self.BLOCK_H, BLOCK_N=self.BLOCK_N, DV=512, DR=64, num_warps=4, num_stages=2)
        _mla_decode_stage2[(T * H,)](self.mid_o, self.mid_l, self.out, self.lse, S, T * H, DV=512,
                                     MAX_SPLITS=self.max_splits, num_warps=4)
        return self.out, self.lse


def reference(q, kv, table, scale):
    """float32 gather + softmax (small shapes only)."""
    T, H, _ = q.shape
    outs, lses = [], []
    for t in range(T):
        idx = table[t][table[t] >= 0].long()
        k = kv[idx].float()  # [n, 576]
        s = (q[t].float() @ k.T) * scale  # [H, n]
        lse = torch.logsumexp(s, dim=1)
        p = torch.softmax(s, dim=1)
        outs.append(p @ k[:, :512])
        lses.append(lse)
    return torch.stack(outs), torch.stack(lses)


def graph_time_us(fn_list, reps=5):
    """Capture the calls in fn_list into one CUDA graph, replay, return per-call microseconds."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for fn in fn_list[:2]:
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for fn in fn_list:
            fn()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / len(fn_list))
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default="triton_baseline.json")
    ap.add_argument("--pool", type=int, default=65536)
    ap.add_argument("--topk", type=int, default=2048)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    print(f"device: {props.name}, torch {torch.__version__}, triton {triton.__version__}", flush=True)
    res = {"device": props.name, "torch": torch.__version__, "triton": triton.__version__}

    # Ceilings.
    x = torch.empty(1 << 30, dtype=torch.uint8, device=dev).random_(0, 255)
    y = torch.empty_like(x)
    ms = triton.testing.do_bench(lambda: y.copy_(x), warmup=10, rep=100, return_mode="median")
    res["copy_tbps"] = 2 * x.numel() / (ms * 1e-3) / 1e12
    del x, y
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device=dev)
    b = torch.randn(8192, 8192, dtype=torch.bfloat16, device=dev)
    ms = triton.testing.do_bench(lambda: a @ b, warmup=50, rep=300, return_mode="median")
    res["gemm_bf16_tflops"] = 2 * 8192 ** 3 / (ms * 1e-3) / 1e12
    del a, b
    print(f"ceilings: device copy {res['copy_tbps']:.2f} TB/s, cuBLAS bf16 GEMM {res['gemm_bf16_tflops']:.0f} TFLOP/s",
          flush=True)

    topk, pool, max_seqs = args.topk, args.pool, 128
    kv = torch.empty(max_seqs * pool, 576, dtype=torch.bfloat16, device=dev).uniform_(-1, 1)
    scale = 1.0 / 16

    # Correctness of the baseline itself on a small case (with -1 padding).
    qs = torch.empty(2, 16, 576, dtype=torch.bfloat16, device=dev).uniform_(-1, 1)
    tab = torch.randperm(pool, device=dev)[: 2 * 300].view(2, 300).int().contiguous()
    tab[1, 250:] = -1
    k = TritonSparseMla(2, 16, 300, 3, dev)
    o, l = k(qs, kv, tab, scale)
    ro, rl = reference(qs, kv, tab, scale)
    err = ((o.float() - ro).norm() / ro.norm()).item()
    lerr = (l - rl).abs().max().item()
    res["self_check"] = {"rel_l2_out": err, "max_abs_lse": lerr, "ok": bool(err < 1e-2 and lerr < 1e-2)}
    print(f"triton baseline self-check: rel L2 {err:.2e}, lse err {lerr:.2e}", flush=True)

    cases = [("decode", T, H) for T in (1, 8, 32, 128) for H in (64, 16, 8)]
    if not args.quick:
        cases += [("prefill", T, H) for T in (1024, 4096) for H in (64, 16, 8)]
    res["results"] = []
    for phase, T, H in cases:
        decode = phase == "decode"
        gathered = T * topk * 1152
        sets = max(1, min(64, int(200e6 / gathered) + 1)) if decode else 1
        tables, qs = [], []
        for s in range(sets):
            rows = []
            for t0 in range(0, T, 256):
                n = min(256, T - t0)
                r = torch.rand(n, pool, device=dev).topk(topk, dim=1).indices
                seq = torch.tensor([((s * T + t) % max_seqs) if decode else 0 for t in range(t0, t0 + n)],
                                   device=dev)
                rows.append((r + seq[:, None] * pool).int())
            tables.append(torch.cat(rows).contiguous())
            qs.append(torch.empty(T, H, 576, dtype=torch.bfloat16, device=dev).uniform_(-1, 1))
        if decode:
            cands = [1, 2, 4, 8, 16, 32] if T <= 8 else ([1, 2, 4, 8] if T <= 32 else [1, 2, 4])
        else:
            cands = [1]
        best = None
        per_split = {}
        for S in cands:
            kern = TritonSparseMla(T, H, topk, S, dev)
            K = max(sets, (32 // sets) * sets) if decode else 2
            fns = [(lambda i=i: kern(qs[i % sets], kv, tables[i % sets], scale)) for i in range(K)]
            us = graph_time_us(fns)
            per_split[S] = us
            if best is None or us < best[1]:
                best = (S, us)
            del kern
        flops = 2.0 * T * H * topk * (576 + 512)
        r = {"phase": phase, "T": T, "H": H, "splits": best[0], "graph_us": best[1],
             "tflops": flops / (best[1] * 1e-6) / 1e12, "per_split_us": per_split, "index_sets": sets}
        res["results"].append(r)
        print(f"triton {phase:7s} T={T:5d} H={H:3d} best splits={best[0]:2d} {best[1]:9.2f} us "
              f"{r['tflops']:6.1f} TFLOP/s", flush=True)
        del tables, qs
        torch.cuda.empty_cache()
        with open(args.json, "w") as f:  # after every case: a run cut short keeps what it measured
            json.dump(res, f, indent=1)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
