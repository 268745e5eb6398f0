#!/usr/bin/env python3
"""The quantized-decode table of docs/benchmarks.md from one bench/quant-bench.sh run:
per batch, gopt's decode step in bf16, int8 and int4 (CUDA events per replay), the
bytes each reads, its share of the memory roof and its speed-up over bf16 in the same
run; then prefill at batch 32 (time to first token), bf16 against int4.

usage: bench/quant_table.py OUT   (the folder quant-bench.sh wrote)
"""
import json
import os
import sys


def load(out, name):
    p = os.path.join(out, name)
    if not os.path.exists(p):
        return None
    try:
        return json.load(open(p))
    except ValueError:
        return None


def main(out):
    print("| batch | weights | ms/token (p50) | p95 | tokens/s | reads per token | of roof "
          "| launches | speed-up over bf16 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for b in (1, 16):
        base = load(out, f"decode_bf16_b{b}.json")
        for q in ("bf16", "int8", "int4"):
            r = load(out, f"decode_{q}_b{b}.json")
            if r is None:
                print(f"| {b} | {q} | (no result) | | | | | | |")
                continue
            reads = (r["weight_bytes_per_token"] + r["cache_bytes_per_token"]) / 2**20
            roof = f"{100 * r['of_roof']:.0f}%" if r.get("of_roof") else "n/a"
            up = f"{base['p50_ms'] / r['p50_ms']:.2f}x" if base else "n/a"
            print(f"| {b} | {q} | {r['p50_ms']:.3f} | {r['p95_ms']:.3f} | {r['tokens_per_s']:.0f} "
                  f"| {reads:.0f} MiB | {roof} | {r['launches']} | {up} |")
    print()
    print("| prefill, batch 32 x 128 tokens | time to first token ms | int4 / bf16 |")
    print("|---|---|---|")
    base = load(out, "prefill_bf16_b32.json")
    for q in ("bf16", "int4"):
        r = load(out, f"prefill_{q}_b32.json")
        if r is None:
            print(f"| {q} | (no result) | |")
            continue
        t = r["time_to_first_token_ms"]
        ratio = f"{t / base['time_to_first_token_ms']:.2f}" if base else "n/a"
        print(f"| {q} | {t:.2f} | {ratio} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
