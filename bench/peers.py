#!/usr/bin/env python3
"""The benchmark models and their PyTorch timings, on the GPU machine.

Exports ResNet-50 (torchvision), BERT-base (seq 128), GPT-2 124M with its LM head (seq
128) and, on request, a Llama-architecture decoder with its LM head (`llama`: TinyLlama
1.1B's shape by default, seq 128 prefill) to ONNX (random init, seed 0, fp32 weights:
gopt lowers to bf16 itself; TorchScript exporter, opset 17, batch and seq dynamic).
The exported transformers use eager attention (it exports cleanly); the model PyTorch
times is the same model (same weights, loaded from the exported one's state dict) with
transformers' SDPA attention, PyTorch's strongest built-in path.

Times PyTorch on the same GPU in bf16, TF32 off, at batch 1 and 32: eager, and
torch.compile in both modes "default" and "reduce-overhead" (the faster of the two is
`compile_best`), p50/p95 over CUDA events after warm-up. Each torch.compile costs ~10 s
for the small models (four per model: ~40 s each), more for the Llama stack.

Writes OUT/<model>.onnx (a model over 2 GB, such as the 1.1B Llama in fp32, keeps its
weights in OUT/<model>.onnx.data beside it, one file, referenced by a relative
location) and OUT/peers.json (rewritten after each model):

  {"torch": "2.11.0", "device": "NVIDIA H200", "tf32": false,
   "models": {"gpt2": {
     "config": {"seq": 128, "params": 124439808},
     "attn_implementation": {"exported": "eager", "timed": "sdpa"},
     "sdpa_vs_eager_max_abs": 3e-06, "export_s": 9.1,
     "onnx": {"file": "gpt2.onnx", "bytes": ..},
     "b1": {"eager": {"p50_ms": .., "p95_ms": .., "min_ms": ..},
            "compile_default": {"p50_ms": .., "p95_ms": .., "min_ms": .., "mode": "default",
                                "compile_s": 9.8},
            "compile_reduce_overhead": {.., "mode": "reduce-overhead", "compile_s": 10.2},
            "compile_best": {the faster of the two, with its "mode"}},
     "b32": {..}}}}

A model or compile mode that fails is recorded as {"error": "..."} and the others go on.

usage: bench/peers.py OUT [--iters 100] [--models resnet50,bert_base,gpt2[,llama]]
                          [--llama-layers 22] [--llama-hidden 2048] [--export-only]
The Llama flags default to $GOPT_LLAMA_LAYERS / $GOPT_LLAMA_HIDDEN when set (for
bench/gpu-bench.sh and scripts/gpu-check.sh): a session short on GPU time can time a
smaller stack (e.g. GOPT_LLAMA_LAYERS=4); the config used is in peers.json.

Decode mode, `bench/peers.py --decode [--model tinyllama] [--batch 1,16] [--context 128]
[--new-tokens 64] [--json OUT]` (its flags and method: `bench/peers.py --decode --help`),
times PyTorch's strongest LLM decode path instead, the peer of `gopt bench MODEL
--decode`: transformers' LlamaForCausalLM / GPT2LMHeadModel (random weights, seed 0,
bf16, SDPA) with a StaticCache, greedy, one token per step; eagerly, and with the step
under torch.compile(mode="reduce-overhead", fullgraph=True). See DECODE_DOC below.
"""
import argparse
import json
import os
import shutil
import statistics
import sys
import time
import traceback

import torch

SEQ = 128
BATCHES = (1, 32)
MODES = ("default", "reduce-overhead")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def n_params(m):
    return sum(p.numel() for p in m.parameters())


class Spec:
    """One benchmark model: `export` the module exported to ONNX (eager attention),
    `timed()` builds the module PyTorch times (SDPA attention, same weights)."""

    def __init__(self, export, timed, inputs, names, dyn, config, attn=None):
        self.export, self.timed, self.inputs = export, timed, inputs
        self.names, self.dyn, self.config, self.attn = names, dyn, config, attn


class LMWrap(torch.nn.Module):
    """A causal LM's logits from `input_ids` alone."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, ids):
        # An explicit all-ones mask: without one, transformers looks for packed
        # sequences in the position ids with torch.diff, which does not export.
        mask = torch.ones_like(ids)
        return self.m(input_ids=ids, attention_mask=mask, use_cache=False).logits


class EncoderWrap(torch.nn.Module):
    """An encoder's last hidden state from `input_ids` and `attention_mask`."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, ids, mask):
        return self.m(input_ids=ids, attention_mask=mask).last_hidden_state


def twin(build):
    """The exported module (eager attention) and a builder of the timed one (SDPA, the
    exported one's weights). Both are built under seed 0; the state dict is loaded
    anyway, strictly, so the two are the same model whatever the init does."""
    torch.manual_seed(0)
    exported = build("eager").eval()

    def build_timed():
        torch.manual_seed(0)
        t = build("sdpa").eval()
        t.load_state_dict(exported.state_dict(), strict=True)
        return t

    return exported, build_timed


def attn_of(module):
    """The attention implementation a wrapped transformers model runs."""
    cfg = getattr(getattr(module, "m", None), "config", None)
    return getattr(cfg, "_attn_implementation", None)


def llama_config(a):
    hidden, layers = a.llama_hidden, a.llama_layers
    if hidden % 64 or hidden < 64:
        sys.exit(f"--llama-hidden {hidden}: expected a multiple of 64 (head dim 64)")
    heads = hidden // 64
    kv = min(4, heads)
    if heads % kv:
        sys.exit(f"--llama-hidden {hidden}: {heads} query heads do not share {kv} K/V heads")
    inter = a.llama_intermediate or hidden * 11 // 4  # TinyLlama: 5632 for 2048
    return dict(layers=layers, hidden=hidden, heads=heads, kv_heads=kv, intermediate=inter,
                vocab=32000, max_positions=2048, seq=SEQ, tie_word_embeddings=False)


def models(a):
    import torchvision
    import transformers

    def resnet50():
        torch.manual_seed(0)
        m = torchvision.models.resnet50(weights=None).eval()
        # No attention: the exported module is the timed one.
        return Spec(m, lambda: m, lambda b: (torch.randn(b, 3, 224, 224),), ["input"],
                    {"input": {0: "batch"}}, {"image": 224, "params": n_params(m)})

    def bert_base():
        def build(attn):
            cfg = transformers.BertConfig(attn_implementation=attn)
            return EncoderWrap(transformers.BertModel(cfg, add_pooling_layer=False))

        exported, build_timed = twin(build)

        def inputs(b):
            return (torch.randint(0, 30000, (b, SEQ)), torch.ones(b, SEQ, dtype=torch.int64))

        dyn = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
        return Spec(exported, build_timed, inputs, ["input_ids", "attention_mask"], dyn,
                    {"seq": SEQ, "params": n_params(exported)}, attn=True)

    def gpt2():
        def build(attn):
            cfg = transformers.GPT2Config(attn_implementation=attn, use_cache=False)
            return LMWrap(transformers.GPT2LMHeadModel(cfg))

        exported, build_timed = twin(build)
        return Spec(exported, build_timed, lambda b: (torch.randint(0, 50000, (b, SEQ)),),
                    ["input_ids"], {"input_ids": {0: "batch", 1: "seq"}},
                    {"seq": SEQ, "params": n_params(exported)}, attn=True)

    def llama():
        c = llama_config(a)

        def build(attn):
            cfg = transformers.LlamaConfig(
                vocab_size=c["vocab"], hidden_size=c["hidden"], intermediate_size=c["intermediate"],
                num_hidden_layers=c["layers"], num_attention_heads=c["heads"],
                num_key_value_heads=c["kv_heads"], max_position_embeddings=c["max_positions"],
                use_cache=False, tie_word_embeddings=False, attn_implementation=attn)
            return LMWrap(transformers.LlamaForCausalLM(cfg))

        t = time.time()
        exported, build_timed = twin(build)
        log(f"llama: built {c['layers']} layers, hidden {c['hidden']} in {time.time() - t:.1f} s")
        c["params"] = n_params(exported)
        return Spec(exported, build_timed, lambda b: (torch.randint(0, c["vocab"], (b, SEQ)),),
                    ["input_ids"], {"input_ids": {0: "batch", 1: "seq"}}, c, attn=True)

    return {"resnet50": resnet50, "bert_base": bert_base, "gpt2": gpt2, "llama": llama}


def export(spec, out, name):
    """Exports to OUT/NAME.onnx. The TorchScript exporter writes a model over 2 GB as
    one external file per tensor beside the model: it exports into a scratch folder and,
    if more than the model file came out, the weights are gathered into one file,
    OUT/NAME.onnx.data, named relative to the model (as gopt and onnxruntime read it)."""
    path = os.path.join(out, f"{name}.onnx")
    data = f"{name}.onnx.data"
    # Stale files of an earlier run: onnx appends to an existing external data file.
    for p in (path, os.path.join(out, data)):
        if os.path.exists(p):
            os.remove(p)
    scratch = os.path.join(out, f".{name}.export")
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    try:
        tmp = os.path.join(scratch, f"{name}.onnx")
        torch.onnx.export(spec.export, spec.inputs(2), tmp, input_names=spec.names,
                          output_names=["output"], dynamic_axes=spec.dyn, opset_version=17,
                          dynamo=False)
        return place(tmp, path)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def place(tmp, path):
    """Moves the exported model TMP to PATH; when the exporter left external data files
    beside TMP, they are gathered into one, PATH.data (named by its base name)."""
    scratch, name = os.path.split(tmp)
    out, final = os.path.split(path)
    data = final + ".data"
    extra = [f for f in os.listdir(scratch) if f != name]
    info = {"file": final}
    if not extra:
        os.replace(tmp, path)
    else:
        import onnx

        log(f"{final}: {len(extra)} external data files, gathered into {data}")
        proto = onnx.load(tmp)  # with its external data, read from the scratch folder
        onnx.save_model(proto, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=data, size_threshold=1024)
        del proto
        info["external_data"] = data
        info["data_bytes"] = os.path.getsize(os.path.join(out, data))
    info["bytes"] = os.path.getsize(path)
    return info


def timed(fn, iters, warmup=20):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    times.sort()
    return {"p50_ms": statistics.median(times), "p95_ms": times[int(0.95 * (len(times) - 1))],
            "min_ms": times[0]}


def same_model(exported, timed_model, spec):
    """Largest |difference| of the exported (eager attention) and timed (SDPA) modules'
    outputs in fp32 on the CPU, batch 1 (a check that they are the same model)."""
    torch.manual_seed(1)
    ins = spec.inputs(1)
    with torch.inference_mode():
        return float((exported(*ins) - timed_model(*ins)).abs().max())


def time_torch(model, ins, iters):
    """Eager, then torch.compile in each mode, at one batch."""
    r = {}
    with torch.inference_mode():
        r["eager"] = timed(lambda: model(*ins), iters)
        for mode in MODES:
            key = "compile_" + mode.replace("-", "_")
            try:
                torch._dynamo.reset()
                c = torch.compile(model, mode=mode)
                t = time.time()
                c(*ins)
                torch.cuda.synchronize()
                compile_s = time.time() - t
                r[key] = dict(timed(lambda: c(*ins), iters), mode=mode, compile_s=compile_s)
            except Exception as e:  # a mode that fails leaves the other one
                traceback.print_exc()
                r[key] = {"mode": mode, "error": f"{type(e).__name__}: {e}"[:500]}
            finally:
                c = None
                torch._dynamo.reset()
                torch.cuda.empty_cache()
    ok = [r["compile_" + m.replace("-", "_")] for m in MODES]
    ok = [x for x in ok if "p50_ms" in x]
    if ok:
        r["compile_best"] = dict(min(ok, key=lambda x: x["p50_ms"]))
    return r


def main():
    if "--decode" in sys.argv[1:]:
        return decode_main([x for x in sys.argv[1:] if x != "--decode"])
    ap = argparse.ArgumentParser(epilog="bench/peers.py --decode --help: the LLM decode peers")
    ap.add_argument("out")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--models", default="resnet50,bert_base,gpt2")
    ap.add_argument("--export-only", action="store_true", help="write the ONNX files, time nothing")
    ap.add_argument("--llama-layers", type=int, default=int(os.environ.get("GOPT_LLAMA_LAYERS") or 22))
    ap.add_argument("--llama-hidden", type=int, default=int(os.environ.get("GOPT_LLAMA_HIDDEN") or 2048))
    ap.add_argument("--llama-intermediate", type=int,
                    default=int(os.environ.get("GOPT_LLAMA_INTERMEDIATE") or 0),
                    help="MLP width (default hidden × 11/4: 5632 for 2048)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    results = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0), "tf32": False,
               "iters": a.iters, "models": {}}
    table = models(a)
    names = [n for n in a.models.split(",") if n]
    unknown = [n for n in names if n not in table]
    if unknown:
        sys.exit(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(table)}")
    start = time.time()
    for name in names:
        r = results["models"][name] = {}
        spec = m = None
        try:
            spec = table[name]()
            r["config"] = spec.config
            t = time.time()
            r["onnx"] = export(spec, a.out, name)
            r["export_s"] = round(time.time() - t, 1)
            log(f"{name}: exported to {a.out}/{name}.onnx in {r['export_s']} s ({r['onnx']})")
            if a.export_only:
                continue
            m = spec.timed()
            if spec.attn:
                r["attn_implementation"] = {"exported": attn_of(spec.export), "timed": attn_of(m)}
                r["sdpa_vs_eager_max_abs"] = same_model(spec.export, m, spec)
                log(f"{name}: attention {r['attn_implementation']}, outputs differ by at most "
                    f"{r['sdpa_vs_eager_max_abs']:.2e} (fp32, CPU)")
                if attn_of(m) != "sdpa":
                    log(f"{name}: WARNING: the timed model runs {attn_of(m)!r} attention, not sdpa")
            spec.export = None  # the CPU copy is no longer needed
            m = m.to("cuda", torch.bfloat16)
            for batch in BATCHES:
                ins = tuple(x.cuda() for x in spec.inputs(batch))
                if name == "resnet50":
                    ins = tuple(x.to(torch.bfloat16) for x in ins)
                rb = r[f"b{batch}"] = time_torch(m, ins, a.iters)
                parts = [f"eager {rb['eager']['p50_ms']:.3f} ms"]
                for mode in MODES:
                    x = rb["compile_" + mode.replace("-", "_")]
                    parts.append(f"compile {mode} " + (f"{x['p50_ms']:.3f} ms (compiled in {x['compile_s']:.1f} s)"
                                                       if "p50_ms" in x else "failed"))
                log(f"{name} b{batch}: " + ", ".join(parts))
                del ins
        except Exception as e:
            traceback.print_exc()
            r["error"] = f"{type(e).__name__}: {e}"[:1000]
            log(f"{name}: FAILED: {r['error']}")
        finally:
            spec = m = None
            torch.cuda.empty_cache()
            with open(os.path.join(a.out, "peers.json"), "w") as f:
                json.dump(results, f, indent=1)
    log(f"peers.py: {len(names)} model(s) in {time.time() - start:.0f} s")


# ---------------------------------------------------------------------------------------
# Decode mode: the PyTorch peer of `gopt bench MODEL --decode --batch B --context L`.

DECODE_DOC = """Times PyTorch's strongest LLM decode path, the peer of `gopt bench MODEL --decode`.

The model: transformers' LlamaForCausalLM or GPT2LMHeadModel built from a config of the
named shape, random weights (transformers' init, seed --seed), cast to --dtype (bf16),
attn_implementation="sdpa", on --device (cuda). Not loaded from a hub: no weights needed.

The decode loop is transformers 5.x's static-cache recipe written out step by step (as
gpt-fast and transformers' "LLM inference optimization" guide do), so that each step can
be timed on its own: a `StaticCache(config, max_cache_len=L)` whose key/value tensors
keep one address (transformers marks them static), the prompt run through the model
uncompiled (prefill, as generate() does), then one token per step, greedy: the step
function is `model.forward(input_ids=tok, position_ids=pos, past_key_values=cache,
use_cache=True)` followed by the argmax of the last logits.

Peers, at each batch and context:
  torch_eager_static     the step run eagerly (the same static cache);
  torch_compile_static   the step under torch.compile(step, mode="reduce-overhead",
                         fullgraph=True): Inductor kernels replayed as one CUDA graph per
                         step (gpt-fast's compiled decode_one_token; the argmax is in the
                         graph too). If fullgraph=True fails, it is retried with
                         fullgraph=False and the JSON says "fullgraph": false;
  hf_generate_static     (with --generate) model.generate() itself with that StaticCache
                         and CompileConfig(mode="reduce-overhead", fullgraph=True), which
                         compiles the forward of the decode steps (transformers' documented
                         path); generate() hides its steps, see "Timing".
The faster of the peers is marked "peer_to_beat": true (* in the table).

Context L, precisely: the cache holds at most L tokens (max_cache_len = L); the prompt is
L - N tokens (N = --new-tokens, 64), prefilled uncompiled and untimed; then N decode
steps feed the tokens at positions L-N .. L-1, so the timed steps see a cache of
L-N+1 .. L tokens. With a static cache SDPA attends over all L slots at every step (the
slots not yet written are masked), so every step costs what a context of L costs.

Timing: per decode step, between CUDA events recorded around each step (no host sync
between steps, so a step's time includes any GPU idle time while Python launches
kernels); with --device cpu, time.perf_counter around each step. Warm-up: --warmup-runs
whole generations (prefill + N steps) first; the first compiled step's wall time (Dynamo
trace + Inductor compile, synchronized) is compile_s; CUDA-graph recording happens in
the next steps, still in warm-up. Then --runs timed generations; p50 / p95 over all
runs x N step times. tokens_per_s = batch x 1000 / p50 (tokens across the batch).
hf_generate_static: generate() runs the decode steps itself, so its per-token time is
(T(N+1 new tokens) - T(1 new token)) / N, wall clock with torch.cuda.synchronize, over
--runs x 2 such pairs (T(1) is the prefill alone); compile_s is then the first
generate() call's wall time.

Each line of the JSON output (--json FILE, JSON lines; else printed after the table):
  {"peer": "torch_compile_static", "model": "tinyllama", "batch": 1, "context": 128,
   "ms_per_token_p50": .., "ms_per_token_p95": .., "tokens_per_s": .., "compile_s": ..,
   "peer_to_beat": true, "new_tokens": 64, "prompt_tokens": 64, "samples": 192,
   "tokens_match_eager": 1.0, ...}
tokens_match_eager / tokens_match_compile: the share of this peer's greedy tokens (first
timed run) equal to the eager / compiled peer's. Random weights give nearly flat logits,
so bf16 rounding flips near-ties and a sequence that differs once differs after: a low
share against eager is expected (H200, bf16: 0.08 to 0.8 for gpt2 and tinyllama), while
hf_generate_static and torch_compile_static, the same compiled kernels, should agree.
compile_s: Inductor keeps compiled kernels on disk (/tmp/torchinductor_$USER), so a
second run on the same machine compiles in a fraction of the first's time; --cold-compile
disables those caches.
A peer that fails is a line with "error" and the others go on.

Examples (GPU machine):
  bench/peers.py --decode --model tinyllama --batch 1,16 --context 128 --json decode.jsonl
  bench/peers.py --decode --model gpt2 --batch 1 --context 512 --new-tokens 32
On the CPU (timings meaningless; exercises the logic):
  bench/peers.py --decode --model llama-test --batch 1,2 --context 32 --new-tokens 8 --device cpu
"""

DECODE_MODELS = {
    # TinyLlama-1.1B's shape: bench/make_decoder.py --preset tinyllama.
    "tinyllama": dict(arch="llama", layers=22, hidden=2048, heads=32, kv_heads=4, ffn=5632,
                      vocab=32000, max_pos=2048),
    # The repo's test decoders: make_decoder.py --preset test-llama / test-gpt2.
    "llama-test": dict(arch="llama", layers=2, hidden=64, heads=4, kv_heads=2, ffn=176,
                       vocab=500, max_pos=256),
    "gpt2-test": dict(arch="gpt2", layers=2, hidden=48, heads=3, kv_heads=3, ffn=192,
                      vocab=500, max_pos=256),
    # GPT-2 124M (the one-shot benchmark's gpt2).
    "gpt2": dict(arch="gpt2", layers=12, hidden=768, heads=12, kv_heads=12, ffn=3072,
                 vocab=50257, max_pos=1024),
}
DECODE_ALIASES = {"test-llama": "llama-test", "test-gpt2": "gpt2-test"}
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def build_decoder(name, a, context):
    """The transformers model of shape NAME: random weights from seed a.seed, on
    a.device in a.dtype, SDPA attention, eval mode."""
    import transformers

    s = DECODE_MODELS[name]
    max_pos = max(s["max_pos"], context)
    if s["arch"] == "llama":
        cls = transformers.LlamaForCausalLM
        cfg = transformers.LlamaConfig(
            vocab_size=s["vocab"], hidden_size=s["hidden"], intermediate_size=s["ffn"],
            num_hidden_layers=s["layers"], num_attention_heads=s["heads"],
            num_key_value_heads=s["kv_heads"], max_position_embeddings=max_pos,
            tie_word_embeddings=False, use_cache=True, attn_implementation=a.attn)
    else:
        cls = transformers.GPT2LMHeadModel
        cfg = transformers.GPT2Config(
            vocab_size=s["vocab"], n_embd=s["hidden"], n_layer=s["layers"], n_head=s["heads"],
            n_inner=s["ffn"], n_positions=max_pos, use_cache=True, attn_implementation=a.attn)
    torch.manual_seed(a.seed)
    with torch.device(a.device):  # init on the device: seconds, not a minute, for 1.1B
        m = cls(cfg)
    m = m.to(DTYPES[a.dtype]).eval()
    # Greedy, never stopping early (for --generate).
    m.generation_config.eos_token_id = None
    m.generation_config.pad_token_id = 0
    got = getattr(m.config, "_attn_implementation", None)
    if got != a.attn:
        log(f"{name}: WARNING: asked for {a.attn!r} attention, the model runs {got!r}")
    return m


def static_cache(model, max_len):
    """transformers 5.x's StaticCache(config, max_cache_len): its layers allocate their
    [batch, kv_heads, max_len, head_dim] tensors on the first update (the prefill)."""
    try:
        from transformers import StaticCache
    except ImportError:
        sys.exit("decode mode: this transformers has no StaticCache (transformers 5.x expected)")
    try:
        cache = StaticCache(config=model.config, max_cache_len=max_len)
    except TypeError as e:
        sys.exit(f"decode mode: StaticCache(config=, max_cache_len=) failed ({e}); "
                 f"transformers 5.x expected (4.x also wants max_batch_size, cache_position)")
    if not hasattr(cache, "reset"):
        sys.exit("decode mode: StaticCache has no reset(); transformers 5.x expected")
    return cache


class StepTimer:
    """Per-step latencies in ms: CUDA events recorded between steps (no host sync), or
    time.perf_counter on the CPU."""

    def __init__(self, cuda):
        self.cuda = cuda
        self.marks = []

    def mark(self):
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            self.marks.append(e)
        else:
            self.marks.append(time.perf_counter())

    def times_ms(self):
        if self.cuda:
            self.marks[-1].synchronize()
            t = [a.elapsed_time(b) for a, b in zip(self.marks, self.marks[1:])]
        else:
            t = [(b - a) * 1e3 for a, b in zip(self.marks, self.marks[1:])]
        self.marks = []
        return t


class Decoding:
    """One model at one batch and context: the static cache, the prompt and the step.

    prefill() resets the cache and runs the prompt (positions 0 .. P-1, P = L - N)
    uncompiled; step(tok, pos) is one decode step (forward of one token per row at
    position pos, then the greedy next token): the function that is compiled."""

    def __init__(self, model, batch, context, new_tokens, device):
        self.m = model
        self.cache = static_cache(model, context)
        self.prompt_len = context - new_tokens
        g = torch.Generator().manual_seed(1)
        self.prompt = torch.randint(0, model.config.vocab_size, (batch, self.prompt_len),
                                    generator=g).to(device)
        self.prompt_pos = torch.arange(self.prompt_len).expand(batch, -1).contiguous().to(device)
        self.pos = torch.zeros(batch, 1, dtype=torch.int64, device=device)

    def prefill(self):
        self.cache.reset()
        out = self.m(input_ids=self.prompt, position_ids=self.prompt_pos,
                     past_key_values=self.cache, use_cache=True, logits_to_keep=1)
        self.pos.fill_(self.prompt_len)
        return out.logits[:, -1].argmax(-1, keepdim=True)

    def step(self, tok, pos):
        out = self.m.forward(input_ids=tok, position_ids=pos, past_key_values=self.cache,
                             use_cache=True)
        return out.logits[:, -1].argmax(-1, keepdim=True)


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def percentiles(times):
    times = sorted(times)
    return statistics.median(times), times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))]


def run_decode(d, step, n, cudagraphs, timer=None, keep=False, first_wall=False, device="cuda"):
    """A whole generation: prefill, then n steps. Returns (tokens, wall s of step 1)."""
    tok = d.prefill()
    sync(device)
    toks, first = [], None
    if timer:
        timer.mark()
    for i in range(n):
        if first_wall and i == 0:
            t0 = time.perf_counter()
        if cudagraphs:
            # A new step of the CUDA-graph tree: its outputs are overwritten by the next
            # replay, so the token is cloned out of them (as gpt-fast does).
            torch.compiler.cudagraph_mark_step_begin()
            tok = step(tok, d.pos).clone()
        else:
            tok = step(tok, d.pos)
        d.pos.add_(1)
        if first_wall and i == 0:
            sync(device)
            first = time.perf_counter() - t0
        if timer:
            timer.mark()
        if keep:
            toks.append(tok.clone())
    sync(device)
    return (torch.cat(toks, 1).cpu() if keep else None), first


def compiled_graphs():
    try:
        return int(torch._dynamo.utils.counters["stats"]["unique_graphs"])
    except Exception:
        return -1


def time_step_peer(model, batch, context, a, compiled):
    """torch_eager_static or torch_compile_static at one batch and context."""
    cuda = a.device.startswith("cuda")
    d = Decoding(model, batch, context, a.new_tokens, a.device)
    r = {}
    step = d.step
    if compiled:
        torch._dynamo.reset()
        graphs0 = compiled_graphs()
        try:
            step = torch.compile(d.step, mode=a.compile_mode, fullgraph=True)
            _, first = run_decode(d, step, a.new_tokens, cuda and a.compile_mode == "reduce-overhead",
                                  first_wall=True, device=a.device)
            r["fullgraph"] = True
        except torch._dynamo.exc.Unsupported as e:  # a graph break, which fullgraph forbids
            log(f"torch.compile(fullgraph=True) failed ({type(e).__name__}: {str(e)[:300]}); "
                f"retrying with fullgraph=False")
            torch._dynamo.reset()
            step = torch.compile(d.step, mode=a.compile_mode, fullgraph=False)
            _, first = run_decode(d, step, a.new_tokens, cuda and a.compile_mode == "reduce-overhead",
                                  first_wall=True, device=a.device)
            r["fullgraph"] = False
        r["compile_s"] = round(first, 2)
        r["mode"] = a.compile_mode
        warm = a.warmup_runs - 1
    else:
        r["compile_s"] = None
        warm = a.warmup_runs
    cudagraphs = compiled and cuda and a.compile_mode == "reduce-overhead"
    for _ in range(warm):
        run_decode(d, step, a.new_tokens, cudagraphs, device=a.device)
    graphs = compiled_graphs()
    times, tokens = [], None
    timer = StepTimer(cuda)
    for i in range(a.runs):
        toks, _ = run_decode(d, step, a.new_tokens, cudagraphs, timer=timer, keep=(i == 0),
                             device=a.device)
        times += timer.times_ms()
        tokens = toks if i == 0 else tokens
    if compiled:
        r["graphs_compiled"] = compiled_graphs() - graphs0 if graphs0 >= 0 else None
        if compiled_graphs() != graphs:
            log("WARNING: torch.compile recompiled during the timed runs")
            r["recompiled_while_timed"] = True
    p50, p95 = percentiles(times)
    r.update(ms_per_token_p50=p50, ms_per_token_p95=p95, samples=len(times),
             prompt_tokens=d.prompt_len)
    return r, tokens


def time_generate_peer(model, batch, context, a):
    """hf_generate_static: model.generate() with a StaticCache and CompileConfig, per-token
    time by difference of whole generate() calls (see DECODE_DOC)."""
    from transformers import CompileConfig

    cuda = a.device.startswith("cuda")
    d = Decoding(model, batch, context, a.new_tokens, a.device)
    cc = CompileConfig(fullgraph=True, mode=a.compile_mode)
    if not cuda:
        cc._compile_all_devices = True  # generate() auto-compiles on accelerators only
    mask = torch.ones_like(d.prompt)

    def gen(n):
        d.cache.reset()
        t = time.perf_counter()
        out = model.generate(input_ids=d.prompt, attention_mask=mask, past_key_values=d.cache,
                             max_new_tokens=n, min_new_tokens=n, do_sample=False,
                             compile_config=cc)
        sync(a.device)
        return time.perf_counter() - t, out[:, d.prompt_len:]

    torch._dynamo.reset()
    n = a.new_tokens
    compile_s, _ = gen(n + 1)
    for _ in range(max(1, a.warmup_runs - 1)):
        gen(n + 1)
        gen(1)
    per_token, tokens = [], None
    for _ in range(2 * a.runs):
        t1, _ = gen(1)
        tn, out = gen(n + 1)
        tokens = out[:, 1:].cpu() if tokens is None else tokens
        per_token.append((tn - t1) / n * 1e3)
    p50, p95 = percentiles(per_token)
    return dict(ms_per_token_p50=p50, ms_per_token_p95=p95, samples=len(per_token),
                compile_s=round(compile_s, 2), prompt_tokens=d.prompt_len, mode=a.compile_mode,
                timing="generate() wall clock, (T(N+1) - T(1)) / N"), tokens


def decode_main(argv):
    ap = argparse.ArgumentParser(prog="bench/peers.py --decode", description=DECODE_DOC,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="tinyllama",
                    help="shape: " + ", ".join(f"{k} ({v['arch']} {v['layers']}L h{v['hidden']} "
                                               f"{v['heads']}/{v['kv_heads']} heads)"
                                               for k, v in DECODE_MODELS.items())
                         + "; comma-separated for several (default tinyllama)")
    ap.add_argument("--batch", default="1,16", help="batch sizes, comma-separated (default 1,16)")
    ap.add_argument("--context", default="128",
                    help="L: the cache's size, comma-separated for several (default 128)")
    ap.add_argument("--new-tokens", type=int, default=64,
                    help="N: timed decode steps per generation; the prompt is L - N (default 64)")
    ap.add_argument("--runs", type=int, default=3, help="timed generations (default 3)")
    ap.add_argument("--warmup-runs", type=int, default=2,
                    help="untimed generations first, compile included (default 2)")
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu (perf_counter timing)")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    ap.add_argument("--attn", default="sdpa", help="transformers attention (default sdpa)")
    ap.add_argument("--compile-mode", default="reduce-overhead",
                    help="torch.compile mode of the compiled peers (default reduce-overhead)")
    ap.add_argument("--generate", action="store_true",
                    help="also time model.generate() with the static cache, auto-compiled")
    ap.add_argument("--no-compile", action="store_true", help="only the eager peer")
    ap.add_argument("--cold-compile", action="store_true",
                    help="disable Inductor's on-disk caches, so that compile_s is a first "
                         "compile's even when an earlier run on this machine filled them")
    ap.add_argument("--seed", type=int, default=0, help="torch seed of the random weights")
    ap.add_argument("--json", metavar="FILE", help="write the results as JSON lines to FILE")
    a = ap.parse_args(argv)

    import transformers

    names = [DECODE_ALIASES.get(n, n) for n in a.model.split(",") if n]
    unknown = [n for n in names if n not in DECODE_MODELS]
    if unknown:
        sys.exit(f"unknown --model {', '.join(unknown)}; known: {', '.join(DECODE_MODELS)}")
    batches = [int(x) for x in a.batch.split(",") if x]
    contexts = [int(x) for x in a.context.split(",") if x]
    for L in contexts:
        if L <= a.new_tokens:
            sys.exit(f"--context {L} must exceed --new-tokens {a.new_tokens} (the prompt is L - N)")
    cuda = a.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        sys.exit("decode mode: no CUDA device; use --device cpu to exercise the logic")
    if a.cold_compile:
        torch.compiler.config.force_disable_caches = True
    dev_name = torch.cuda.get_device_name(0) if cuda else "cpu"
    common = {"device": dev_name, "dtype": a.dtype, "attn": a.attn, "new_tokens": a.new_tokens,
              "cold_compile": a.cold_compile,
              "torch": torch.__version__, "transformers": transformers.__version__}
    log(f"decode peers: torch {torch.__version__}, transformers {transformers.__version__}, "
        f"{dev_name}, {a.dtype}, {a.attn} attention")
    rows = []
    peers = [("torch_eager_static", "eager")]
    if not a.no_compile:
        peers.append(("torch_compile_static", "compile"))
        if a.generate:
            peers.append(("hf_generate_static", "generate"))
    for name in names:
        model = None
        try:
            t = time.time()
            model = build_decoder(name, a, max(contexts))
            log(f"{name}: built in {time.time() - t:.1f} s, "
                f"{sum(p.numel() for p in model.parameters())} params")
            for L in contexts:
                for b in batches:
                    group, eager_tokens, compile_tokens = [], None, None
                    for peer, kind in peers:
                        row = dict(peer=peer, model=name, batch=b, context=L, **common)
                        try:
                            with torch.inference_mode():
                                if kind == "generate":
                                    r, toks = time_generate_peer(model, b, L, a)
                                else:
                                    r, toks = time_step_peer(model, b, L, a, kind == "compile")
                            row.update(r)
                            row["tokens_per_s"] = b * 1e3 / r["ms_per_token_p50"]
                            if kind == "eager":
                                eager_tokens = toks
                            elif kind == "compile":
                                compile_tokens = toks
                            for key, ref in (("tokens_match_eager", eager_tokens),
                                             ("tokens_match_compile", compile_tokens)):
                                if kind in key or ref is None or toks is None:
                                    continue
                                n = min(ref.shape[1], toks.shape[1])
                                row[key] = float((ref[:, :n] == toks[:, :n]).float().mean())
                            log(f"{name} b{b} L{L} {peer}: p50 {row['ms_per_token_p50']:.3f} ms, "
                                f"p95 {row['ms_per_token_p95']:.3f} ms, {row['tokens_per_s']:.0f} tok/s"
                                + (f", compiled in {row['compile_s']} s" if row.get("compile_s") else ""))
                        except Exception as e:
                            traceback.print_exc()
                            row["error"] = f"{type(e).__name__}: {e}"[:1000]
                            log(f"{name} b{b} L{L} {peer}: FAILED: {row['error'][:300]}")
                        finally:
                            torch._dynamo.reset()
                            if cuda:
                                torch.cuda.empty_cache()
                        group.append(row)
                    ok = [r for r in group if "ms_per_token_p50" in r]
                    if ok:
                        best = min(ok, key=lambda r: r["ms_per_token_p50"])
                        for r in ok:
                            r["peer_to_beat"] = r is best
                    rows += group
        except Exception as e:
            traceback.print_exc()
            rows.append(dict(peer="build", model=name, error=f"{type(e).__name__}: {e}"[:1000], **common))
        finally:
            model = None
            if cuda:
                torch.cuda.empty_cache()

    def f(x, spec):
        return format(x, spec) if isinstance(x, (int, float)) else "-"

    print(f"{'model':<11} {'batch':>5} {'ctx':>5}  {'peer':<22} {'p50 ms/tok':>10} {'p95 ms/tok':>10} "
          f"{'tokens/s':>10} {'compile s':>9}")
    for r in rows:
        if "error" in r:
            print(f"{r['model']:<11} {r.get('batch', '-'):>5} {r.get('context', '-'):>5}  "
                  f"{r['peer']:<22} FAILED: {r['error'][:80]}")
            continue
        print(f"{r['model']:<11} {r['batch']:>5} {r['context']:>5}  {r['peer']:<22} "
              f"{f(r['ms_per_token_p50'], '10.3f')} {f(r['ms_per_token_p95'], '10.3f')} "
              f"{f(r['tokens_per_s'], '10.1f')} {f(r['compile_s'], '9.1f')}"
              + (" *" if r.get("peer_to_beat") else ""))
    print("* the peer to beat (fastest p50) at that batch and context")
    lines = "\n".join(json.dumps(r) for r in rows) + "\n"
    if a.json:
        with open(a.json, "w") as fh:
            fh.write(lines)
        log(f"wrote {len(rows)} JSON lines to {a.json}")
    else:
        sys.stdout.write(lines)
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
