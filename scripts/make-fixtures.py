#!/usr/bin/env python3
"""Writes the small ONNX fixtures under tests/in/import/ that the import snapshots use.

Run with the project's venv (scripts/python-env.sh):
    .venv/bin/python scripts/make-fixtures.py
The outputs are committed; rerunning gives byte-identical files.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "in", "import")


def save(model, name):
    onnx.checker.check_model(model)
    path = os.path.join(OUT, name + ".onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString(deterministic=True))
    print("wrote", os.path.relpath(path))


def w(name, shape, seed, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(dtype), name)


def mlp():
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
        helper.make_node("Add", ["h", "b1"], ["hb"], name="fc1_bias"),
        helper.make_node("Relu", ["hb"], ["a"], name="act"),
        helper.make_node("Gemm", ["a", "w2", "b2"], ["y"], name="fc2", transB=1, alpha=1.0),
    ]
    g = helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        [w("w1", (5, 4), 1), w("b1", (4,), 2), w("w2", (3, 4), 3), w("b2", (3,), 4)],
    )
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), "mlp")


def conv_bn_relu6():
    nodes = [
        helper.make_node("Conv", ["x", "cw", "cb"], ["c"], name="conv", pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("BatchNormalization", ["c", "s", "bias", "mean", "var"], ["bn"], name="bn", epsilon=1e-5),
        helper.make_node("Clip", ["bn", "lo", "hi"], ["y"], name="relu6"),
    ]
    inits = [w("cw", (4, 3, 3, 3), 5), w("cb", (4,), 6), w("s", (4,), 7), w("bias", (4,), 8),
             w("mean", (4,), 9), numpy_helper.from_array(np.full((4,), 0.5, np.float32), "var"),
             numpy_helper.from_array(np.array(0.0, np.float32), "lo"),
             numpy_helper.from_array(np.array(6.0, np.float32), "hi")]
    g = helper.make_graph(
        nodes, "conv_bn_relu6",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, 4, 4])],
        inits,
    )
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "conv_bn_relu6")


def opset10_upgrades():
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["r"], name="sum", axes=[1], keepdims=1),
        helper.make_node("Squeeze", ["r"], ["s"], name="squeeze", axes=[1]),
        helper.make_node("Unsqueeze", ["s"], ["u"], name="unsqueeze", axes=[0]),
        helper.make_node("Split", ["x"], ["p", "q"], name="split", axis=1, split=[1, 2]),
        helper.make_node("Clip", ["q"], ["c"], name="clip_old", min=0.0, max=0.5),
    ]
    g = helper.make_graph(
        nodes, "opset10_upgrades",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("u", TensorProto.FLOAT, [1, 2]),
         helper.make_tensor_value_info("p", TensorProto.FLOAT, [2, 1]),
         helper.make_tensor_value_info("c", TensorProto.FLOAT, [2, 2])],
    )
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 10)]), "opset10_upgrades")


def shape_arith():
    # What exporters emit: the target shape of a Reshape computed from the input's shape.
    nodes = [
        helper.make_node("Shape", ["x"], ["shp"], name="shape"),
        helper.make_node("Gather", ["shp", "i0"], ["b"], name="get_batch", axis=0),
        helper.make_node("Gather", ["shp", "i1"], ["s"], name="get_seq", axis=0),
        helper.make_node("Unsqueeze", ["b", "ax0"], ["bu"], name="unsq_b"),
        helper.make_node("Unsqueeze", ["s", "ax0"], ["su"], name="unsq_s"),
        helper.make_node("Concat", ["bu", "su", "heads", "hd"], ["target"], name="concat", axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"], name="reshape"),
    ]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "i0"),
             numpy_helper.from_array(np.array(1, np.int64), "i1"),
             numpy_helper.from_array(np.array([0], np.int64), "ax0"),
             numpy_helper.from_array(np.array([2], np.int64), "heads"),
             numpy_helper.from_array(np.array([3], np.int64), "hd")]
    g = helper.make_graph(
        nodes, "shape_arith",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 2, 3])],
        inits,
    )
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), "shape_arith")


def constants():
    nodes = [
        helper.make_node("Constant", [], ["c_tensor"], name="k_tensor",
                         value=numpy_helper.from_array(np.array([[1, 2], [3, 4]], np.float32))),
        helper.make_node("Constant", [], ["c_float"], name="k_float", value_float=0.25),
        helper.make_node("Constant", [], ["c_floats"], name="k_floats", value_floats=[1.0, 2.0]),
        helper.make_node("Constant", [], ["c_int"], name="k_int", value_int=7),
        helper.make_node("Constant", [], ["c_ints"], name="k_ints", value_ints=[2, 2]),
        helper.make_node("Constant", [], ["c_sparse"], name="k_sparse",
                         sparse_value=helper.make_sparse_tensor(
                             numpy_helper.from_array(np.array([5.0, 6.0], np.float32), "v"),
                             numpy_helper.from_array(np.array([1, 3], np.int64), "i"), [4])),
        helper.make_node("Mul", ["c_tensor", "c_float"], ["m"], name="mul"),
        helper.make_node("Reshape", ["c_sparse", "c_ints"], ["sp"], name="reshape"),
        helper.make_node("Add", ["m", "sp"], ["y"], name="add"),
    ]
    g = helper.make_graph(
        nodes, "constants", [],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2]),
         helper.make_tensor_value_info("c_floats", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("c_int", TensorProto.INT64, [])],
    )
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "constants")


def if_capture():
    then_g = helper.make_graph(
        [helper.make_node("Add", ["x", "bias"], ["t"], name="then_add")], "then", [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, [3])])
    else_g = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["e"], name="else_neg")], "else", [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, [3])])
    nodes = [helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=then_g, else_branch=else_g)]
    g = helper.make_graph(
        nodes, "if_capture",
        [helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
        [numpy_helper.from_array(np.array([1.0, 2.0, 3.0], np.float32), "bias")],
    )
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)]), "if_capture")


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    for f in (mlp, conv_bn_relu6, opset10_upgrades, shape_arith, constants, if_capture):
        f()
    sys.exit(0)
