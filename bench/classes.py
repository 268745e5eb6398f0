#!/usr/bin/env python3
"""Summarizes `gopt bench --profile --json` files (profile_<model>_b<batch>.json in the
directory given) as a markdown table: per model, batch and kind of kernel, how many
kernels fell in each measured class, their share of the profiled time, the median
fraction of copy bandwidth (memory-side kinds) or of the unit's GEMM peak (GEMM,
convolution, attention), and how many the cost model was more than 2x off on (the
profile's `mismatches_by_kind`; counted from its kernels in files written before it).

usage: bench/classes.py DIR
"""
import json
import pathlib
import re
import statistics
import sys

COMPUTE_KINDS = {"gemm", "conv", "attention"}


def main(d):
    files = sorted(pathlib.Path(d).glob("profile_*_b*.json"))
    if not files:
        print(f"no profile_*_b*.json in {d}", file=sys.stderr)
        return 1
    for f in files:
        m = re.match(r"profile_(.+)_b(\d+)\.json", f.name)
        try:
            r = json.loads(f.read_text())
        except json.JSONDecodeError as e:
            print(f"{f.name}: not JSON ({e})", file=sys.stderr)
            continue
        p = r.get("profile")
        if not p:
            print(f"{f.name}: no profile", file=sys.stderr)
            continue
        peaks = p["peaks"]
        total = p["total_ms"] or 1e-12
        print(f"### {m.group(1)}, batch {m.group(2)} ({r['device']}, p50 {r['p50_ms']:.3f} ms)\n")
        print(f"peaks: copy {peaks['copy_bytes_per_s']/1e12:.2f} TB/s, "
              + ", ".join(f"{k} {v/1e12:.0f} TFLOP/s" for k, v in peaks["compute"].items())
              + f", one-element kernel {peaks['floor_s']*1e6:.1f} µs; "
              + ", ".join(f"{n} {c}" for c, n in p["classes"].items())
              + f"; {p['mismatches']} kernel(s) > 2x off the cost model\n")
        print("| kind | kernels | time share | classes | median of roof | > 2x off |")
        print("|---|---:|---:|---|---:|---:|")
        kinds = {}
        for k in p["kernels"]:
            kinds.setdefault(k["kind"], []).append(k)
        for kind, ks in sorted(kinds.items(), key=lambda kv: -sum(k["ms"] for k in kv[1])):
            classes = {}
            for k in ks:
                c = k["measured"]["class"]
                classes[c] = classes.get(c, 0) + 1
            key = "of_compute" if kind in COMPUTE_KINDS else "of_copy"
            roof = "peak" if kind in COMPUTE_KINDS else "copy"
            med = statistics.median(k["measured"][key] for k in ks)
            share = sum(k["ms"] for k in ks) / total
            by_kind = p.get("mismatches_by_kind")
            if by_kind is None:
                off = sum(1 for k in ks if k["mismatch"])
            else:
                off = by_kind.get(kind, 0)
            cls = ", ".join(f"{n} {c}" for c, n in sorted(classes.items()))
            print(f"| {kind} | {len(ks)} | {100*share:.0f}% | {cls} | {100*med:.0f}% {roof} | {off} |")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
