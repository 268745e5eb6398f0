#!/usr/bin/env python3
"""Generate the ONNX backend node conformance test data from the onnx package.

Usage: gen-conformance.py [--force] OUTDIR

For every case of onnx.backend.test.case.node.collect_testcases(None) writes

    OUTDIR/<case>/model.onnx
    OUTDIR/<case>/test_data_set_N/input_K.pb, output_K.pb
    OUTDIR/<case>/tolerance.json          {"rtol": ..., "atol": ...}

plus OUTDIR/manifest-all.txt (sorted case names) and OUTDIR/.stamp. The data
files are written exactly as onnx's own generator does
(onnx/backend/test/cmd_tools.py, `generate-data`): tensors as TensorProto
named after the graph input/output (TensorProto values are written as is),
sequences as SequenceProto, optionals as OptionalProto, maps as MapProto.

If OUTDIR/.stamp matches the installed onnx version and the case count in
manifest-all.txt (and every listed case directory exists), nothing is done;
--force regenerates. Generation is deterministic: onnx seeds np.random with 0
before each export function, and we seed it once more before collection.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import shutil
import sys
import time
import warnings

STAMP = ".stamp"
MANIFEST = "manifest-all.txt"


def stamp_text(onnx_version: str, count: int) -> str:
    return f"onnx {onnx_version}\ncases {count}\n"


def up_to_date(outdir: str, onnx_version: str) -> int | None:
    """Return the case count if OUTDIR already holds data for this onnx version."""
    try:
        with open(os.path.join(outdir, STAMP)) as f:
            stamp = f.read()
        with open(os.path.join(outdir, MANIFEST)) as f:
            names = [line for line in f.read().splitlines() if line]
    except OSError:
        return None
    if stamp != stamp_text(onnx_version, len(names)):
        return None
    if not all(os.path.isfile(os.path.join(outdir, n, "model.onnx")) for n in names):
        return None
    return len(names)


def serialize_value(value, value_info) -> bytes:
    """Serialize one input/output value the way onnx's cmd_tools.py does."""
    from onnx import TensorProto, numpy_helper

    t = value_info.type
    name = value_info.name
    if t.HasField("map_type"):
        return numpy_helper.from_dict(value, name).SerializeToString()
    if t.HasField("sequence_type"):
        return numpy_helper.from_list(value, name).SerializeToString()
    if t.HasField("optional_type"):
        return numpy_helper.from_optional(value, name).SerializeToString()
    assert t.HasField("tensor_type"), f"{name}: unsupported type {t}"
    if isinstance(value, TensorProto):
        return value.SerializeToString()
    return numpy_helper.from_array(value, name).SerializeToString()


def write_file(path: str, data: bytes | str) -> None:
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(path, mode) as f:
        f.write(data)


def generate(outdir: str) -> tuple[int, int]:
    import numpy as np

    np.seterr(all="ignore")
    np.random.seed(0)
    from onnx.backend.test.case.node import collect_testcases

    cases = collect_testcases(None)
    names = [c.name for c in cases]
    if len(set(names)) != len(names):
        raise SystemExit("duplicate case names in onnx test cases")

    os.makedirs(outdir, exist_ok=True)
    # Invalidate first so an interrupted run is never mistaken for a complete one.
    stamp_path = os.path.join(outdir, STAMP)
    if os.path.exists(stamp_path):
        os.remove(stamp_path)

    # Remove case directories from a previous generation that no longer exist.
    wanted = set(names)
    for entry in os.listdir(outdir):
        p = os.path.join(outdir, entry)
        if entry not in wanted and os.path.isfile(os.path.join(p, "model.onnx")):
            shutil.rmtree(p)

    non_tensor = 0
    for case in cases:
        assert case.kind == "node" and case.model is not None and case.data_sets
        case_dir = os.path.join(outdir, case.name)
        if os.path.exists(case_dir):
            shutil.rmtree(case_dir)
        os.makedirs(case_dir)
        model = case.model
        write_file(os.path.join(case_dir, "model.onnx"), model.SerializeToString())
        write_file(
            os.path.join(case_dir, "tolerance.json"),
            json.dumps({"rtol": case.rtol, "atol": case.atol}, sort_keys=True) + "\n",
        )
        graph = model.graph
        if any(
            not vi.type.HasField("tensor_type")
            for vi in list(graph.input) + list(graph.output)
        ):
            non_tensor += 1
        for i, (inputs, outputs) in enumerate(case.data_sets):
            ds_dir = os.path.join(case_dir, f"test_data_set_{i}")
            os.makedirs(ds_dir)
            for j, value in enumerate(inputs):
                write_file(
                    os.path.join(ds_dir, f"input_{j}.pb"),
                    serialize_value(value, graph.input[j]),
                )
            for j, value in enumerate(outputs):
                write_file(
                    os.path.join(ds_dir, f"output_{j}.pb"),
                    serialize_value(value, graph.output[j]),
                )

    write_file(os.path.join(outdir, MANIFEST), "".join(n + "\n" for n in sorted(names)))
    onnx_version = importlib.metadata.version("onnx")
    write_file(stamp_path, stamp_text(onnx_version, len(names)))
    return len(names), non_tensor


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir", help="output directory")
    ap.add_argument("--force", action="store_true", help="regenerate even if up to date")
    args = ap.parse_args()
    outdir = args.outdir

    onnx_version = importlib.metadata.version("onnx")
    if not args.force:
        n = up_to_date(outdir, onnx_version)
        if n is not None:
            print(f"{outdir} is up to date ({n} cases, onnx {onnx_version}); skipping (--force to regenerate)")
            return 0

    warnings.simplefilter("ignore")
    start = time.monotonic()
    n, non_tensor = generate(outdir)
    elapsed = time.monotonic() - start
    print(f"{non_tensor} cases have non-tensor (sequence/optional/map) inputs or outputs",
          file=sys.stderr)
    print(f"generated {n} cases in {outdir} ({elapsed:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
