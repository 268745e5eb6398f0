#!/usr/bin/env python3
"""The decode table of docs/benchmarks.md from one bench/decode-bench.sh run: gopt's
decode step (CUDA events per replay) beside PyTorch's static-cache decode (eager and
torch.compile reduce-overhead, the faster being the peer to beat) at each batch, with
the memory roof and gopt's share of it, then gopt generate's end-to-end figures.

usage: bench/decode_table.py OUT   (the folder decode-bench.sh wrote)
"""
import json
import os
import sys


def main(out):
    peers = {}
    path = os.path.join(out, "peers_decode.jsonl")
    if os.path.exists(path):
        for line in open(path):
            line = line.strip()
            if line.startswith("{"):
                r = json.loads(line)
                peers.setdefault(r.get("batch"), {})[r.get("peer")] = r
    print("| batch | context | gopt ms/token (p50) | p95 | tokens/s | memory roof ms | of roof "
          "| PyTorch eager | torch.compile | gopt / best peer |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for b in (1, 16):
        p = os.path.join(out, f"gopt_decode_b{b}.json")
        if not os.path.exists(p):
            print(f"| {b} | | (no gopt result) | | | | | | | |")
            continue
        g = json.load(open(p))
        pe = peers.get(b, {})
        eager = pe.get("torch_eager_static", {}).get("ms_per_token_p50")
        comp = pe.get("torch_compile_static", {}).get("ms_per_token_p50")
        best = min([x for x in (eager, comp) if x], default=None)
        fmt = lambda x: f"{x:.3f}" if isinstance(x, (int, float)) else "n/a"
        ratio = f"{g['p50_ms'] / best:.2f}x" if best else "n/a"
        print(f"| {b} | {g['context']} | {fmt(g['p50_ms'])} | {fmt(g['p95_ms'])} | {g['tokens_per_s']:.0f} "
              f"| {fmt(g.get('roof_ms'))} | {100 * g['of_roof']:.0f}% | {fmt(eager)} | {fmt(comp)} | {ratio} |"
              if g.get("of_roof") else
              f"| {b} | {g['context']} | {fmt(g['p50_ms'])} | {fmt(g['p95_ms'])} | {g['tokens_per_s']:.0f} "
              f"| n/a | n/a | {fmt(eager)} | {fmt(comp)} | {ratio} |")
    p = os.path.join(out, "gopt_generate_b1.json")
    if os.path.exists(p):
        g = json.load(open(p))
        print()
        print(f"gopt generate, batch 1, {g['prompt_tokens'][0]}-token prompt, "
              f"{len(g['tokens'][0])} new tokens: compile {g['compile_ms']:.0f} ms, load "
              f"{g['load_ms']:.0f} ms, time to first token {g['time_to_first_token_ms']:.2f} ms, "
              f"{g['ms_per_token_p50']:.3f} ms per token (p50, host work included), "
              f"{g['tokens_per_s']:.0f} tokens/s; steps {g['prefill_step']}, {g['decode_step']}")


if __name__ == "__main__":
    main(sys.argv[1])
