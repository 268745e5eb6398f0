#!/usr/bin/env python3
"""Write a synthetic BERT/GPT-style transformer encoder stack as an ONNX model.

The graph mirrors what `torch.onnx.export` (TorchScript exporter) produces for a
Hugging Face BertModel (see tests/data/models/bert_small): word + position + token-type
embedding Gathers and a norm, then per layer

    Q/K/V: MatMul + Add(bias) -> Reshape [batch, seq, heads, head_dim]
           -> Transpose [0,2,1,3]   (K: [0,2,3,1])
    scores = MatMul(Q, K) * 1/sqrt(head_dim) + mask -> Softmax(axis=-1)
    ctx    = MatMul(scores, V) -> Transpose [0,2,1,3] -> Reshape [batch, seq, hidden]
    dense MatMul + Add -> residual Add -> norm
    FFN MatMul + Add -> GELU -> MatMul + Add -> residual Add -> norm

and the output `last_hidden_state` [batch, seq, hidden]. Inputs are `input_ids` and
`attention_mask`, int64 [batch, seq]; `batch` and `seq` are symbolic unless --seq N.

With --shape-ops torch (default) the Reshape targets are computed the way the exporter
does it: Shape -> Gather -> Unsqueeze -> Concat per layer (bound and folded by
`gopt compile --bind`). With --shape-ops const they are constants with 0 / -1.

Weights are float32 N(0, 1) * 0.02 from a fixed seed (norm scales 1 + that).

With --arch llama the graph is instead a Llama-style decoder as the TorchScript exporter
(`torch.onnx.export(dynamo=False)`) writes transformers' LlamaForCausalLM with
`attn_implementation="eager"`: input `input_ids` only, output `logits` [batch, seq,
vocab]; the embedding Gather, then per layer

    RMSNorm (transformers' form, f32 -> f32 Casts included):
        Cast, Pow(x, 2), ReduceMean(-1, keepdims), Add(eps), Sqrt, Div(1, .) (--rsqrt
        div, torch's rsqrt) or Reciprocal (--rsqrt reciprocal), Mul(x, .), Cast,
        Mul(weight, .)
    Q/K/V: MatMul (no bias; K and V with --kv-heads heads) -> Reshape [b, s, -1, d]
           -> Transpose [0,2,1,3]
    rotary (apply_rotary_pos_emb): q*cos + rotate_half(q)*sin, rotate_half(x) =
           Concat(Neg(Slice(x, d/2:)), Slice(x, :d/2)) on the last axis; cos/sin
           [b, 1, s, d] from position ids (Range, Unsqueeze, MatMul, Concat, Cos, Sin)
    repeat_kv: Unsqueeze(2), Expand [b, hkv, n_rep, s, d], Reshape [b, h, s, d]
    scores = MatMul(Q, Transpose(K, [0,1,3,2])) * d^-1/2 + causal mask (full(min),
           Trilu, Range/Greater/Mul, Expand, Slice), Cast, Softmax(-1), Cast
    ctx    = MatMul(scores, V) -> Transpose [0,2,1,3] -> Reshape [b, s, -1] -> o_proj
           -> residual Add
    MLP: RMSNorm -> down(silu(gate(x)) * up(x)), silu(x) = x * Sigmoid(x) -> residual Add

then a final RMSNorm and lm_head. With --shape-ops torch the shapes, positions and mask
come from Shape/Gather/Concat/Range sub-graphs that fold at bind time; with const they are
constants (needs --seq).

Usage:
  bench/make_transformer.py -o model.onnx [--layers 12] [--hidden 768] [--heads 12]
      [--ffn 3072] [--vocab 30522] [--max-pos 512] [--seq N] [--causal]
      [--norm layernorm|decomposed|rms] [--gelu erf|tanh] [--eps E]
      [--shape-ops torch|const] [--opset 17] [--seed 0]
  bench/make_transformer.py -o model.onnx --arch llama [--kv-heads N]
      [--rope-theta 10000] [--rsqrt div|reciprocal] [...the sizes above]
"""

import argparse
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class Builder:
    """Accumulates nodes and initializers with torch-export-like value names."""

    def __init__(self, opset, rng):
        self.opset = opset
        self.rng = rng
        self.nodes = []
        self.inits = []
        self.params = 0
        self.counts = {}
        self.scope = ""

    def _name(self, op):
        key = (self.scope, op)
        k = self.counts.get(key, 0)
        self.counts[key] = k + 1
        suffix = "" if k == 0 else f"_{k}"
        return f"{self.scope}/{op}{suffix}_output_0"

    def op(self, op, inputs, **attrs):
        out = self._name(op)
        self.nodes.append(helper.make_node(op, inputs, [out], name=out[: -len("_output_0")], **attrs))
        return out

    def const(self, value, dtype=np.int64):
        """A Constant node (torch exports scalars and shape pieces this way)."""
        arr = np.asarray(value, dtype=dtype)
        out = self._name("Constant")
        self.nodes.append(
            helper.make_node(
                "Constant", [], [out], name=out[: -len("_output_0")],
                value=numpy_helper.from_array(arr, out + "_value"),
            )
        )
        return out

    def weight(self, name, shape, base=0.0):
        arr = self.rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
        if base:
            arr += np.float32(base)
        return self.init(name, arr, count=True)

    def init(self, name, arr, count=False):
        self.inits.append(numpy_helper.from_array(arr, name))
        if count:
            self.params += arr.size
        return name

    # -- building blocks ------------------------------------------------------------

    def reduce_mean_last(self, x):
        if self.opset >= 18:
            return self.op("ReduceMean", [x, self.const([-1])], keepdims=1)
        return self.op("ReduceMean", [x], axes=[-1], keepdims=1)

    def norm(self, kind, x, prefix, hidden, eps):
        gamma = self.weight(f"{prefix}.weight", (hidden,), base=1.0)
        if kind == "layernorm":
            beta = self.weight(f"{prefix}.bias", (hidden,))
            return self.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=eps)
        if kind == "decomposed":
            beta = self.weight(f"{prefix}.bias", (hidden,))
            mean = self.reduce_mean_last(x)
            d = self.op("Sub", [x, mean])
            sq = self.op("Pow", [d, self.const(2.0, np.float32)])
            var = self.reduce_mean_last(sq)
            ve = self.op("Add", [var, self.const(eps, np.float32)])
            std = self.op("Sqrt", [ve])
            y = self.op("Div", [d, std])
            y = self.op("Mul", [y, gamma])
            return self.op("Add", [y, beta])
        if kind == "rms":
            sq = self.op("Pow", [x, self.const(2.0, np.float32)])
            ms = self.reduce_mean_last(sq)
            me = self.op("Add", [ms, self.const(eps, np.float32)])
            rms = self.op("Sqrt", [me])
            y = self.op("Div", [x, rms])
            return self.op("Mul", [y, gamma])
        raise ValueError(kind)

    def gelu(self, kind, x):
        if kind == "erf":  # BERT: x * 0.5 * (1 + erf(x / sqrt(2)))
            d = self.op("Div", [x, self.const(math.sqrt(2.0), np.float32)])
            e = self.op("Erf", [d])
            a = self.op("Add", [e, self.const(1.0, np.float32)])
            m = self.op("Mul", [x, a])
            return self.op("Mul", [m, self.const(0.5, np.float32)])
        if kind == "tanh":  # GPT-2: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
            half = self.op("Mul", [self.const(0.5, np.float32), x])
            cube = self.op("Pow", [x, self.const(3.0, np.float32)])
            c = self.op("Mul", [self.const(0.044715, np.float32), cube])
            s = self.op("Add", [x, c])
            t = self.op("Mul", [self.const(math.sqrt(2.0 / math.pi), np.float32), s])
            t = self.op("Tanh", [t])
            a = self.op("Add", [self.const(1.0, np.float32), t])
            return self.op("Mul", [half, a])
        raise ValueError(kind)

    def linear(self, x, prefix, n_in, n_out):
        w = self.weight(f"{prefix}.weight", (n_in, n_out))
        b = self.weight(f"{prefix}.bias", (n_out,))
        scope = self.scope
        self.scope = f"{scope}/{prefix.split('.')[-1]}"
        y = self.op("MatMul", [x, w])
        y = self.op("Add", [b, y])  # torch puts the bias first
        self.scope = scope
        return y


def build(a):
    if a.hidden % a.heads:
        sys.exit(f"--hidden {a.hidden} is not a multiple of --heads {a.heads}")
    if a.causal and a.seq is None:
        sys.exit("--causal needs a fixed --seq N (the causal mask is a constant [1,1,N,N])")
    if a.norm == "layernorm" and a.opset < 17:
        sys.exit("--norm layernorm needs --opset >= 17 (LayerNormalization)")
    if a.seq is not None and a.seq > a.max_pos:
        sys.exit(f"--seq {a.seq} is larger than --max-pos {a.max_pos}")
    eps = a.eps if a.eps is not None else (1e-6 if a.norm == "rms" else 1e-12)
    hd = a.hidden // a.heads
    b = Builder(a.opset, np.random.default_rng(a.seed))
    f32 = np.float32

    # ---- embeddings ----------------------------------------------------------------
    b.scope = "/embeddings"
    word = b.weight("embeddings.word_embeddings.weight", (a.vocab, a.hidden))
    pos_tab = b.weight("embeddings.position_embeddings.weight", (a.max_pos, a.hidden))
    tt_tab = b.weight("embeddings.token_type_embeddings.weight", (2, a.hidden))
    pos_ids = b.init("embeddings.position_ids", np.arange(a.max_pos, dtype=np.int64)[None, :])
    shape = b.op("Shape", ["input_ids"])
    seq_len = b.op("Gather", [shape, b.const(1)], axis=0)
    end = b.op("Unsqueeze", [seq_len, b.const([0])])
    pos = b.op("Slice", [pos_ids, b.const([0]), end, b.const([1]), b.const([1])])
    tt_ids = b.op("ConstantOfShape", [shape], value=numpy_helper.from_array(np.zeros(1, np.int64)))
    x = b.op("Gather", [word, "input_ids"])
    tt = b.op("Gather", [tt_tab, tt_ids])
    x = b.op("Add", [x, tt])
    pe = b.op("Gather", [pos_tab, pos])
    x = b.op("Add", [x, pe])
    x = b.norm(a.norm, x, "embeddings.LayerNorm", a.hidden, eps)

    # ---- additive attention mask [batch, 1, 1|seq, seq] -------------------------------
    b.scope = ""
    m = b.op("Unsqueeze", ["attention_mask", b.const([1])])
    m = b.op("Unsqueeze", [m, b.const([2])])
    m = b.op("Cast", [m], to=TensorProto.FLOAT)
    m = b.op("Sub", [b.const(1.0, f32), m])
    mask = b.op("Mul", [m, b.const(-10000.0, f32)])
    if a.causal:
        tri = np.tril(np.ones((a.seq, a.seq), dtype=bool))
        causal = np.where(tri, 0.0, -10000.0).astype(f32)[None, None]
        cm = b.init("causal_mask", causal)
        mask = b.op("Add", [cm, mask])

    # ---- encoder layers --------------------------------------------------------------
    for i in range(a.layers):
        p = f"encoder.layer.{i}"
        b.scope = f"/encoder/layer.{i}/attention/self"
        if a.shape_ops == "torch":
            bsz = b.op("Gather", [b.op("Shape", [x]), b.const(0)], axis=0)
            sq = b.op("Gather", [b.op("Shape", [x]), b.const(1)], axis=0)

            def dims(*tail):
                u0 = b.op("Unsqueeze", [bsz, b.const([0])])
                u1 = b.op("Unsqueeze", [sq, b.const([0])])
                return b.op("Concat", [u0, u1] + [b.const([t]) for t in tail], axis=0)

            split_q, split_k, split_v = (dims(a.heads, hd) for _ in range(3))
        else:
            split_q = split_k = split_v = b.const([0, 0, a.heads, hd])

        q = b.linear(x, f"{p}.attention.self.query", a.hidden, a.hidden)
        q = b.op("Transpose", [b.op("Reshape", [q, split_q])], perm=[0, 2, 1, 3])
        k = b.linear(x, f"{p}.attention.self.key", a.hidden, a.hidden)
        k = b.op("Reshape", [k, split_k])
        v = b.linear(x, f"{p}.attention.self.value", a.hidden, a.hidden)
        v = b.op("Transpose", [b.op("Reshape", [v, split_v])], perm=[0, 2, 1, 3])
        k = b.op("Transpose", [k], perm=[0, 2, 3, 1])
        s = b.op("MatMul", [q, k])
        s = b.op("Mul", [s, b.const(1.0 / math.sqrt(hd), f32)])
        s = b.op("Add", [s, mask])
        s = b.op("Softmax", [s], axis=-1)
        c = b.op("MatMul", [s, v])
        c = b.op("Transpose", [c], perm=[0, 2, 1, 3])
        if a.shape_ops == "torch":
            merge = dims(-1)
        else:
            merge = b.const([0, 0, a.hidden])
        c = b.op("Reshape", [c, merge])

        b.scope = f"/encoder/layer.{i}/attention/output"
        y = b.linear(c, f"{p}.attention.output.dense", a.hidden, a.hidden)
        y = b.op("Add", [y, x])
        x = b.norm(a.norm, y, f"{p}.attention.output.LayerNorm", a.hidden, eps)

        b.scope = f"/encoder/layer.{i}/intermediate"
        h = b.linear(x, f"{p}.intermediate.dense", a.hidden, a.ffn)
        b.scope = f"/encoder/layer.{i}/intermediate/intermediate_act_fn"
        h = b.gelu(a.gelu, h)
        b.scope = f"/encoder/layer.{i}/output"
        y = b.linear(h, f"{p}.output.dense", a.ffn, a.hidden)
        y = b.op("Add", [y, x])
        x = b.norm(a.norm, y, f"{p}.output.LayerNorm", a.hidden, eps)

    # the last node's output becomes the graph output
    last = b.nodes[-1]
    last.output[0] = "last_hidden_state"

    seq_dim = a.seq if a.seq is not None else "seq"
    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", seq_dim]),
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", seq_dim]),
    ]
    outputs = [
        helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", seq_dim, a.hidden])
    ]
    name = "synthetic_" + ("gpt" if a.causal else "bert") + f"_{a.layers}l_{a.hidden}h"
    graph = helper.make_graph(b.nodes, name, inputs, outputs, initializer=b.inits)
    opsets = [helper.make_opsetid("", a.opset)]
    model = helper.make_model(
        graph, opset_imports=opsets, producer_name="gopt bench/make_transformer.py",
        ir_version=helper.find_min_ir_version_for(opsets),
    )
    return model, b.params


class LlamaShapes:
    """Shape pieces as the exporter computes them (Shape -> Gather -> Unsqueeze ->
    Concat, folded at bind time) or as constants (--shape-ops const). `cat` takes
    `(value, axis)` for a dim of a value and lists for constant pieces."""

    def __init__(self, b, a, hd):
        self.b, self.a, self.hd = b, a, hd
        self.torch = a.shape_ops == "torch"

    def dim(self, x, i):
        """Dim i of x as a 1-element int64 tensor."""
        b = self.b
        if not self.torch:
            return b.const([self.fixed(i)])
        g = b.op("Gather", [b.op("Shape", [x]), b.const(i)], axis=0)
        return b.op("Unsqueeze", [g, b.const([0])])

    def fixed(self, i):
        return {0: 1, 1: self.a.seq}[i]

    def cat(self, parts):
        b = self.b
        if not self.torch:
            vals = []
            for p in parts:
                vals += [self.fixed(p[1])] if isinstance(p, tuple) else list(p)
            return b.const(vals)
        ins = [self.dim(p[0], p[1]) if isinstance(p, tuple) else b.const(list(p)) for p in parts]
        return b.op("Concat", ins, axis=0)


def build_llama(a):
    """A LlamaForCausalLM-style decoder, as torch.onnx.export(dynamo=False) writes it."""
    kvh = a.kv_heads or a.heads
    if a.hidden % a.heads or a.heads % kvh:
        sys.exit(f"--hidden {a.hidden} / --heads {a.heads} / --kv-heads {kvh} do not divide")
    if a.shape_ops == "const" and a.seq is None:
        sys.exit("--arch llama --shape-ops const needs a fixed --seq N")
    hd = a.hidden // a.heads
    if hd % 2:
        sys.exit(f"head size {hd} must be even (rotary halves)")
    n_rep = a.heads // kvh
    eps = a.eps if a.eps is not None else 1e-6
    b = Builder(a.opset, np.random.default_rng(a.seed))
    sh = LlamaShapes(b, a, hd)
    f32 = np.float32
    FLOAT = TensorProto.FLOAT

    def linear(x, name, n_in, n_out):
        # nn.Linear(bias=False): the exporter stores W transposed, [in, out]
        w = b.weight(name + ".weight", (n_in, n_out))
        scope = b.scope
        b.scope = f"{scope}/{name.split('.')[-1]}"
        y = b.op("MatMul", [x, w])
        b.scope = scope
        return y

    def rms_norm(x, name, scope):
        saved, b.scope = b.scope, scope
        w = b.weight(name + ".weight", (a.hidden,), base=1.0)
        h = b.op("Cast", [x], to=FLOAT)  # hidden_states.to(torch.float32)
        var = b.reduce_mean_last(b.op("Pow", [h, b.const(2.0, f32)]))
        std = b.op("Sqrt", [b.op("Add", [var, b.const(eps, f32)])])
        if a.rsqrt == "div":  # torch's rsqrt symbolic: Div(ones(1), Sqrt(x))
            inv = b.op("Div", [b.const([1.0], f32), std])
        else:
            inv = b.op("Reciprocal", [std])
        h = b.op("Mul", [h, inv])
        h = b.op("Cast", [h], to=FLOAT)  # .to(input_dtype)
        y = b.op("Mul", [w, h])
        b.scope = saved
        return y

    # ---- embeddings, positions, rotary tables, causal mask ------------------------------
    b.scope = "/model/embed_tokens"
    emb = b.weight("model.embed_tokens.weight", (a.vocab, a.hidden))
    x = b.op("Gather", [emb, "input_ids"])
    b.scope = "/model"
    if sh.torch:
        s_len = b.op("Gather", [b.op("Shape", [x]), b.const(1)], axis=0)
        end = b.op("Add", [b.const(0), s_len])
        cache_pos = b.op("Range", [b.const(0), end, b.const(1)])
    else:
        cache_pos = b.const(np.arange(a.seq))
    pos_ids = b.op("Unsqueeze", [cache_pos, b.const([0])])  # [1, s]

    b.scope = "/model/rotary_emb"
    inv = 1.0 / (a.rope_theta ** (np.arange(0, hd, 2, dtype=np.int64).astype(f32) / hd))
    inv_freq = b.init("model.rotary_emb.inv_freq", inv.astype(f32))
    ie = b.op("Unsqueeze", [inv_freq, b.const([0])])
    ie = b.op("Unsqueeze", [ie, b.const([2])])
    ie = b.op("Cast", [ie], to=FLOAT)
    ie = b.op("Expand", [ie, sh.cat([(pos_ids, 0), [1], [1]])])  # [b, d/2, 1]
    pe = b.op("Unsqueeze", [pos_ids, b.const([1])])
    pe = b.op("Cast", [pe], to=FLOAT)  # [b, 1, s]
    freqs = b.op("Transpose", [b.op("MatMul", [ie, pe])], perm=[0, 2, 1])  # [b, s, d/2]
    embs = b.op("Concat", [freqs, freqs], axis=-1)
    cos = b.op("Cast", [b.op("Mul", [b.op("Cos", [embs]), b.const(1.0, f32)])], to=FLOAT)
    sin = b.op("Cast", [b.op("Mul", [b.op("Sin", [embs]), b.const(1.0, f32)])], to=FLOAT)

    b.scope = "/model"
    # _prepare_4d_causal_attention_mask_with_cache_position (no attention_mask given)
    fmin = np.finfo(np.float32).min
    if sh.torch:
        sq = sh.cat([(x, 1), (x, 1)])
        full = b.op("ConstantOfShape", [sq], value=numpy_helper.from_array(np.array([fmin], f32)))
        tri = b.op("Trilu", [full, b.const(1)], upper=1)
        ar = b.op("Range", [b.const(0), s_len, b.const(1)])
        cp = b.op("Reshape", [cache_pos, b.const([-1, 1])])
        gt = b.op("Cast", [b.op("Greater", [ar, cp])], to=FLOAT)
        m = b.op("Mul", [tri, gt])
        m = b.op("Unsqueeze", [m, b.const([0, 1])])
        m = b.op("Expand", [m, sh.cat([(x, 0), [1], (x, 1), (x, 1)])])
        mask = b.op("Slice", [m, b.const([0]), sh.dim(x, 1), b.const([3]), b.const([1])])
    else:
        tri = np.triu(np.full((a.seq, a.seq), fmin, f32), 1)
        mask = b.init("causal_mask", tri[None, None])

    def rotate_half(t):
        if sh.torch:
            half = b.op("Div", [b.op("Gather", [b.op("Shape", [t]), b.const(3)], axis=0), b.const(2)])
            half = b.op("Unsqueeze", [half, b.const([0])])
        else:
            half = b.const([hd // 2])
        x1 = b.op("Slice", [t, b.const([0]), half, b.const([3]), b.const([1])])
        x2 = b.op("Slice", [t, half, b.const([np.iinfo(np.int64).max]), b.const([3]), b.const([1])])
        return b.op("Concat", [b.op("Neg", [x2]), x1], axis=-1)

    def rotary(t, c, s_):
        return b.op("Add", [b.op("Mul", [t, c]), b.op("Mul", [rotate_half(t), s_])])

    def heads(t, like):
        t = b.op("Reshape", [t, sh.cat([(like, 0), (like, 1), [-1], [hd]])])
        return b.op("Transpose", [t], perm=[0, 2, 1, 3])

    def repeat_kv(t):
        if n_rep == 1:
            return t
        t = b.op("Unsqueeze", [t, b.const([2])])
        if sh.torch:
            shp = b.op("Concat", [sh.dim(t, 0), sh.dim(t, 1), b.const([n_rep]), sh.dim(t, 3), sh.dim(t, 4)], axis=0)
            hq = b.op("Mul", [sh.dim(t, 1), b.const([n_rep])])
            out = b.op("Concat", [sh.dim(t, 0), hq, sh.dim(t, 3), sh.dim(t, 4)], axis=0)
        else:
            shp = b.const([1, kvh, n_rep, a.seq, hd])
            out = b.const([1, a.heads, a.seq, hd])
        return b.op("Reshape", [b.op("Expand", [t, shp]), out])

    # ---- decoder layers ----------------------------------------------------------------
    for i in range(a.layers):
        p = f"model.layers.{i}"
        sc = f"/model/layers.{i}"
        h = rms_norm(x, f"{p}.input_layernorm", f"{sc}/input_layernorm")
        b.scope = f"{sc}/self_attn"
        q = heads(linear(h, f"{p}.self_attn.q_proj", a.hidden, a.heads * hd), h)
        k = heads(linear(h, f"{p}.self_attn.k_proj", a.hidden, kvh * hd), h)
        v = heads(linear(h, f"{p}.self_attn.v_proj", a.hidden, kvh * hd), h)
        c = b.op("Unsqueeze", [cos, b.const([1])])
        s_ = b.op("Unsqueeze", [sin, b.const([1])])
        q = rotary(q, c, s_)
        k = rotary(k, c, s_)
        k = repeat_kv(k)
        v = repeat_kv(v)
        sc_ = b.op("Mul", [b.op("MatMul", [q, b.op("Transpose", [k], perm=[0, 1, 3, 2])]), b.const(hd ** -0.5, f32)])
        sc_ = b.op("Add", [sc_, mask])
        pr = b.op("Cast", [b.op("Softmax", [b.op("Cast", [sc_], to=FLOAT)], axis=-1)], to=FLOAT)
        o = b.op("Transpose", [b.op("MatMul", [pr, v])], perm=[0, 2, 1, 3])
        o = b.op("Reshape", [o, sh.cat([(h, 0), (h, 1), [-1]])])
        o = linear(o, f"{p}.self_attn.o_proj", a.heads * hd, a.hidden)
        b.scope = sc
        x = b.op("Add", [x, o])
        h = rms_norm(x, f"{p}.post_attention_layernorm", f"{sc}/post_attention_layernorm")
        b.scope = f"{sc}/mlp"
        g = linear(h, f"{p}.mlp.gate_proj", a.hidden, a.ffn)
        b.scope = f"{sc}/mlp/act_fn"
        g = b.op("Mul", [g, b.op("Sigmoid", [g])])
        b.scope = f"{sc}/mlp"
        u = linear(h, f"{p}.mlp.up_proj", a.hidden, a.ffn)
        d = linear(b.op("Mul", [g, u]), f"{p}.mlp.down_proj", a.ffn, a.hidden)
        b.scope = sc
        x = b.op("Add", [x, d])

    x = rms_norm(x, "model.norm", "/model/norm")
    b.scope = "/lm_head"
    logits = linear(x, "lm_head", a.hidden, a.vocab)
    b.nodes[-1].output[0] = "logits"
    assert logits == b.nodes[-1].name + "_output_0"

    seq_dim = a.seq if a.seq is not None else "seq"
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", seq_dim])]
    outputs = [helper.make_tensor_value_info("logits", FLOAT, ["batch", seq_dim, a.vocab])]
    name = f"synthetic_llama_{a.layers}l_{a.hidden}h_{a.heads}q{kvh}kv"
    graph = helper.make_graph(b.nodes, name, inputs, outputs, initializer=b.inits)
    opsets = [helper.make_opsetid("", a.opset)]
    model = helper.make_model(
        graph, opset_imports=opsets, producer_name="gopt bench/make_transformer.py",
        ir_version=helper.find_min_ir_version_for(opsets),
    )
    return model, b.params


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Write a synthetic BERT/GPT-style transformer encoder as ONNX.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("-o", "--output", required=True, help="the .onnx file to write")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--ffn", type=int, default=3072)
    ap.add_argument("--vocab", type=int, default=30522, help="embedding rows (1000 keeps files small)")
    ap.add_argument("--max-pos", type=int, default=512, help="position-embedding rows")
    ap.add_argument("--seq", type=int, default=None, help="fixed sequence length (default: symbolic `seq`)")
    ap.add_argument("--causal", action="store_true",
                    help="GPT-style constant causal mask added to the padding mask (needs --seq)")
    ap.add_argument("--norm", choices=["layernorm", "decomposed", "rms"], default="layernorm")
    ap.add_argument("--gelu", choices=["erf", "tanh"], default="erf")
    ap.add_argument("--eps", type=float, default=None, help="norm epsilon (default 1e-12; rms: 1e-6)")
    ap.add_argument("--shape-ops", choices=["torch", "const"], default="torch",
                    help="Reshape targets from Shape/Gather/Concat (as exported) or constants")
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--arch", choices=["bert", "llama"], default="bert",
                    help="bert: encoder (GPT-style with --causal); llama: LlamaForCausalLM-style decoder")
    ap.add_argument("--kv-heads", type=int, default=None,
                    help="llama: key/value heads (grouped-query attention; default --heads)")
    ap.add_argument("--rope-theta", type=float, default=10000.0, help="llama: rotary base")
    ap.add_argument("--rsqrt", choices=["div", "reciprocal"], default="div",
                    help="llama: RMSNorm's rsqrt as Div(1, Sqrt) (torch's export) or Reciprocal(Sqrt)")
    a = ap.parse_args(argv)

    model, params = build_llama(a) if a.arch == "llama" else build(a)
    out_dir = os.path.dirname(os.path.abspath(a.output))
    os.makedirs(out_dir, exist_ok=True)
    tmp = a.output + ".tmp"
    onnx.save(model, tmp)
    os.replace(tmp, a.output)
    size = os.path.getsize(a.output)
    if a.arch == "llama":
        print(
            f"{a.output}: llama, {a.layers} layers, hidden {a.hidden}, heads {a.heads}, "
            f"kv heads {a.kv_heads or a.heads}, ffn {a.ffn}, vocab {a.vocab}, "
            f"seq {a.seq if a.seq is not None else 'seq'}, opset {a.opset}: "
            f"{len(model.graph.node)} nodes, {params} params, {size} bytes"
        )
        return
    print(
        f"{a.output}: {a.layers} layers, hidden {a.hidden}, heads {a.heads}, ffn {a.ffn}, "
        f"vocab {a.vocab}, seq {a.seq if a.seq is not None else 'seq'}, norm {a.norm}, "
        f"gelu {a.gelu}{', causal' if a.causal else ''}, opset {a.opset}: "
        f"{len(model.graph.node)} nodes, {params} params, {size} bytes"
    )


if __name__ == "__main__":
    main()
