#!/usr/bin/env python3
"""Combines bench/peers.py's and `gopt bench --json`'s results into a markdown table
(p50 latency in ms, bf16, same GPU, same run). PyTorch runs the model with SDPA
attention: "torch eager" uncompiled, "torch.compile" the faster of modes default and
reduce-overhead at that batch (named, with its compile time and the other mode's p50).
gopt's CUDA path, with the columns of an older binary when bench/gpu-bench.sh ran one
(GOPT_BEFORE: before_<model>_b<batch>.json), and its WGSL path through wgpu (Vulkan)
when that ran. usage: bench/table.py OUT"""
import json
import os
import sys

out = sys.argv[1]
peers = json.load(open(os.path.join(out, "peers.json")))
MODES = ("default", "reduce-overhead")


def load(name):
    try:
        return json.load(open(os.path.join(out, name)))
    except Exception:
        return None


def gopt(m, b, suffix=""):
    return load(f"gopt_{m}_b{b}{suffix}.json")


def ran(prefix, suffix=""):
    """Whether any result file of this kind was written (so a column that did not run
    is left out rather than shown as failed)."""
    return any(f.startswith(prefix) and f.endswith(suffix + ".json") for f in os.listdir(out))


def label(m, r):
    c = r.get("config") or {}
    if m == "llama" and "layers" in c:
        return (f"Llama {c['params'] / 1e9:.2f}B ({c['layers']} layers, hidden {c['hidden']}) "
                f"seq {c['seq']}")
    return {"resnet50": "ResNet-50 224²", "bert_base": "BERT-base seq 128",
            "gpt2": "GPT-2 124M seq 128"}.get(m, m)


def peer(r, b):
    """(eager, best compile, {mode: result}) at batch b; also reads peers.json files of
    before both modes were timed (eager_b<b>, compile_b<b>: one mode)."""
    if f"b{b}" in r:
        x = r[f"b{b}"]
        modes = {mo: x.get("compile_" + mo.replace("-", "_")) for mo in MODES}
        return x.get("eager"), x.get("compile_best"), {k: v for k, v in modes.items() if v}
    c = r.get(f"compile_b{b}")
    return r.get(f"eager_b{b}"), c, {c["mode"]: c} if c else {}


def ms(x):
    return f"{x['p50_ms']:.3f}" if x and "p50_ms" in x else "failed"


def compiled(best, modes):
    if not best:
        return "failed"
    s = f"{best['p50_ms']:.3f} ({best['mode']}, {best['compile_s']:.0f} s"
    for mo, x in modes.items():
        if mo != best["mode"]:
            s += f"; {mo} " + (f"{x['p50_ms']:.3f}" if "p50_ms" in x else "failed")
    return s + ")"


def ratio(a, b):
    return f"{a['p50_ms'] / b['p50_ms']:.2f}×" if (a and b and "p50_ms" in a and "p50_ms" in b) else "–"


before = ran("before_")
wgpu = ran("gopt_", "_wgpu")
cols = ["model", "batch", "torch eager", "torch.compile"]
if before:
    cols += ["gopt before", "gopt CUDA", "after / before"]
else:
    cols += ["gopt CUDA"]
cols += ["gopt / torch.compile", "gopt no CUDA graph", "gopt compile"]
if wgpu:
    cols += ["gopt WGSL (wgpu)", "WGSL / CUDA"]

sdpa = any("attn_implementation" in r for r in peers["models"].values())
print(f"Device: {peers['device']}, PyTorch {peers['torch']}"
      f"{' (transformers with SDPA attention, TF32 off)' if sdpa else ''}; p50 ms, bf16.\n")
print("| " + " | ".join(cols) + " |")
print("|---|" + "---:|" * (len(cols) - 1))
notes = []
for m, r in peers["models"].items():
    if "error" in r:
        notes.append(f"{label(m, r)}: bench/peers.py failed: {r['error'][:300]}")
    for b in (1, 32):
        e, c, modes = peer(r, b)
        g = gopt(m, b)
        row = [label(m, r), str(b), ms(e), compiled(c, modes)]
        if before:
            bf = load(f"before_{m}_b{b}.json")
            row += [ms(bf), ms(g), ratio(g, bf)]
        else:
            row += [ms(g)]
        ng = gopt(m, b, "_nograph") if b == 1 else None
        row += [ratio(g, c), ms(ng) if ng else "–",
                f"{sum(g['compile_ms'].values()) / 1e3:.1f} s" if g else "–"]
        if wgpu:
            w = gopt(m, b, "_wgpu")
            row += [f"{w['p50_ms']:.3f} ({w['precision']})" if w else "failed", ratio(w, g)]
        print("| " + " | ".join(row) + " |")
    c = r.get("config") or {}
    if m == "llama" and "layers" in c:
        notes.append(f"Llama: LlamaConfig random init (seed 0), {c['layers']} layers, hidden "
                     f"{c['hidden']}, {c['heads']} query / {c['kv_heads']} K/V heads, MLP "
                     f"{c['intermediate']}, vocab {c['vocab']}, untied LM head over all {c['seq']} "
                     f"positions, {c['params'] / 1e9:.3f}B parameters; prefill, no KV cache.")
for n in notes:
    print(f"\n{n}")
w = next((gopt(m, 1, "_wgpu") for m in peers["models"] if gopt(m, 1, "_wgpu")), None)
if w:
    print(f"\nWGSL: {w['device']}; bf16 requested, run as {w['precision']} "
          f"({'; '.join(w.get('notes', []))}).")
