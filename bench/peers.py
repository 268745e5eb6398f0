#!/usr/bin/env python3
"""The benchmark models and their PyTorch timings, on the GPU machine.

Exports ResNet-50 (torchvision), BERT-base (seq 128) and GPT-2 124M with its LM head
(seq 128) to ONNX (random init, seed 0, fp32 weights: gopt lowers to bf16 itself), and
times PyTorch on the same GPU in bf16: eager and torch.compile, batch 1 with mode
"reduce-overhead" and batch 32 with the default mode, p50/p95 over CUDA events after
warm-up. Writes OUT/peers.json and the ONNX files OUT/<model>.onnx.

usage: bench/peers.py OUT [--iters 100] [--models resnet50,bert_base,gpt2]
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch


def models():
    import torchvision
    import transformers

    def resnet50():
        torch.manual_seed(0)
        m = torchvision.models.resnet50(weights=None).eval()
        return m, lambda b: (torch.randn(b, 3, 224, 224),), ["input"], {"input": {0: "batch"}}

    def bert_base():
        torch.manual_seed(0)
        cfg = transformers.BertConfig(attn_implementation="eager")
        m = transformers.BertModel(cfg, add_pooling_layer=False).eval()

        class Wrap(torch.nn.Module):
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, ids, mask):
                return self.m(input_ids=ids, attention_mask=mask).last_hidden_state

        def inputs(b):
            return (torch.randint(0, 30000, (b, 128)), torch.ones(b, 128, dtype=torch.int64))

        dyn = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
        return Wrap(m).eval(), inputs, ["input_ids", "attention_mask"], dyn

    def gpt2():
        torch.manual_seed(0)
        cfg = transformers.GPT2Config(attn_implementation="eager", use_cache=False)
        m = transformers.GPT2LMHeadModel(cfg).eval()

        class Wrap(torch.nn.Module):
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, ids):
                # An explicit all-ones mask: without one, transformers looks for packed
                # sequences in the position ids with torch.diff, which does not export.
                mask = torch.ones_like(ids)
                return self.m(input_ids=ids, attention_mask=mask, use_cache=False).logits

        def inputs(b):
            return (torch.randint(0, 50000, (b, 128)),)

        return Wrap(m).eval(), inputs, ["input_ids"], {"input_ids": {0: "batch", 1: "seq"}}

    return {"resnet50": resnet50, "bert_base": bert_base, "gpt2": gpt2}


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--models", default="resnet50,bert_base,gpt2")
    ap.add_argument("--export-only", action="store_true", help="write the ONNX files, time nothing")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    results = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0), "models": {}}
    table = models()
    for name in a.models.split(","):
        m, make_inputs, in_names, dyn = table[name]()
        path = os.path.join(a.out, f"{name}.onnx")
        t = time.time()
        torch.onnx.export(m, make_inputs(2), path, input_names=in_names, output_names=["output"],
                          dynamic_axes=dyn, opset_version=17, dynamo=False)
        print(f"{name}: exported to {path} in {time.time() - t:.1f} s", file=sys.stderr, flush=True)
        if a.export_only:
            continue
        r = {}
        mb = m.to("cuda", torch.bfloat16)
        for batch, mode in [(1, "reduce-overhead"), (32, "default")]:
            ins = tuple(x.cuda() for x in make_inputs(batch))
            if name == "resnet50":
                ins = tuple(x.to(torch.bfloat16) for x in ins)
            with torch.inference_mode():
                r[f"eager_b{batch}"] = timed(lambda: mb(*ins), a.iters)
                torch._dynamo.reset()
                c = torch.compile(mb, mode=mode)
                t = time.time()
                c(*ins)
                torch.cuda.synchronize()
                compile_s = time.time() - t
                r[f"compile_b{batch}"] = dict(timed(lambda: c(*ins), a.iters), mode=mode,
                                              compile_s=compile_s)
            print(f"{name} b{batch}: eager {r[f'eager_b{batch}']['p50_ms']:.3f} ms, "
                  f"torch.compile ({mode}) {r[f'compile_b{batch}']['p50_ms']:.3f} ms, "
                  f"compiled in {compile_s:.1f} s", file=sys.stderr, flush=True)
        results["models"][name] = r
        del m, mb
        torch.cuda.empty_cache()
    with open(os.path.join(a.out, "peers.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
