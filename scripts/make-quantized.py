#!/usr/bin/env python3
"""Writes the weight-only quantized test models under tests/data/quantized/.

Run with the project's venv (scripts/python-env.sh):
    .venv/bin/python scripts/make-quantized.py [OUTDIR]
The outputs are committed (about 25 KB); rerunning gives byte-identical files, and
scripts/test.sh checks that the committed ones are what this script writes.

Each case is a folder in the ONNX backend-test layout that `gopt test` and
tests/quantized_import.rs read:

    <case>/model.onnx
    <case>/test_data_set_0/input_0.pb, output_0.pb   (TensorProtos named after the
                                                       graph input and output)
    <case>/tolerance.json                             {"rtol": .., "atol": ..}

Two families:
  nbits_*  ONNX Runtime's com.microsoft MatMulNBits (4 and 8 bits; blocks of 16, 32,
           128; zero points absent, packed u8 or float; bias; K not a multiple of the
           block; A of rank 2 and 3; f32 and f16 activations).
  qdq_*    DequantizeLinear of an int8 / int4 / uint4 weight feeding MatMul (blocked
           int4 along K, per-axis int8, per-axis uint4 with an odd element count,
           stored in int32_data; an int4 zero point given by a Constant node).

The reference outputs come from an independent numpy implementation written here:
the weights are unpacked from the bytes the model stores, dequantized and multiplied
in float64, and rounded once to the output type. Nothing here runs gopt or onnxruntime.
Tolerances: f32 outputs rtol 1e-5, atol 1e-6 (both sides round one float64 sum);
f16 outputs rtol 2e-3, atol 2e-3 (a compiled f16 product may round its weights and
partial sums to f16 along the way).
"""
import json
import os
import sys

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "tests", "data", "quantized")

TOL = {np.float32: {"rtol": 1e-5, "atol": 1e-6}, np.float16: {"rtol": 2e-3, "atol": 2e-3}}
ELEM = {np.float32: TensorProto.FLOAT, np.float16: TensorProto.FLOAT16}


# ---- writing a case -----------------------------------------------------------------

def write(out, case, model, x, y, dtype):
    onnx.checker.check_model(model)
    d = os.path.join(out, case)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(model.SerializeToString(deterministic=True))
    g = model.graph
    for kind, name, arr in (("input", g.input[0].name, x), ("output", g.output[0].name, y)):
        t = numpy_helper.from_array(arr, name)
        with open(os.path.join(d, "test_data_set_0", f"{kind}_0.pb"), "wb") as f:
            f.write(t.SerializeToString(deterministic=True))
    with open(os.path.join(d, "tolerance.json"), "w") as f:
        json.dump(TOL[dtype], f)
        f.write("\n")
    print("wrote", os.path.relpath(d, ROOT))


def model_of(nodes, name, a_shape, y_shape, dtype, inits, contrib=False, opset=21):
    g = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("A", ELEM[dtype], a_shape)],
        [helper.make_tensor_value_info("Y", ELEM[dtype], y_shape)],
        inits,
    )
    opsets = [helper.make_opsetid("", opset)]
    if contrib:
        opsets.append(helper.make_opsetid("com.microsoft", 1))
    m = helper.make_model(g, opset_imports=opsets, producer_name="make-quantized")
    m.ir_version = 10
    return m


# ---- MatMulNBits ----------------------------------------------------------------------

def pack_bits(q, bits):
    """Packs the last axis of `q` (values below 2**bits) `8 / bits` to a byte, element
    2j in the low nibble; an odd count gets a zero high nibble."""
    q = q.astype(np.uint8)
    if bits == 8:
        return q
    if q.shape[-1] % 2:
        q = np.concatenate([q, np.zeros(q.shape[:-1] + (1,), np.uint8)], axis=-1)
    return (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)


def unpack_bits(b, bits, count):
    """The inverse of pack_bits, reading the stored bytes: the first `count` values of
    the last axis."""
    if bits == 8:
        return b[..., :count].astype(np.int64)
    lo, hi = b & 0xF, b >> 4
    both = np.stack([lo, hi], axis=-1).reshape(b.shape[:-1] + (-1,))
    return both[..., :count].astype(np.int64)


def nbits_reference(a, b, scales, zp, bias, k, n, bits, block, zp_kind):
    """Y = A · Wᵀ (+ bias), W[n, k] = (q[n, k] − zp[n, k // block]) · scale[n, k // block],
    from the bytes and tensors the model holds, in float64."""
    blocks = -(-k // block)
    q = unpack_bits(b.reshape(n, blocks * b.shape[-1]), bits, blocks * block)[:, :k]
    s = scales.astype(np.float64).reshape(n, blocks)
    if zp_kind == "none":
        z = np.full((n, blocks), 2 ** (bits - 1), np.float64)
    elif zp_kind == "u8":
        z = unpack_bits(zp.reshape(n, -1), bits, blocks).astype(np.float64)
    else:
        z = zp.astype(np.float64).reshape(n, blocks)
    col = np.arange(k) // block
    w = (q - z[:, col]) * s[:, col]
    y = a.astype(np.float64) @ w.T
    if bias is not None:
        y = y + bias.astype(np.float64)
    return y.astype(a.dtype)


def nbits_case(out, case, *, bits, block, k, n, a_shape, zp_kind="none", bias=False,
               dtype=np.float32, two_d=False, sym_batch=False, seed=0, **attrs):
    rng = np.random.default_rng(seed)
    blocks = -(-k // block)
    q = rng.integers(0, 2 ** bits, (n, k))
    padded = np.zeros((n, blocks * block), np.int64)
    padded[:, :k] = q
    b = pack_bits(padded.reshape(n, blocks, block), bits)
    scales = (rng.uniform(0.01, 0.05, (n, blocks))).astype(dtype)
    inits = [numpy_helper.from_array(b, "B")]
    inputs = ["A", "B", "scales"]
    zp = None
    if zp_kind == "u8":
        zq = rng.integers(0, 2 ** bits, (n, blocks))
        zp = pack_bits(zq, bits)
        zp = zp if two_d else zp.reshape(-1)
    elif zp_kind == "float":
        zp = rng.uniform(0, 2 ** bits - 1, (n, blocks)).astype(dtype)
        zp = zp if two_d else zp.reshape(-1)
    inits.append(numpy_helper.from_array(scales if two_d else scales.reshape(-1), "scales"))
    if zp is not None:
        inits.append(numpy_helper.from_array(zp, "zero_points"))
        inputs.append("zero_points")
    bias_v = None
    if bias:
        bias_v = rng.uniform(-1, 1, (n,)).astype(dtype)
        inits.append(numpy_helper.from_array(bias_v, "bias"))
        inputs += [""] * (5 - len(inputs)) + ["bias"]
    node = helper.make_node("MatMulNBits", inputs, ["Y"], name="mm", domain="com.microsoft",
                            K=k, N=n, bits=bits, block_size=block, **attrs)
    a = rng.standard_normal(a_shape).astype(dtype)
    y = nbits_reference(a, b, scales, zp, bias_v, k, n, bits, block, zp_kind)
    shape_in = (["batch"] + list(a_shape[1:])) if sym_batch else list(a_shape)
    shape_out = shape_in[:-1] + [n]
    m = model_of([node], case, shape_in, shape_out, dtype, inits, contrib=True)
    write(out, case, m, a, y, dtype)


# ---- DequantizeLinear → MatMul --------------------------------------------------------

def qdq_case(out, case, *, k, n, m, wtype, axis, block=0, zp_constant=False,
             int32_data=False, seed=0):
    """Y = A · DequantizeLinear(W, scale, zp) with W [K, N] of `wtype`."""
    rng = np.random.default_rng(seed)
    lo, hi, npt, code = {
        "int8": (-128, 127, np.int8, TensorProto.INT8),
        "int4": (-8, 7, ml_dtypes.int4, TensorProto.INT4),
        "uint4": (0, 15, ml_dtypes.uint4, TensorProto.UINT4),
    }[wtype]
    w = rng.integers(lo, hi + 1, (k, n))
    if block:
        sshape = (-(-k // block), n)
    else:
        sshape = (n,) if axis == 1 else (k,)
    scale = rng.uniform(0.01, 0.05, sshape).astype(np.float32)
    z = rng.integers(lo, hi + 1, sshape)

    def tensor(name, v, dims):
        if int32_data and code != TensorProto.INT8:
            return helper.make_tensor(name, code, dims, v.reshape(-1).tolist(), raw=False)
        return numpy_helper.from_array(v.astype(npt), name)

    inits = [tensor("W", w, [k, n]), numpy_helper.from_array(scale, "scale")]
    nodes = []
    if zp_constant:
        nodes.append(helper.make_node("Constant", [], ["zp"], name="zp_const",
                                      value=tensor("zp_value", z, list(sshape))))
    else:
        inits.append(tensor("zp", z, list(sshape)))
    dq = {"axis": axis}
    if block:
        dq["block_size"] = block
    nodes += [
        helper.make_node("DequantizeLinear", ["W", "scale", "zp"], ["Wf"], name="dq", **dq),
        helper.make_node("MatMul", ["A", "Wf"], ["Y"], name="mm"),
    ]
    # The reference: dequantized in float64 from the integers stored.
    if block:
        rows = np.arange(k) // block
        wf = (w - z[rows, :]) * scale.astype(np.float64)[rows, :]
    elif axis == 1:
        wf = (w - z[None, :]) * scale.astype(np.float64)[None, :]
    else:
        wf = (w - z[:, None]) * scale.astype(np.float64)[:, None]
    # DequantizeLinear rounds W to f32 before the product.
    wf = wf.astype(np.float32).astype(np.float64)
    a = rng.standard_normal((m, k)).astype(np.float32)
    y = (a.astype(np.float64) @ wf).astype(np.float32)
    model = model_of(nodes, case, [m, k], [m, n], np.float32, inits)
    write(out, case, model, a, y, np.float32)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else OUT
    f16 = np.float16
    nbits_case(out, "nbits_b4_blk16", bits=4, block=16, k=64, n=12, a_shape=(3, 64), seed=1)
    nbits_case(out, "nbits_b4_blk32_zp_u8", bits=4, block=32, k=96, n=10, a_shape=(2, 96),
               zp_kind="u8", seed=2, accuracy_level=4)
    nbits_case(out, "nbits_b4_blk128_zp_float", bits=4, block=128, k=256, n=8,
               a_shape=(2, 256), zp_kind="float", seed=3)
    nbits_case(out, "nbits_b4_k80_blk32_zp_u8_bias", bits=4, block=32, k=80, n=9,
               a_shape=(4, 80), zp_kind="u8", bias=True, seed=4)
    nbits_case(out, "nbits_b4_rank3_2d_params", bits=4, block=16, k=48, n=6,
               a_shape=(2, 3, 48), zp_kind="u8", two_d=True, sym_batch=True, seed=5)
    nbits_case(out, "nbits_b8_blk32_bias", bits=8, block=32, k=64, n=8, a_shape=(3, 64),
               bias=True, seed=6)
    nbits_case(out, "nbits_b8_blk16_zp_u8", bits=8, block=16, k=40, n=5, a_shape=(2, 40),
               zp_kind="u8", seed=7)
    nbits_case(out, "nbits_b8_blk128_zp_float_rank3", bits=8, block=128, k=128, n=4,
               a_shape=(1, 2, 128), zp_kind="float", seed=8)
    nbits_case(out, "nbits_b4_f16_bias_rank3", bits=4, block=32, k=64, n=8,
               a_shape=(2, 2, 64), zp_kind="u8", bias=True, dtype=f16, seed=9)
    nbits_case(out, "nbits_b8_f16_zp_float", bits=8, block=16, k=48, n=6, a_shape=(3, 48),
               zp_kind="float", dtype=f16, seed=10)
    qdq_case(out, "qdq_int4_blocked", k=64, n=10, m=3, wtype="int4", axis=0, block=32,
             seed=11)
    qdq_case(out, "qdq_int4_blocked_constant_zp", k=80, n=6, m=2, wtype="int4", axis=0,
             block=32, zp_constant=True, seed=12)
    qdq_case(out, "qdq_int8_per_axis", k=48, n=8, m=3, wtype="int8", axis=1, seed=13)
    qdq_case(out, "qdq_uint4_per_axis_int32_data", k=33, n=5, m=2, wtype="uint4", axis=1,
             int32_data=True, seed=14)


if __name__ == "__main__":
    main()
