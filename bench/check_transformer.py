#!/usr/bin/env python3
"""Check bench/make_transformer.py: every --norm x --gelu x --causal combination, 1 and 2
layers, at a small size (hidden 64, heads 4, ffn 128, vocab 100).

For each model:
  1. onnx.checker.check_model(full_check=True) (runs ONNX shape inference too);
  2. onnx.reference.ReferenceEvaluator at batch 1, seq 8, with a padded tail in the mask;
  3. `gopt compile MODEL --bind batch=1 [--bind seq=8] --json` must succeed (nodes before
     and after folding are printed);
  4. `gopt run MODEL -i input_ids=ids.npy -i attention_mask=mask.npy -o DIR`; its
     last_hidden_state must match the reference evaluator's (max abs diff < 1e-4).
Two more models cover --shape-ops const and --opset 18 (ReduceMean axes as an input).

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


def label(args):
    return " ".join(args)


def check(args, gopt, work, idx):
    path = os.path.join(work, f"m{idx}.onnx")
    with contextlib.redirect_stdout(io.StringIO()):
        make_transformer.main(["-o", path] + SMALL + args)
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)

    rng = np.random.default_rng(idx)
    ids = rng.integers(0, 100, size=(1, SEQ), dtype=np.int64)
    mask = np.ones((1, SEQ), dtype=np.int64)
    mask[0, SEQ - 2:] = 0  # padded tail
    ref = ReferenceEvaluator(model).run(None, {"input_ids": ids, "attention_mask": mask})[0]
    if not np.isfinite(ref).all():
        return False, "reference output has non-finite values"

    binds = ["--bind", "batch=1"]
    if "--seq" not in args:
        binds += ["--bind", f"seq={SEQ}"]
    p = subprocess.run([gopt, "compile", path, *binds, "--json"], capture_output=True, text=True)
    if p.returncode != 0:
        return False, f"gopt compile failed ({p.returncode}): {p.stderr.strip()}"
    rep = json.loads(p.stdout)
    nodes = f"{rep['before']['nodes']} -> {rep['after']['nodes']} nodes"

    ids_f = os.path.join(work, f"m{idx}_ids.npy")
    mask_f = os.path.join(work, f"m{idx}_mask.npy")
    np.save(ids_f, ids)
    np.save(mask_f, mask)
    out_dir = os.path.join(work, f"m{idx}_out")
    p = subprocess.run(
        [gopt, "run", path, "-i", f"input_ids={ids_f}", "-i", f"attention_mask={mask_f}", "-o", out_dir],
        capture_output=True, text=True,
    )
    if p.returncode != 0:
        return False, f"{nodes}; gopt run failed ({p.returncode}): {p.stderr.strip()}"
    got = np.load(os.path.join(out_dir, "last_hidden_state.npy"))
    if got.shape != ref.shape:
        return False, f"{nodes}; gopt output shape {got.shape} != reference {ref.shape}"
    diff = float(np.max(np.abs(got.astype(np.float64) - ref.astype(np.float64))))
    ok = diff < TOL
    return ok, f"{nodes}; max abs diff {diff:.2e}"


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
            print(f"{'ok  ' if ok else 'FAIL'} {label(args):<70} {msg}", flush=True)
        print(f"{len(all_cases) - failed}/{len(all_cases)} passed")
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
