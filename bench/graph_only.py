#!/usr/bin/env python3
"""Graph-only copies of exported models, and their weights regenerated from the shapes.

Real exports (transformers' BERT-base, GPT-2, a Llama-architecture 1.1B decoder) are the
honest compile-time benchmark, but their weights are 0.4 to 4.4 GB: too much to commit.
`strip` keeps the graph: every float initializer of 1 KiB or more becomes an external
tensor of WEIGHTS (a file name beside the graph, `<model>.weights`) at a 64-byte aligned
offset, and only the graph is written. Integer and bool initializers (shape constants,
position ids, masks) stay inline with their real values, since the graph's meaning
depends on them. `regen` writes WEIGHTS back: random values (seed 0, normal * 0.02) of
each tensor's recorded dtype, at its recorded offset, so a committed graph becomes a
compilable model again in seconds. The compile-time benchmark (bench/compile-time.sh)
calls `regen` before it times anything.

usage: bench/graph_only.py strip MODEL.onnx OUT.onnx
       bench/graph_only.py regen GRAPH.onnx     (writes the weights file beside GRAPH)
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

FLOATS = (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE)
ALIGN = 64
MIN_BYTES = 1024


def strip(src, dst):
    m = onnx.load(src)  # with its external data, if any
    weights = os.path.basename(dst)[: -len(".onnx")] + ".weights"
    offset = 0
    moved = 0
    for t in m.graph.initializer:
        if t.data_type not in FLOATS:
            continue
        n = int(np.prod(t.dims)) if len(t.dims) else 1
        nbytes = n * helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
        if nbytes < MIN_BYTES:
            continue
        offset = (offset + ALIGN - 1) // ALIGN * ALIGN
        t.ClearField("raw_data")
        t.ClearField("float_data")
        t.ClearField("double_data")
        t.ClearField("int32_data")
        del t.external_data[:]
        for k, v in (("location", weights), ("offset", str(offset)), ("length", str(nbytes))):
            e = t.external_data.add()
            e.key, e.value = k, v
        t.data_location = TensorProto.EXTERNAL
        offset += nbytes
        moved += 1
    onnx.save_model(m, dst)  # the graph only: no tensor here has data left to write
    print(f"{dst}: {moved} weights ({offset / 2**20:.1f} MiB) moved to {weights}, "
          f"graph {os.path.getsize(dst) / 2**10:.0f} KiB", file=sys.stderr)


def regen(graph):
    m = onnx.load(graph, load_external_data=False)
    rng = np.random.default_rng(0)
    files = {}
    for t in m.graph.initializer:
        if t.data_location != TensorProto.EXTERNAL:
            continue
        ext = {e.key: e.value for e in t.external_data}
        files.setdefault(ext["location"], []).append(
            (int(ext.get("offset", 0)), int(ext["length"]), t.data_type))
    for loc, tensors in files.items():
        path = os.path.join(os.path.dirname(os.path.abspath(graph)), loc)
        size = max(o + n for o, n, _ in tensors)
        if os.path.exists(path) and os.path.getsize(path) == size:
            print(f"{path}: present ({size / 2**20:.1f} MiB)", file=sys.stderr)
            continue
        with open(path, "wb") as f:
            f.truncate(size)
            for offset, nbytes, dtype in sorted(tensors):
                np_t = helper.tensor_dtype_to_np_dtype(dtype)
                n = nbytes // np.dtype(np_t).itemsize
                a = (rng.standard_normal(n, dtype=np.float32) * 0.02).astype(np_t)
                f.seek(offset)
                f.write(a.tobytes())
        print(f"{path}: wrote {len(tensors)} weights ({size / 2**20:.1f} MiB)", file=sys.stderr)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "strip":
        strip(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] == "regen":
        regen(sys.argv[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
