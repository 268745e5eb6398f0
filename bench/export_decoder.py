#!/usr/bin/env python3
"""Export a real transformers causal LM with its KV cache to ONNX, in the layout that
transformers/optimum use for generation ("decoder with past") and that
bench/make_decoder.py writes by hand:

    inputs   input_ids                  int64 [batch_size, sequence_length]
             attention_mask             int64 [batch_size, past_sequence_length + sequence_length]
             position_ids               int64 [batch_size, sequence_length]
             past_key_values.N.key      float [batch_size, kv_heads, past_sequence_length, head_dim]
             past_key_values.N.value    float [batch_size, kv_heads, past_sequence_length, head_dim]
    outputs  logits                     float [batch_size, sequence_length, vocab]
             present.N.key / .value     float [batch_size, kv_heads,
                                               past_sequence_length + sequence_length, head_dim]

Why: make_decoder.py writes the graph gopt should recognize from first principles; this
script gives the graph transformers itself produces (its mask construction, its rotary
embedding, its cache update), so gopt's decode path is tested against what users export.

How: transformers 5.x models take their cache as a `Cache` object, not as tensors, so a
wrapper module (`DecoderWithPast`) takes the flat past tensors, puts them into a
`DynamicCache` (one `DynamicLayer` per layer, keys/values set directly so that the cache
update traces to exactly Concat(past, new) on the sequence axis), calls the model with
use_cache=True, and returns the logits and each layer's keys and values read back from
`cache.layers[i].keys / .values`. The TorchScript exporter (torch.onnx.export with
dynamo=False: the dynamo exporter does not handle transformers 5.x's causal LMs at
torch 2.11) traces it with past_sequence_length > 0, so the graph serves a prompt
(past_sequence_length = 0) and a decode step (sequence_length = 1) alike.

Weights are random (transformers' own init, std --init-scale, seed --seed), float32:
gopt lowers to bf16 itself.

After export the ONNX file is checked with onnxruntime (CPU provider) against torch:
a prompt (batch 2, the second row left-padded, past_sequence_length = 0), then one
greedy decode step whose past is the prompt's presents; and, in onnxruntime alone, that
step's logits against the whole sequence run with an empty past (what the cache must
not change). The largest |difference| of the logits and presents is printed; the script exits 1 when it is above --tol (1e-3).

usage:
  bench/export_decoder.py -o /tmp/llama.onnx --preset test-llama
  bench/export_decoder.py -o /tmp/gpt2.onnx --preset test-gpt2
  bench/export_decoder.py -o /tmp/tinyllama.onnx --preset tinyllama    (1.1B; external data)
  bench/export_decoder.py -o /tmp/m.onnx --model llama --layers 2 --hidden 64 --heads 4 \\
      --kv-heads 2 --ffn 176 --vocab 500 [--attn eager|sdpa] [--external-data]
"""

import argparse
import math
import os
import shutil
import sys
import time

import numpy as np
import torch

# Named shapes; the llama ones are bench/make_decoder.py's presets of the same name.
PRESETS = {
    # TinyLlama-1.1B's shape (the decode benchmark).
    "tinyllama": dict(model="llama", layers=22, hidden=2048, heads=32, kv_heads=4, ffn=5632,
                      vocab=32000, max_pos=2048, external_data=True),
    # The repo's test decoders' shapes (make_decoder.py --preset test-llama / test-gpt2).
    "test-llama": dict(model="llama", layers=2, hidden=64, heads=4, kv_heads=2, ffn=176,
                       vocab=500, max_pos=256),
    "test-gpt2": dict(model="gpt2", layers=2, hidden=48, heads=3, kv_heads=None, ffn=192,
                      vocab=500, max_pos=256),
    # GPT-2 124M.
    "gpt2": dict(model="gpt2", layers=12, hidden=768, heads=12, kv_heads=None, ffn=3072,
                 vocab=50257, max_pos=1024),
}

BATCH, SEQ, PAST = "batch_size", "sequence_length", "past_sequence_length"
TOTAL = "past_sequence_length + sequence_length"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def build_model(a):
    """A transformers causal LM of the requested shape, random weights from seed a.seed,
    float32, eval mode, attention implementation a.attn."""
    import transformers

    torch.manual_seed(a.seed)
    if a.model == "llama":
        cfg = transformers.LlamaConfig(
            vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=a.ffn,
            num_hidden_layers=a.layers, num_attention_heads=a.heads,
            num_key_value_heads=a.kv_heads or a.heads, max_position_embeddings=a.max_pos,
            rope_parameters={"rope_type": "default", "rope_theta": a.rope_theta},
            initializer_range=a.init_scale, tie_word_embeddings=False, use_cache=True,
            attn_implementation=a.attn)
        m = transformers.LlamaForCausalLM(cfg)
    else:
        if a.kv_heads and a.kv_heads != a.heads:
            sys.exit("--model gpt2 has no grouped-query heads (leave --kv-heads out)")
        cfg = transformers.GPT2Config(
            vocab_size=a.vocab, n_embd=a.hidden, n_layer=a.layers, n_head=a.heads,
            n_inner=a.ffn, n_positions=a.max_pos, initializer_range=a.init_scale,
            use_cache=True, attn_implementation=a.attn)
        m = transformers.GPT2LMHeadModel(cfg)
    m = m.eval()
    got = getattr(m.config, "_attn_implementation", None)
    if got != a.attn:
        log(f"WARNING: asked for {a.attn!r} attention, the model runs {got!r}")
    return m


def kv_shape(m):
    """(layers, kv_heads, head_dim) of a transformers causal LM."""
    c = m.config
    if c.model_type == "gpt2":
        return c.n_layer, c.n_head, c.n_embd // c.n_head
    hd = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    return c.num_hidden_layers, c.num_key_value_heads, hd


def cache_from_flat(past):
    """A DynamicCache holding the flat [k0, v0, k1, v1, ...] tensors. Each layer's
    keys/values are set directly: going through DynamicCache(ddp_cache_data=...) or
    layer.update() would first concatenate onto an empty placeholder tensor, which
    traces to an extra Concat in front of the cache update."""
    from transformers.cache_utils import DynamicCache, DynamicLayer

    cache = DynamicCache()
    if not hasattr(cache, "layers"):
        sys.exit("this transformers has no Cache.layers (transformers 5.x expected)")
    for i in range(0, len(past), 2):
        layer = DynamicLayer()
        layer.lazy_initialization(past[i], past[i + 1])  # sets dtype/device/is_initialized
        layer.keys, layer.values = past[i], past[i + 1]
        cache.layers.append(layer)
    return cache


def flat_from_cache(cache):
    """[k0, v0, k1, v1, ...] of a transformers 5.x cache."""
    out = []
    for layer in cache.layers:
        out += [layer.keys, layer.values]
    return out


class DecoderWithPast(torch.nn.Module):
    """forward(input_ids, attention_mask, position_ids, *past) -> (logits, *presents),
    past and presents flat: layer 0's key, layer 0's value, layer 1's key, ..."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, position_ids, *past):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                         position_ids=position_ids, past_key_values=cache_from_flat(past),
                         use_cache=True)
        return (out.logits, *flat_from_cache(out.past_key_values))


def io_names(layers):
    past = [f"past_key_values.{i}.{w}" for i in range(layers) for w in ("key", "value")]
    present = [f"present.{i}.{w}" for i in range(layers) for w in ("key", "value")]
    inputs = ["input_ids", "attention_mask", "position_ids"] + past
    outputs = ["logits"] + present
    dyn = {"input_ids": {0: BATCH, 1: SEQ}, "attention_mask": {0: BATCH, 1: TOTAL},
           "position_ids": {0: BATCH, 1: SEQ}, "logits": {0: BATCH, 1: SEQ}}
    dyn.update({n: {0: BATCH, 2: PAST} for n in past})
    dyn.update({n: {0: BATCH, 2: TOTAL} for n in present})
    return inputs, outputs, dyn


def positions(mask):
    """position_ids from a left-padded attention mask, as transformers' generate makes
    them: the running count of real tokens minus one (1 on padding)."""
    pos = mask.long().cumsum(-1) - 1
    return pos.masked_fill(mask == 0, 1)


def example(m, batch, seq, past_len, vocab, seed=0):
    """Inputs for tracing: random past of past_len tokens, all-ones mask."""
    layers, kvh, hd = kv_shape(m)
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (batch, seq), generator=g)
    mask = torch.ones(batch, past_len + seq, dtype=torch.int64)
    pos = torch.arange(past_len, past_len + seq).expand(batch, seq).contiguous()
    past = [torch.randn(batch, kvh, past_len, hd, generator=g) * 0.5 for _ in range(2 * layers)]
    return (ids, mask, pos, *past)


def export(m, path, a):
    """Traces DecoderWithPast(m) into PATH. Over 2 GB (or with --external-data) the
    weights go to PATH.data beside it, one file named relative to the model."""
    import onnx

    layers = kv_shape(m)[0]
    inputs, outputs, dyn = io_names(layers)
    # past 5, seq 3, batch 2: distinct, non-zero sizes, so nothing is traced as a constant
    # that happens to equal another dim, and the cache is not empty at trace time.
    args = example(m, 2, 3, 5, a.vocab)
    out = os.path.abspath(path)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    scratch = out + ".export"
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    try:
        tmp = os.path.join(scratch, os.path.basename(out))
        # The wrapper in eval mode: the exporter restores the exported module's mode
        # afterwards, recursively, so a wrapper left in training mode would leave the
        # model with its dropout on.
        with torch.no_grad():
            torch.onnx.export(DecoderWithPast(m).eval(), args, tmp, input_names=inputs,
                              output_names=outputs, dynamic_axes=dyn, opset_version=a.opset,
                              do_constant_folding=True, dynamo=False)
        extra = [f for f in os.listdir(scratch) if f != os.path.basename(out)]
        data = os.path.basename(out) + ".data"
        for p in (out, out + ".data"):
            if os.path.exists(p):
                os.remove(p)  # onnx appends to an existing external data file
        if a.external_data or extra:
            proto = onnx.load(tmp)  # reads the exporter's per-tensor files from scratch
            onnx.save_model(proto, out, save_as_external_data=True, all_tensors_to_one_file=True,
                            location=data, size_threshold=1024)
        else:
            os.replace(tmp, out)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def check_io(path, layers, kvh, hd, vocab):
    """The graph's inputs and outputs are named and shaped as the layout says."""
    import onnx

    g = onnx.load(path, load_external_data=False).graph
    inputs, outputs, _ = io_names(layers)

    def dims(v):
        return [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]

    want_in = {"input_ids": [BATCH, SEQ], "attention_mask": [BATCH, TOTAL],
               "position_ids": [BATCH, SEQ]}
    want_in.update({n: [BATCH, kvh, PAST, hd] for n in inputs[3:]})
    want_out = {"logits": [BATCH, SEQ, vocab]}
    want_out.update({n: [BATCH, kvh, TOTAL, hd] for n in outputs[1:]})
    got_in = {v.name: dims(v) for v in g.input if v.name in want_in}
    got_out = {v.name: dims(v) for v in g.output}
    problems = []
    if [v.name for v in g.input if v.name in want_in] != inputs:
        problems.append(f"inputs {[v.name for v in g.input]} (want {inputs})")
    if [v.name for v in g.output] != outputs:
        problems.append(f"outputs {[v.name for v in g.output]} (want {outputs})")
    for want, got in ((want_in, got_in), (want_out, got_out)):
        for n, d in want.items():
            if got.get(n) != d:
                problems.append(f"{n}: dims {got.get(n)} (want {d})")
    return problems


def diff(x, y):
    """max |x - y|, NaN where both are NaN counting as equal (fully padded rows can be
    NaN in both), NaN in only one counting as infinite."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    nx, ny = np.isnan(x), np.isnan(y)
    if (nx != ny).any():
        return math.inf
    d = np.abs(np.where(nx, 0.0, x) - np.where(ny, 0.0, y))
    return float(d.max()) if d.size else 0.0


def check_ort(m, path, a, prompt_len=7, pad=2):
    """Runs PATH on onnxruntime (CPU) and m in torch: a prompt (batch 2, the second row
    left-padded by PAD, empty past), then one greedy decode step on the prompt's cache.
    Returns {name: max abs diff}."""
    import onnxruntime as ort

    layers, kvh, hd = kv_shape(m)
    m.eval()
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, a.vocab, (2, prompt_len), generator=g)
    mask = torch.ones(2, prompt_len, dtype=torch.int64)
    mask[1, :pad] = 0
    pos = positions(mask)
    empty = [np.zeros((2, kvh, 0, hd), np.float32)] * (2 * layers)
    names = [i.name for i in sess.get_inputs()]

    def run_ort(ids, mask, pos, past):
        feed = dict(zip(names, [ids.numpy(), mask.numpy(), pos.numpy(), *past]))
        return sess.run(None, feed)

    from transformers.cache_utils import DynamicCache

    diffs = {}
    with torch.no_grad():
        # Prompt.
        ref = m(input_ids=ids, attention_mask=mask, position_ids=pos,
                past_key_values=DynamicCache(), use_cache=True)
        got = run_ort(ids, mask, pos, empty)
        diffs["prompt logits"] = diff(got[0], ref.logits)
        diffs["prompt presents"] = max(diff(o, t) for o, t in
                                       zip(got[1:], flat_from_cache(ref.past_key_values)))
        # One decode step: the past is each side's own prompt presents.
        nxt = ref.logits[:, -1].argmax(-1, keepdim=True)
        mask2 = torch.cat([mask, torch.ones(2, 1, dtype=torch.int64)], 1)
        pos2 = pos[:, -1:] + 1
        ref2 = m(input_ids=nxt, attention_mask=mask2, position_ids=pos2,
                 past_key_values=ref.past_key_values, use_cache=True)
        got2 = run_ort(nxt, mask2, pos2, got[1:])
        diffs["step logits"] = diff(got2[0], ref2.logits)
        diffs["step presents"] = max(diff(o, t) for o, t in
                                     zip(got2[1:], flat_from_cache(ref2.past_key_values)))
        # The cache's meaning: the step's logits equal the last position of the whole
        # sequence (prompt + token) run with an empty past.
        full = run_ort(torch.cat([ids, nxt], 1), mask2, positions(mask2), empty)
        diffs["step logits vs uncached (onnxruntime)"] = diff(got2[0][:, -1], full[0][:, -1])
        shapes = [tuple(x.shape) for x in got2[:3]]
    log(f"onnxruntime {ort.__version__} (CPU): step output shapes {shapes}")
    return diffs


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="--preset sets --model and the sizes, over any size flags given. "
               "Presets: " + "; ".join(
                   f"{k}: {v['model']} {v['layers']}L h{v['hidden']} {v['heads']}/{v['kv_heads'] or v['heads']} "
                   f"heads ffn {v['ffn']} vocab {v['vocab']}" for k, v in PRESETS.items()),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("-o", "--output", required=True, help="the ONNX file to write")
    ap.add_argument("--preset", choices=sorted(PRESETS), help="a named shape (sets the sizes below)")
    ap.add_argument("--model", choices=["llama", "gpt2"], default="llama",
                    help="LlamaForCausalLM (RMSNorm, rotary, GQA, SwiGLU) or GPT2LMHeadModel")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4, help="query heads")
    ap.add_argument("--kv-heads", type=int, default=None,
                    help="llama: key/value heads (grouped-query attention); default = --heads")
    ap.add_argument("--ffn", type=int, default=176, help="MLP width")
    ap.add_argument("--vocab", type=int, default=500)
    ap.add_argument("--max-pos", type=int, default=256,
                    help="max_position_embeddings (gpt2: rows of the position table)")
    ap.add_argument("--rope-theta", type=float, default=10000.0, help="llama: rotary base")
    ap.add_argument("--attn", choices=["eager", "sdpa"], default="eager",
                    help="transformers attention implementation traced into the graph. "
                         "eager: MatMul, Mul(scale), Add(additive float mask), Softmax, MatMul. "
                         "sdpa: the exporter's decomposition of scaled_dot_product_attention: "
                         "q and kT each scaled by sqrt(scale), the boolean mask turned into "
                         "Where(mask, 0, -inf) per layer, Softmax, then Where(IsNaN, 0) so "
                         "fully masked rows give 0")
    ap.add_argument("--opset", type=int, default=18)
    ap.add_argument("--seed", type=int, default=0, help="torch seed of the random weights")
    ap.add_argument("--init-scale", type=float, default=0.02,
                    help="initializer_range: weights are N(0, this); norms start at 1")
    ap.add_argument("--external-data", action="store_true",
                    help="weights in OUT.data beside the graph (always so past 2 GB)")
    ap.add_argument("--tol", type=float, default=1e-3,
                    help="largest |onnxruntime - torch| accepted; above it the script exits 1")
    ap.add_argument("--no-check", action="store_true", help="export only, skip onnxruntime")
    a = ap.parse_args(argv)
    if a.preset:
        for k, v in PRESETS[a.preset].items():
            if k == "external_data":
                a.external_data = a.external_data or v
            else:
                setattr(a, k, v)
    if a.hidden % a.heads:
        sys.exit(f"--hidden {a.hidden} is not a multiple of --heads {a.heads}")
    if a.heads % (a.kv_heads or a.heads):
        sys.exit(f"--heads {a.heads} is not a multiple of --kv-heads {a.kv_heads}")

    import onnx
    import transformers

    log(f"torch {torch.__version__}, transformers {transformers.__version__}, onnx {onnx.__version__}")
    t = time.time()
    m = build_model(a)
    layers, kvh, hd = kv_shape(m)
    n = sum(p.numel() for p in m.parameters())
    log(f"{a.model}: {layers} layers, hidden {a.hidden}, heads {a.heads}/{kvh}, head dim {hd}, "
        f"ffn {a.ffn}, vocab {a.vocab}, {a.attn} attention: {n} params, built in {time.time() - t:.1f} s")
    t = time.time()
    export(m, a.output, a)
    size = os.path.getsize(a.output)
    data = a.output + ".data"
    extra = f" + {os.path.getsize(data)} bytes in {os.path.basename(data)}" if os.path.exists(data) else ""
    log(f"{a.output}: exported in {time.time() - t:.1f} s, {size} bytes{extra}")
    problems = check_io(a.output, layers, kvh, hd, a.vocab)
    for p in problems:
        log(f"layout: {p}")
    if a.no_check:
        sys.exit(1 if problems else 0)
    t = time.time()
    diffs = check_ort(m, a.output, a)
    worst = max(diffs.values())
    for k, v in diffs.items():
        print(f"max abs diff, {k}: {v:.3e}")
    ok = worst <= a.tol and not problems
    print(f"{'PASS' if ok else 'FAIL'}: onnxruntime vs torch max abs diff {worst:.3e} "
          f"(tolerance {a.tol:g}){'; layout problems' if problems else ''} "
          f"[checked in {time.time() - t:.1f} s]")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
