#!/usr/bin/env python3
"""Combines bench/peers.py's and `gopt bench --json`'s results into a markdown table
(p50 latency in ms, bf16, same GPU, same run), with gopt's WGSL path through wgpu
(Vulkan) beside its CUDA path. usage: bench/table.py OUT"""
import json
import os
import sys

out = sys.argv[1]
peers = json.load(open(os.path.join(out, "peers.json")))


def gopt(m, b, suffix=""):
    p = os.path.join(out, f"gopt_{m}_b{b}{suffix}.json")
    try:
        return json.load(open(p))
    except Exception:
        return None


print(f"Device: {peers['device']}, PyTorch {peers['torch']}; p50 ms, bf16.\n")
print("| model | batch | torch eager | torch.compile | gopt CUDA | gopt / torch.compile | gopt no CUDA graph | gopt compile | gopt WGSL (wgpu) | WGSL / CUDA |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for m, r in peers["models"].items():
    for b in (1, 32):
        e, c = r[f"eager_b{b}"], r[f"compile_b{b}"]
        g = gopt(m, b)
        ng = gopt(m, b, "_nograph") if b == 1 else None
        gs = f"{g['p50_ms']:.3f}" if g else "failed"
        ratio = f"{g['p50_ms'] / c['p50_ms']:.2f}×" if g else "–"
        ngs = f"{ng['p50_ms']:.3f}" if ng else "–"
        comp = f"{sum(g['compile_ms'].values()) / 1e3:.1f} s" if g else "–"
        w = gopt(m, b, "_wgpu")
        ws = f"{w['p50_ms']:.3f} ({w['precision']})" if w else "failed"
        wr = f"{w['p50_ms'] / g['p50_ms']:.2f}×" if (w and g) else "–"
        print(f"| {m} | {b} | {e['p50_ms']:.3f} | {c['p50_ms']:.3f} ({c['mode']}, {c['compile_s']:.0f} s) "
              f"| {gs} | {ratio} | {ngs} | {comp} | {ws} | {wr} |")
w = gopt("resnet50", 1, "_wgpu") or gopt("bert_base", 1, "_wgpu")
if w:
    print(f"\nWGSL: {w['device']}; bf16 requested, run as {w['precision']} "
          f"({'; '.join(w.get('notes', []))}).")
