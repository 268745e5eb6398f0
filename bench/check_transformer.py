#!/usr/bin/env python3
"""Check bench/make_transformer.py: every --norm x --gelu x --causal combination, 1 and 2
layers, at a small size (hidden 64, heads 4, ffn 128, vocab 100), and --arch llama with
4, 2 and 1 key/value heads, both rsqrt forms, torch-style and constant shape ops.

For each model:
  1. onnx.checker.check_model(full_check=True) (runs ONNX shape inference too);
  2. onnx.reference.ReferenceEvaluator at batch 1, seq 8, with a padded tail in the mask;
  3. `gopt compile MODEL --bind batch=1 [--bind seq=8] --json` must succeed (nodes before
     and after folding are printed);
  4. `gopt run MODEL -i input_ids=ids.npy -i attention_mask=mask.npy -o DIR`; its
     last_hidden_state must match the reference evaluator's (max abs diff < 1e-4).
Two more models cover --shape-ops const and --opset 18 (ReduceMean axes as an input).
Llama models read `input_ids` only and write `logits`; their compile must also show what
the optimizer recognizes: one RMSNormalization per norm (2 per layer + 1), one Attention
per layer, no Expand left (grouped-query K/V read in place), no Softmax/Pow/ReduceMean,
at fp32 and bf16; and `gopt run --precision bf16` must stay within relative L2 2e-2.

Usage (from the repository root, after `cargo build --release`):
  .venv/bin/python bench/check_transformer.py [--gopt target/release/gopt] [--keep DIR]
Exit status 0 when every check passes, 1 otherwise.
"""

import argparse
import contextlib
import io
import itertools
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_transformer  # noqa: E402

SMALL = ["--hidden", "64", "--heads", "4", "--ffn", "128", "--vocab", "100"]
SEQ = 8
TOL = 1e-4
L2_LOW = 2e-2  # the precision rules' stated tolerance


def cases():
    for norm, gelu, causal, layers in itertools.product(
        ["layernorm", "decomposed", "rms"], ["erf", "tanh"], [False, True], [1, 2]
    ):
        args = ["--layers", str(layers), "--norm", norm, "--gelu", gelu]
        if causal:
            args += ["--causal", "--seq", str(SEQ)]
        yield args
    yield ["--layers", "2", "--shape-ops", "const"]
    yield ["--layers", "2", "--norm", "decomposed", "--opset", "18"]
    yield ["--layers", "1", "--norm", "rms", "--seq", str(SEQ), "--shape-ops", "const", "--opset", "18"]
    for kv, rsqrt, layers in itertools.product([4, 2, 1], ["div", "reciprocal"], [1, 2]):
        yield ["--arch", "llama", "--layers", str(layers), "--kv-heads", str(kv), "--rsqrt", rsqrt]
    yield ["--arch", "llama", "--layers", "2", "--kv-heads", "2", "--seq", str(SEQ), "--shape-ops", "const"]
    yield ["--arch", "llama", "--layers", "2", "--kv-heads", "2", "--opset", "18"]


def arg(args, name, default):
    return args[args.index(name) + 1] if name in args else default


def llama_expectations(args, ops):
    """What the optimizer must recognize in a llama model (None when it does)."""
    layers = int(arg(args, "--layers", "12"))
    want = {"RMSNormalization": 2 * layers + 1, "Attention": layers}
    for op, n in want.items():
        if ops.get(op, 0) != n:
            return f"{ops.get(op, 0)} {op}, expected {n}"
    left = [op for op in ("Expand", "Softmax", "Pow", "ReduceMean", "MatMul") if ops.get(op)]
    return f"left unfused: {left}" if left else None


def label(args):
    return " ".join(args)


def check(args, gopt, work, idx):
    path = os.path.join(work, f"m{idx}.onnx")
    with contextlib.redirect_stdout(io.StringIO()):
        make_transformer.main(["-o", path] + SMALL + args)
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)

    llama = arg(args, "--arch", "bert") == "llama"
    rng = np.random.default_rng(idx)
    ids = rng.integers(0, 100, size=(1, SEQ), dtype=np.int64)
    feeds = {"input_ids": ids}
    if not llama:
        mask = np.ones((1, SEQ), dtype=np.int64)
        mask[0, SEQ - 2:] = 0  # padded tail
        feeds["attention_mask"] = mask
    ref = ReferenceEvaluator(model).run(None, feeds)[0]
    if not np.isfinite(ref).all():
        return False, "reference output has non-finite values"

    binds = ["--bind", "batch=1"]
    if "--seq" not in args:
        binds += ["--bind", f"seq={SEQ}"]
    nodes = None
    for precision in ["fp32", "bf16"] if llama else ["fp32"]:
        p = subprocess.run([gopt, "compile", path, *binds, "--json", "--precision", precision],
                           capture_output=True, text=True)
        if p.returncode != 0:
            return False, f"gopt compile --precision {precision} failed ({p.returncode}): {p.stderr.strip()}"
        rep = json.loads(p.stdout)
        nodes = nodes or f"{rep['before']['nodes']} -> {rep['after']['nodes']} nodes"
        if llama:
            opt = rep["buckets"][0]["optimizer"]
            bad = llama_expectations(args, opt["after"]["ops"])
            if bad:
                return False, f"{nodes}; {precision}: {bad} ({'; '.join(opt['fusions'])})"

    inputs = []
    for name, arr in feeds.items():
        f = os.path.join(work, f"m{idx}_{name}.npy")
        np.save(f, arr)
        inputs += ["-i", f"{name}={f}"]
    out_name = "logits" if llama else "last_hidden_state"
    msg = [nodes]
    ok = True
    for precision in ["fp32", "bf16"] if llama else ["fp32"]:
        out_dir = os.path.join(work, f"m{idx}_out_{precision}")
        p = subprocess.run([gopt, "run", path, *inputs, "-o", out_dir, "--precision", precision],
                           capture_output=True, text=True)
        if p.returncode != 0:
            return False, f"{nodes}; gopt run --precision {precision} failed ({p.returncode}): {p.stderr.strip()}"
        got = np.load(os.path.join(out_dir, f"{out_name}.npy")).astype(np.float64)
        if got.shape != ref.shape:
            return False, f"{nodes}; gopt output shape {got.shape} != reference {ref.shape}"
        want = ref.astype(np.float64)
        if precision == "fp32":
            diff = float(np.max(np.abs(got - want)))
            ok &= diff < TOL
            msg.append(f"max abs diff {diff:.2e}")
        else:
            l2 = float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))
            ok &= l2 <= L2_LOW
            msg.append(f"{precision} rel L2 {l2:.1e}")
    return ok, "; ".join(msg)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gopt", default=os.path.join(HERE, "..", "target", "release", "gopt"))
    ap.add_argument("--keep", help="write the models here (default: a temp dir, removed)")
    a = ap.parse_args()
    if not os.access(a.gopt, os.X_OK):
        sys.exit(f"{a.gopt} not found: run `cargo build --release` first")

    with tempfile.TemporaryDirectory(prefix="gopt-check-") as tmp:
        work = a.keep or tmp
        os.makedirs(work, exist_ok=True)
        failed = 0
        all_cases = list(cases())
        for idx, args in enumerate(all_cases):
            try:
                ok, msg = check(args, a.gopt, work, idx)
            except Exception as e:  # noqa: BLE001 - report and go on
                ok, msg = False, f"{type(e).__name__}: {e}"
            failed += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {label(args):<78} {msg}", flush=True)
        print(f"{len(all_cases) - failed}/{len(all_cases)} passed")
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
