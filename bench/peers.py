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
    ap = argparse.ArgumentParser()
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


if __name__ == "__main__":
    main()
