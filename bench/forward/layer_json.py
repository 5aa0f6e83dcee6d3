#!/usr/bin/env python3
"""One GLM-5-dimension layer (attention with indexer + MoE) from two glm5rt-bench runs.

    layer_json.py RUN4.json RUN2.json OUT.json

RUN4 and RUN2 are glm5rt-bench --glm5-dims runs with 4 and 2 layers (1 dense each, so 3 and 1 MoE
layers) over the same batches and contexts. Per (batch, context): one MoE layer = (step4 - step2) / 2,
beside the bytes floor of one layer, (floor_bytes4 - floor_bytes2) / 2 / bandwidth (embedding, lm_head
and the dense layer cancel). With --stages in both runs, the graph-replay stage times give a second
estimate: attention per layer + MoE per MoE layer of the 4-layer run.
"""
import json
import sys


def main():
    r4, r2 = (json.load(open(p)) for p in sys.argv[1:3])
    moe4 = r4["layers"] - r4["dense_layers"]
    moe2 = r2["layers"] - r2["dense_layers"]
    assert moe4 - moe2 == 2 and r4["dense_layers"] == r2["dense_layers"], "expects 4 vs 2 layers, same dense count"
    bw, fl = r4["bandwidth_ceiling"], r4["flops_ceiling"]
    by2 = {(d["batch"], d["context"]): d for d in r2["decode"]}
    rows = []
    for d4 in r4["decode"]:
        key = (d4["batch"], d4["context"])
        d2 = by2.get(key)
        if not d2:
            continue
        per = (d4["step_ms"] - d2["step_ms"]) / 2
        fb = (d4["floor_bytes"] - d2["floor_bytes"]) / 2
        ff = (d4["floor_flops"] - d2["floor_flops"]) / 2
        floor_ms = max(fb / bw, ff / fl) * 1e3
        row = {"batch": key[0], "context": key[1], "step_ms_4_layers": d4["step_ms"],
               "step_ms_2_layers": d2["step_ms"], "layer_ms": per, "floor_ms": floor_ms,
               "floor_bytes": fb, "floor_flops": ff, "floor_over_measured": floor_ms / per if per > 0 else None}
        st = d4.get("stages_ms")
        if st:
            att = st["attention"] / r4["layers"]
            moe = st["moe"] / moe4
            row["stages_layer_ms"] = {"attention": att, "moe": moe, "sum": att + moe}
            if "attention_projections" in st:
                row["stages_layer_ms"]["attention_projections"] = st["attention_projections"] / r4["layers"]
        rows.append(row)
    out = {"benchmark": "one GLM-5-dimension layer (attention + indexer + MoE), decode",
           "method": "(step time with 4 layers - step time with 2 layers) / 2; both runs 1 dense layer",
           "commands": [r4["command"], r2["command"]], "date": r4["date"], "card": r4["card"],
           "commit": r4["commit"], "kernels": r4["kernels"], "fp8_path": r4["fp8_path"],
           "bandwidth_ceiling": bw, "flops_ceiling": fl, "layers": rows}
    json.dump(out, open(sys.argv[3], "w"), indent=2)
    print(f"{'batch':>5} {'context':>7} {'layer ms':>9} {'floor ms':>9} {'floor/meas':>10}   stages: attention + moe")
    for r in rows:
        s = r.get("stages_layer_ms")
        extra = f"   {s['attention']:.3f} + {s['moe']:.3f} = {s['sum']:.3f}" if s else ""
        fm = r['floor_over_measured']
        print(f"{r['batch']:>5} {r['context']:>7} {r['layer_ms']:>9.3f} {r['floor_ms']:>9.3f} "
              f"{(fm if fm is not None else float('nan')):>10.3f}{extra}")


if __name__ == "__main__":
    main()
