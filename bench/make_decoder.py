#!/usr/bin/env python3
"""Write a causal-LM decoder with a KV cache as ONNX, in the layout transformers/optimum
exports use for generation ("decoder with past"):

    inputs   input_ids                  int64 [batch, seq]
             attention_mask             int64 [batch, past_seq + seq]
             position_ids               int64 [batch, seq]
             past_key_values.N.key      float [batch, kv_heads, past_seq, head_dim]
             past_key_values.N.value    float [batch, kv_heads, past_seq, head_dim]
    outputs  logits                     float [batch, seq, vocab]
             present.N.key / .value     float [batch, kv_heads, past_seq + seq, head_dim]
                                        (Concat(past, new) along axis 2)

The same graph serves a prompt (past_seq = 0) and a decode step (seq = 1), and, with
the whole sequence as the prompt, the uncached reference that generation is checked
against. The attention mask is built the way transformers' eager attention builds it
(`fmin` where a key is in the future, `j > past + i`, or padded out by attention_mask),
from Shape/Range/Greater ops that fold once dims are bound.

--arch llama: LlamaForCausalLM (RMSNorm with f32 casts, q/k/v/o projections without
bias, rotary embeddings computed from position_ids (`inv_freq ⊗ positions`, cos/sin,
rotate_half), grouped-query K/V heads repeated by Unsqueeze/Expand/Reshape, SwiGLU MLP,
untied lm_head).
--arch gpt2: GPT2LMHeadModel (learned position embeddings gathered by position_ids,
LayerNorm, one fused c_attn Gemm split into q/k/v, tanh GELU, biases, tied lm_head).

Weights are N(0, 1) * 0.02 (--init-scale) from a fixed seed (norm scales 1 + that), float32. Models
over ~1.5 GiB (the TinyLlama-1.1B shape) need --external-data: protobuf stops at 2 GiB.

usage:
  bench/make_decoder.py -o model.onnx --arch llama [--layers 22 --hidden 2048 --heads 32
      --kv-heads 4 --ffn 5632 --vocab 32000] [--external-data]
  bench/make_decoder.py -o model.onnx --arch gpt2 [--layers 2 --hidden 96 --heads 3 ...]
  bench/make_decoder.py -o model.onnx --preset tinyllama   (the 1.1B shape; external data)
"""

import argparse
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FLOAT = TensorProto.FLOAT
F32 = np.float32
FMIN = float(np.finfo(np.float32).min)

PRESETS = {
    # TinyLlama-1.1B's shape (the decode benchmark of docs/benchmarks.md).
    "tinyllama": dict(arch="llama", layers=22, hidden=2048, heads=32, kv_heads=4, ffn=5632,
                      vocab=32000, max_pos=2048),
    # The repo's test decoders (tests/data/decoders/*_decoder).
    "test-llama": dict(arch="llama", layers=2, hidden=64, heads=4, kv_heads=2, ffn=176,
                       vocab=500, max_pos=256, init_scale=0.15),
    "test-gpt2": dict(arch="gpt2", layers=2, hidden=48, heads=3, kv_heads=None, ffn=192,
                      vocab=500, max_pos=256, init_scale=0.15),
    # The opset-24 form: a 64-slot cache updated by TensorScatter.
    "test-scatter": dict(arch="llama", layers=2, hidden=64, heads=4, kv_heads=2, ffn=176,
                         vocab=500, max_pos=256, init_scale=0.15, form="scatter", opset=24,
                         cache_len=64),
}


class Builder:
    def __init__(self, rng, scale):
        self.rng = rng
        self.scale = F32(scale)
        self.nodes = []
        self.inits = []
        self.counts = {}
        self.scope = ""
        self.params = 0

    def _name(self, op):
        key = (self.scope, op)
        k = self.counts.get(key, 0)
        self.counts[key] = k + 1
        return f"{self.scope}/{op}" + ("" if k == 0 else f"_{k}")

    def op(self, op, inputs, n_out=1, **attrs):
        name = self._name(op)
        outs = [f"{name}_output_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs[0] if n_out == 1 else outs

    def const(self, value, dtype=np.int64):
        arr = np.asarray(value, dtype=dtype)
        name = self._name("Constant")
        out = name + "_output_0"
        self.nodes.append(helper.make_node(
            "Constant", [], [out], name=name, value=numpy_helper.from_array(arr, out + "_value")))
        return out

    def weight(self, name, shape, base=0.0):
        arr = self.rng.standard_normal(shape, dtype=np.float32) * self.scale
        if base:
            arr += F32(base)
        self.inits.append(numpy_helper.from_array(arr, name))
        self.params += arr.size
        return name

    def dim(self, x, i):
        """Dim i of x as a 1-element int64 tensor (Shape -> Gather -> Unsqueeze)."""
        g = self.op("Gather", [self.op("Shape", [x]), self.const(i)], axis=0)
        return self.op("Unsqueeze", [g, self.const([0])])

    def cat(self, parts):
        return self.op("Concat", parts, axis=0)


def causal_mask(b):
    """[batch, 1, seq, total] additive mask: fmin where key j is after query i (j > past +
    i) or attention_mask[b, j] == 0, as transformers' eager attention builds it."""
    b.scope = "/model"
    total = b.op("Gather", [b.op("Shape", ["attention_mask"]), b.const(1)], axis=0)
    seq = b.op("Gather", [b.op("Shape", ["input_ids"]), b.const(1)], axis=0)
    past = b.op("Sub", [total, seq])
    q_pos = b.op("Reshape", [b.op("Range", [past, total, b.const(1)]), b.const([-1, 1])])
    k_pos = b.op("Range", [b.const(0), total, b.const(1)])
    future = b.op("Greater", [k_pos, q_pos])  # [seq, total]
    pad = b.op("Equal", ["attention_mask", b.const(0)])  # [batch, total]
    pad = b.op("Unsqueeze", [pad, b.const([1, 2])])  # [batch, 1, 1, total]
    hidden = b.op("Or", [b.op("Unsqueeze", [future, b.const([0, 1])]), pad])
    return b.op("Where", [hidden, b.const(FMIN, F32), b.const(0.0, F32)])


def attend(b, q, k, v, mask, hd, scale_op):
    """softmax(q·kᵀ·scale + mask)·v on [batch, heads, seq, hd] tensors."""
    kt = b.op("Transpose", [k], perm=[0, 1, 3, 2])
    s = b.op("MatMul", [q, kt])
    if scale_op == "mul":
        s = b.op("Mul", [s, b.const(hd ** -0.5, F32)])
    else:
        s = b.op("Div", [s, b.const(math.sqrt(hd), F32)])
    s = b.op("Add", [s, mask])
    p = b.op("Softmax", [s], axis=-1)
    return b.op("MatMul", [p, v])


def split_heads(b, t, hd):
    """[batch, seq, heads*hd] -> [batch, heads, seq, hd]."""
    shape = b.cat([b.dim(t, 0), b.dim(t, 1), b.const([-1]), b.const([hd])])
    return b.op("Transpose", [b.op("Reshape", [t, shape])], perm=[0, 2, 1, 3])


def merge_heads(b, t, like):
    t = b.op("Transpose", [t], perm=[0, 2, 1, 3])
    return b.op("Reshape", [t, b.cat([b.dim(like, 0), b.dim(like, 1), b.const([-1])])])


def with_past(b, new, i, which, presents, form="concat"):
    """The present output: Concat(past, new) along the sequence axis, or (form
    "scatter") TensorScatter(past, new, write_indices) into the fixed-size cache."""
    past = f"past_key_values.{i}.{which}"
    out = f"present.{i}.{which}"
    if form == "scatter":
        b.nodes.append(helper.make_node(
            "TensorScatter", [past, new, "write_indices"], [out], name=f"{b.scope}/cache_{which}", axis=2))
    else:
        b.nodes.append(helper.make_node("Concat", [past, new], [out], name=f"{b.scope}/cache_{which}", axis=2))
    presents.append(out)
    return out


def build_llama(a, b):
    kvh, hd = a.kv_heads or a.heads, a.hidden // a.heads
    n_rep = a.heads // kvh
    eps = 1e-6
    presents = []

    def linear(x, name, n_in, n_out):
        w = b.weight(name + ".weight", (n_in, n_out))  # nn.Linear stored transposed
        return b.op("MatMul", [x, w])

    def rms_norm(x, name):
        w = b.weight(name + ".weight", (a.hidden,), base=1.0)
        h = b.op("Cast", [x], to=FLOAT)
        var = b.op("ReduceMean", [b.op("Pow", [h, b.const(2.0, F32)]), b.const([-1])], keepdims=1)
        inv = b.op("Div", [b.const([1.0], F32), b.op("Sqrt", [b.op("Add", [var, b.const(eps, F32)])])])
        h = b.op("Cast", [b.op("Mul", [h, inv])], to=FLOAT)
        return b.op("Mul", [w, h])

    b.scope = "/model/embed_tokens"
    x = b.op("Gather", [b.weight("model.embed_tokens.weight", (a.vocab, a.hidden)), "input_ids"])

    b.scope = "/model/rotary_emb"
    inv = 1.0 / (a.rope_theta ** (np.arange(0, hd, 2, dtype=np.int64).astype(F32) / hd))
    b.inits.append(numpy_helper.from_array(inv.astype(F32), "model.rotary_emb.inv_freq"))
    ie = b.op("Unsqueeze", ["model.rotary_emb.inv_freq", b.const([0, 2])])  # [1, d/2, 1]
    ie = b.op("Expand", [ie, b.cat([b.dim("position_ids", 0), b.const([1, 1])])])
    pe = b.op("Cast", [b.op("Unsqueeze", ["position_ids", b.const([1])])], to=FLOAT)  # [b, 1, s]
    freqs = b.op("Transpose", [b.op("MatMul", [ie, pe])], perm=[0, 2, 1])  # [b, s, d/2]
    embs = b.op("Concat", [freqs, freqs], axis=-1)
    cos = b.op("Unsqueeze", [b.op("Cos", [embs]), b.const([1])])  # [b, 1, s, d]
    sin = b.op("Unsqueeze", [b.op("Sin", [embs]), b.const([1])])

    mask = causal_mask(b) if a.form == "concat" else None

    def rotate_half(t):
        x1 = b.op("Slice", [t, b.const([0]), b.const([hd // 2]), b.const([3]), b.const([1])])
        x2 = b.op("Slice", [t, b.const([hd // 2]), b.const([np.iinfo(np.int64).max]), b.const([3]), b.const([1])])
        return b.op("Concat", [b.op("Neg", [x2]), x1], axis=-1)

    def rotary(t):
        return b.op("Add", [b.op("Mul", [t, cos]), b.op("Mul", [rotate_half(t), sin])])

    def repeat_kv(t):
        if n_rep == 1:
            return t
        t = b.op("Unsqueeze", [t, b.const([2])])
        shp = b.cat([b.dim(t, 0), b.dim(t, 1), b.const([n_rep]), b.dim(t, 3), b.dim(t, 4)])
        out = b.cat([b.dim(t, 0), b.op("Mul", [b.dim(t, 1), b.const([n_rep])]), b.dim(t, 3), b.dim(t, 4)])
        return b.op("Reshape", [b.op("Expand", [t, shp]), out])

    for i in range(a.layers):
        p, sc = f"model.layers.{i}", f"/model/layers.{i}"
        b.scope = f"{sc}/input_layernorm"
        h = rms_norm(x, f"{p}.input_layernorm")
        b.scope = f"{sc}/self_attn"
        q = rotary(split_heads(b, linear(h, f"{p}.self_attn.q_proj", a.hidden, a.heads * hd), hd))
        k = rotary(split_heads(b, linear(h, f"{p}.self_attn.k_proj", a.hidden, kvh * hd), hd))
        v = split_heads(b, linear(h, f"{p}.self_attn.v_proj", a.hidden, kvh * hd), hd)
        k = with_past(b, k, i, "key", presents, a.form)
        v = with_past(b, v, i, "value", presents, a.form)
        if a.form == "scatter":
            # ONNX Attention (opset 24): grouped-query heads read as they are, causal
            # from each row's block start, keys past nonpad_kv_seqlen masked.
            o = b.op("Attention", [q, k, v, "", "", "", "nonpad_kv_seqlen"], is_causal=1)
        else:
            o = attend(b, q, repeat_kv(k), repeat_kv(v), mask, hd, "mul")
        o = linear(merge_heads(b, o, h), f"{p}.self_attn.o_proj", a.heads * hd, a.hidden)
        b.scope = sc
        x = b.op("Add", [x, o])
        b.scope = f"{sc}/post_attention_layernorm"
        h = rms_norm(x, f"{p}.post_attention_layernorm")
        b.scope = f"{sc}/mlp"
        g = linear(h, f"{p}.mlp.gate_proj", a.hidden, a.ffn)
        g = b.op("Mul", [g, b.op("Sigmoid", [g])])
        u = linear(h, f"{p}.mlp.up_proj", a.hidden, a.ffn)
        d = linear(b.op("Mul", [g, u]), f"{p}.mlp.down_proj", a.ffn, a.hidden)
        b.scope = sc
        x = b.op("Add", [x, d])

    b.scope = "/model/norm"
    x = rms_norm(x, "model.norm")
    b.scope = "/lm_head"
    w = b.weight("lm_head.weight", (a.hidden, a.vocab))
    b.nodes.append(helper.make_node("MatMul", [x, w], ["logits"], name="/lm_head/MatMul"))
    return presents, kvh, hd


def build_gpt2(a, b):
    hd = a.hidden // a.heads
    presents = []

    def layer_norm(x, name):
        g = b.weight(name + ".weight", (a.hidden,), base=1.0)
        be = b.weight(name + ".bias", (a.hidden,))
        return b.op("LayerNormalization", [x, g, be], axis=-1, epsilon=1e-5)

    def conv1d(x, name, n_in, n_out):  # transformers' Conv1D: x @ W + b, exported as Gemm
        w = b.weight(name + ".weight", (n_in, n_out))
        bias = b.weight(name + ".bias", (n_out,))
        flat = b.op("Reshape", [x, b.const([-1, n_in])])
        y = b.op("Gemm", [flat, w, bias])
        return b.op("Reshape", [y, b.cat([b.dim(x, 0), b.dim(x, 1), b.const([n_out])])])

    def gelu_tanh(x):
        half = b.op("Mul", [b.const(0.5, F32), x])
        cube = b.op("Pow", [x, b.const(3.0, F32)])
        s = b.op("Add", [x, b.op("Mul", [b.const(0.044715, F32), cube])])
        t = b.op("Tanh", [b.op("Mul", [b.const(math.sqrt(2.0 / math.pi), F32), s])])
        return b.op("Mul", [half, b.op("Add", [b.const(1.0, F32), t])])

    b.scope = "/transformer"
    wte = b.weight("transformer.wte.weight", (a.vocab, a.hidden))
    wpe = b.weight("transformer.wpe.weight", (a.max_pos, a.hidden))
    x = b.op("Add", [b.op("Gather", [wte, "input_ids"]), b.op("Gather", [wpe, "position_ids"])])
    mask = causal_mask(b)

    for i in range(a.layers):
        p, sc = f"transformer.h.{i}", f"/transformer/h.{i}"
        b.scope = f"{sc}/attn"
        h = layer_norm(x, f"{p}.ln_1")
        qkv = conv1d(h, f"{p}.attn.c_attn", a.hidden, 3 * a.hidden)
        q, k, v = b.op("Split", [qkv, b.const([a.hidden] * 3)], n_out=3, axis=2)
        q, k, v = (split_heads(b, t, hd) for t in (q, k, v))
        k = with_past(b, k, i, "key", presents)
        v = with_past(b, v, i, "value", presents)
        o = attend(b, q, k, v, mask, hd, "div")
        o = conv1d(merge_heads(b, o, h), f"{p}.attn.c_proj", a.hidden, a.hidden)
        b.scope = sc
        x = b.op("Add", [o, x])
        b.scope = f"{sc}/mlp"
        h = layer_norm(x, f"{p}.ln_2")
        h = gelu_tanh(conv1d(h, f"{p}.mlp.c_fc", a.hidden, a.ffn))
        h = conv1d(h, f"{p}.mlp.c_proj", a.ffn, a.hidden)
        b.scope = sc
        x = b.op("Add", [x, h])

    b.scope = "/transformer/ln_f"
    x = layer_norm(x, "transformer.ln_f")
    # Tied lm_head: logits = x · wteᵀ.
    b.nodes.append(helper.make_node(
        "Transpose", [wte], ["lm_head.weight_t"], name="/lm_head/Transpose", perm=[1, 0]))
    b.nodes.append(helper.make_node("MatMul", [x, "lm_head.weight_t"], ["logits"], name="/lm_head/MatMul"))
    return presents, a.heads, hd


def build(a):
    if a.hidden % a.heads:
        sys.exit(f"--hidden {a.hidden} is not a multiple of --heads {a.heads}")
    kvh = a.kv_heads or a.heads
    if a.heads % kvh:
        sys.exit(f"--heads {a.heads} is not a multiple of --kv-heads {kvh}")
    if a.arch == "gpt2" and kvh != a.heads:
        sys.exit("--arch gpt2 has no grouped-query heads (leave --kv-heads out)")
    if a.form == "scatter" and (a.arch != "llama" or a.opset < 24):
        sys.exit("--form scatter is the llama decoder at --opset 24 or later")
    b = Builder(np.random.default_rng(a.seed), a.init_scale)
    presents, kvh, hd = (build_llama if a.arch == "llama" else build_gpt2)(a, b)

    batch, seq, past = "batch_size", "sequence_length", "past_sequence_length"
    total = "past_sequence_length + sequence_length"
    if a.form == "scatter":
        past = total = a.cache_len
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [batch, seq])]
    if a.form == "concat":
        inputs.append(helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [batch, total]))
    inputs.append(helper.make_tensor_value_info("position_ids", TensorProto.INT64, [batch, seq]))
    if a.form == "scatter":
        inputs += [helper.make_tensor_value_info(n, TensorProto.INT64, [batch])
                   for n in ("write_indices", "nonpad_kv_seqlen")]
    for i in range(a.layers):
        for which in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(
                f"past_key_values.{i}.{which}", FLOAT, [batch, kvh, past, hd]))
    outputs = [helper.make_tensor_value_info("logits", FLOAT, [batch, seq, a.vocab])]
    outputs += [helper.make_tensor_value_info(p, FLOAT, [batch, kvh, total, hd]) for p in presents]
    name = f"{a.arch}_decoder_{a.layers}l_{a.hidden}h_{a.heads}q{kvh}kv"
    graph = helper.make_graph(b.nodes, name, inputs, outputs, initializer=b.inits)
    opsets = [helper.make_opsetid("", a.opset)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="gopt bench/make_decoder.py",
                              ir_version=helper.find_min_ir_version_for(opsets))
    return model, b.params


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--preset", choices=sorted(PRESETS), help="a named shape (overrides the sizes)")
    ap.add_argument("--arch", choices=["llama", "gpt2"], default="llama")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=None, help="llama: grouped-query K/V heads")
    ap.add_argument("--ffn", type=int, default=176)
    ap.add_argument("--vocab", type=int, default=500)
    ap.add_argument("--max-pos", type=int, default=256, help="gpt2: position-embedding rows")
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--opset", type=int, default=18)
    ap.add_argument("--form", choices=["concat", "scatter"], default="concat",
                    help="how the cache is kept: concat (optimum's decoder with past) or "
                         "scatter (opset 24: a fixed-size cache updated by TensorScatter at "
                         "input write_indices, attention masked by nonpad_kv_seqlen)")
    ap.add_argument("--cache-len", type=int, default=64, help="--form scatter: the cache's length")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--init-scale", type=float, default=0.02,
                    help="weights are N(0, 1) times this (larger makes greedy tokens of a tiny "
                         "random model depend more on the context)")
    ap.add_argument("--external-data", action="store_true",
                    help="weights in MODEL.onnx.data beside the graph (needed past 2 GiB)")
    a = ap.parse_args(argv)
    if a.preset:
        for k, v in PRESETS[a.preset].items():
            setattr(a, k, v)
    model, params = build(a)
    out = os.path.abspath(a.output)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    if a.external_data:
        data = os.path.basename(out) + ".data"
        if os.path.exists(out + ".data"):
            os.remove(out + ".data")
        onnx.save_model(model, out, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=data, size_threshold=1024)
    else:
        with open(out, "wb") as f:
            f.write(model.SerializeToString(deterministic=True))
    print(f"{a.output}: {a.arch} decoder with past ({a.form}), {a.layers} layers, hidden {a.hidden}, "
          f"heads {a.heads}/{a.kv_heads or a.heads}, ffn {a.ffn}, vocab {a.vocab}: "
          f"{len(model.graph.node)} nodes, {params} params")


if __name__ == "__main__":
    main()
