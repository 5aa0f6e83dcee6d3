#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets into fuzz/corpus/<target>/ (standard library only).

Seeds are small: hand-made safetensors files covering every dtype, metadata, a zero-size tensor, and
the header of a real fixture shard with a shortened data section; every fixture config.json (some with
a NUL + generation_config.json appended) and variants with legacy rope / pattern / freq fields.
Usage (repo root): python3 fuzz/make_corpus.py
"""
import glob
import json
import os
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fuzz", "corpus")


def st(tensors, metadata=None, gap=0):
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, (dtype, shape, raw) in tensors.items():
        data += b"\0" * gap
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(h)) + h + data


def write(target, name, blob):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(blob)


def main():
    f32 = struct.pack("<4f", 1.0, -2.5, 3.0e-39, float("inf"))
    write("safetensors_header", "all_dtypes", st({
        "a.f32": ("F32", [2, 2], f32),
        "b.bf16": ("BF16", [3], b"\x80\x3f\x00\xc0\x01\x00"),
        "c.f16": ("F16", [1, 3], b"\x00\x3c\x01\x00\x00\x7c"),
        "d.fp8": ("F8_E4M3", [2, 4], bytes([0x38, 0x7e, 0x7f, 0x01, 0x80, 0xff, 0x08, 0x40])),
        "d.fp8_scale_inv": ("F32", [1, 1], struct.pack("<f", 0.5)),
        "e.i64": ("I64", [2], struct.pack("<2q", 7, -1)),
        "f.i32": ("I32", [], struct.pack("<i", 3)),
        "g.empty": ("F32", [0, 4], b""),
    }, {"format": "pt"}))
    write("safetensors_header", "odd_offsets", st({"x": ("BF16", [2, 2], b"\x01\x02\x03\x04\x05\x06\x07\x08"),
                                                   "y": ("F32", [1], f32[:4])}, None, gap=1))
    write("safetensors_header", "empty_header", struct.pack("<Q", 2) + b"{}")
    write("safetensors_header", "padded_header", struct.pack("<Q", 16) + b"{}" + b" " * 14)
    # A real shard's header (tiny-bf16) with only the first bytes of its data: realistic names and offsets.
    real = os.path.join(ROOT, "tests", "data", "fixtures", "tiny-bf16", "model.safetensors")
    if os.path.exists(real):
        blob = open(real, "rb").read()
        n = struct.unpack("<Q", blob[:8])[0]
        hdr = json.loads(blob[8:8 + n])
        keep = {k: v for k, v in hdr.items() if k == "__metadata__" or v["data_offsets"][1] <= 4096}
        h = json.dumps(keep, separators=(",", ":")).encode()
        write("safetensors_header", "tiny_bf16_prefix", struct.pack("<Q", len(h)) + h + blob[8 + n:8 + n + 4096])

    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "data", "fixtures", "*", "config.json"))):
        name = os.path.basename(os.path.dirname(path))
        cfg = open(path, "rb").read()
        write("model_config", name, cfg)
        gen = os.path.join(os.path.dirname(path), "generation_config.json")
        if name in ("tiny-f32", "tiny-fp8") and os.path.exists(gen):
            write("model_config", name + "+generation", cfg + b"\0" + open(gen, "rb").read())
    base = json.load(open(os.path.join(ROOT, "tests", "data", "fixtures", "tiny-f32", "config.json")))
    legacy = dict(base)
    legacy.pop("rope_parameters")
    legacy["rope_theta"] = 1000000.0
    legacy["rope_scaling"] = {"type": "yarn", "factor": 8.0, "original_max_position_embeddings": 512}
    write("model_config", "legacy-rope", json.dumps(legacy).encode())
    pat = dict(base)
    pat.pop("indexer_types")
    pat["index_topk_pattern"] = "FSFS"
    pat.pop("mlp_layer_types")
    write("model_config", "pattern", json.dumps(pat).encode())
    freq = dict(pat)
    freq.pop("index_topk_pattern")
    freq["index_topk_freq"] = 2
    freq["index_skip_topk_offset"] = 1
    freq["eos_token_id"] = 5
    write("model_config", "freq", json.dumps(freq).encode())
    nested = dict(base)
    nested["rope_parameters"] = {"deepseek_sparse_attention": {"rope_type": "yarn", "rope_theta": 1e6, "factor": 4.0,
                                                               "original_max_position_embeddings": 1024}}
    nested["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}
    write("model_config", "nested-rope-fp8", json.dumps(nested).encode())
    checkpoint_seed()


def checkpoint_seed():
    """A valid model.safetensors for the fixed config of fuzz/checkpoint_fuzzer.cpp (FP8 blocks [4, 4])."""
    V, D, I, M, E, H, QR, KVR, NOPE, ROPE, VD, IH, ID = 16, 8, 12, 4, 4, 2, 6, 4, 2, 2, 3, 2, 4
    t = {}

    def lin(name, o, i):
        t[name] = ("F8_E4M3", [o, i], bytes((k * 7 + 0x30) % 0x7e for k in range(o * i)))
        so, si = -(-o // 4), -(-i // 4)
        t[name + "_scale_inv"] = ("F32", [so, si], struct.pack(f"<{so * si}f", *([0.25] * (so * si))))

    def bf16(name, shape):
        n = 1
        for d in shape:
            n *= d
        t[name] = ("BF16", shape, b"\x80\x3f" * n)

    bf16("model.embed_tokens.weight", [V, D])
    bf16("lm_head.weight", [V, D])
    bf16("model.norm.weight", [D])
    for layer in range(2):
        p = f"model.layers.{layer}."
        bf16(p + "input_layernorm.weight", [D])
        bf16(p + "post_attention_layernorm.weight", [D])
        a = p + "self_attn."
        lin(a + "q_a_proj.weight", QR, D)
        bf16(a + "q_a_layernorm.weight", [QR])
        lin(a + "q_b_proj.weight", H * (NOPE + ROPE), QR)
        lin(a + "kv_a_proj_with_mqa.weight", KVR + ROPE, D)
        bf16(a + "kv_a_layernorm.weight", [KVR])
        lin(a + "kv_b_proj.weight", H * (NOPE + VD), KVR)
        lin(a + "o_proj.weight", D, H * VD)
        if layer == 0:
            lin(a + "indexer.wq_b.weight", IH * ID, QR)
            lin(a + "indexer.wk.weight", ID, D)
            bf16(a + "indexer.k_norm.weight", [ID])
            bf16(a + "indexer.k_norm.bias", [ID])
            bf16(a + "indexer.weights_proj.weight", [IH, D])
            for n in ("gate_proj", "up_proj"):
                lin(p + f"mlp.{n}.weight", I, D)
            lin(p + "mlp.down_proj.weight", D, I)
            continue
        bf16(p + "mlp.gate.weight", [E, D])
        t[p + "mlp.gate.e_score_correction_bias"] = ("F32", [E], struct.pack("<4f", 0.1, -0.1, 0.2, 0.0))
        for e in range(E):
            lin(p + f"mlp.experts.{e}.gate_proj.weight", M, D)
            lin(p + f"mlp.experts.{e}.up_proj.weight", M, D)
            lin(p + f"mlp.experts.{e}.down_proj.weight", D, M)
        lin(p + "mlp.shared_experts.gate_proj.weight", M, D)
        lin(p + "mlp.shared_experts.up_proj.weight", M, D)
        lin(p + "mlp.shared_experts.down_proj.weight", D, M)
    write("checkpoint", "valid_fp8", st(t, {"format": "pt"}))
    write("checkpoint", "valid_fp8_odd_offsets", st(t, None, gap=1))


if __name__ == "__main__":
    main()
