#!/usr/bin/env python3
"""A synthetic checkpoint with GLM-5-FP8's tensor table (78 decoder layers: 3 dense + 75 MoE with 256
experts, the MTP layer model.layers.78.*, FP8 weights each with a weight_scale_inv) spread over as many
shards as the hub checkpoint, but with tiny dimensions, so that loading it measures exactly the per-tensor
and per-shard work (header parsing, validation, scale checks) of a 750 GB load.

Usage: python3 bench/load/make_synthetic.py OUT_DIR [--shards 141] [--layers 78] [--experts 256]
Standard library only. The weights are zeros (scales 1.0): this is for timing, not for running.
"""
import argparse
import json
import math
import os
import struct


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--shards", type=int, default=141)
    ap.add_argument("--layers", type=int, default=78)
    ap.add_argument("--experts", type=int, default=256)
    a = ap.parse_args()
    L, E = a.layers, a.experts
    D, V, H = 16, 64, 2               # hidden, vocab, heads
    qr, kvr, nope, rope, vd = 16, 16, 8, 8, 8
    ih, idim = 2, 8                   # indexer heads, head dim
    inter, moe = 16, 8
    block = [128, 128]
    cfg = {
        "architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa", "vocab_size": V,
        "hidden_size": D, "num_hidden_layers": L, "first_k_dense_replace": 3, "intermediate_size": inter,
        "moe_intermediate_size": moe, "n_routed_experts": E, "num_experts_per_tok": 8, "n_shared_experts": 1,
        "n_group": 1, "topk_group": 1, "routed_scaling_factor": 2.5, "num_attention_heads": H,
        "q_lora_rank": qr, "kv_lora_rank": kvr, "qk_nope_head_dim": nope, "qk_rope_head_dim": rope,
        "v_head_dim": vd, "index_n_heads": ih, "index_head_dim": idim, "index_topk": 2048,
        "max_position_embeddings": 202752, "rope_parameters": {"rope_type": "default", "rope_theta": 1e6},
        "eos_token_id": [1, 2], "num_nextn_predict_layers": 1, "torch_dtype": "bfloat16",
        "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                "weight_block_size": block},
    }
    t = {}  # name -> (dtype, shape)

    def lin(name, out_f, in_f):
        t[name] = ("F8_E4M3", [out_f, in_f])
        t[name + "_scale_inv"] = ("F32", [math.ceil(out_f / block[0]), math.ceil(in_f / block[1])])

    def vec(name, n):
        t[name] = ("BF16", [n])

    t["model.embed_tokens.weight"] = ("BF16", [V, D])
    t["lm_head.weight"] = ("BF16", [V, D])
    vec("model.norm.weight", D)
    for i in range(L + 1):  # + the MTP layer
        p = f"model.layers.{i}."
        vec(p + "input_layernorm.weight", D)
        vec(p + "post_attention_layernorm.weight", D)
        s = p + "self_attn."
        lin(s + "q_a_proj.weight", qr, D)
        vec(s + "q_a_layernorm.weight", qr)
        lin(s + "q_b_proj.weight", H * (nope + rope), qr)
        lin(s + "kv_a_proj_with_mqa.weight", kvr + rope, D)
        vec(s + "kv_a_layernorm.weight", kvr)
        lin(s + "kv_b_proj.weight", H * (nope + vd), kvr)
        lin(s + "o_proj.weight", D, H * vd)
        lin(s + "indexer.wq_b.weight", ih * idim, qr)
        lin(s + "indexer.wk.weight", idim, D)
        vec(s + "indexer.k_norm.weight", idim)
        vec(s + "indexer.k_norm.bias", idim)
        t[s + "indexer.weights_proj.weight"] = ("BF16", [ih, D])
        m = p + "mlp."
        if i < 3:
            lin(m + "gate_proj.weight", inter, D)
            lin(m + "up_proj.weight", inter, D)
            lin(m + "down_proj.weight", D, inter)
            continue
        t[m + "gate.weight"] = ("BF16", [E, D])
        t[m + "gate.e_score_correction_bias"] = ("F32", [E])
        for e in range(E):
            lin(m + f"experts.{e}.gate_proj.weight", moe, D)
            lin(m + f"experts.{e}.up_proj.weight", moe, D)
            lin(m + f"experts.{e}.down_proj.weight", D, moe)
        lin(m + "shared_experts.gate_proj.weight", moe, D)
        lin(m + "shared_experts.up_proj.weight", moe, D)
        lin(m + "shared_experts.down_proj.weight", D, moe)
        if i == L:
            t[p + "eh_proj.weight"] = ("BF16", [D, 2 * D])
            vec(p + "enorm.weight", D)
            vec(p + "hnorm.weight", D)

    size = {"F8_E4M3": 1, "BF16": 2, "F32": 4}
    names = list(t)
    os.makedirs(a.out, exist_ok=True)
    per = math.ceil(len(names) / a.shards)
    wmap = {}
    for k in range(a.shards):
        chunk = names[k * per:(k + 1) * per]
        if not chunk:
            break
        fn = f"model-{k + 1:05d}-of-{a.shards:05d}.safetensors"
        header, data = {"__metadata__": {"format": "pt"}}, bytearray()
        for n in chunk:
            dt, shape = t[n]
            nbytes = size[dt] * math.prod(shape)
            raw = struct.pack(f"<{nbytes // 4}f", *([1.0] * (nbytes // 4))) if dt == "F32" else bytes(nbytes)
            header[n] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + nbytes]}
            data += raw
            wmap[n] = fn
        h = json.dumps(header).encode()
        h += b" " * (-len(h) % 8)
        with open(os.path.join(a.out, fn), "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h + data)
    with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": wmap}, f)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    print(f"{a.out}: {len(names)} tensors in {a.shards} shards")


if __name__ == "__main__":
    main()
