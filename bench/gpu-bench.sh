#!/usr/bin/env bash
# On the GPU machine: exports the benchmark models and times PyTorch (bench/peers.py),
# then times gopt on the same ONNX files (`gopt bench`, bf16, batch 1 and 32), all in
# one run, and writes $OUT/bench.md (the table docs/benchmarks.md takes) and the JSON;
# then profiles each kernel against the GPU's measured peaks (`--profile --plot`):
# $OUT/profile_*.{txt,json}, $OUT/roofline_*.svg, and $OUT/classes.md (bench/classes.py).
#
# usage: bench/gpu-bench.sh GOPT_BINARY OUT [--models resnet50,bert_base,gpt2]
# PyTorch runs each model with SDPA attention, eager and torch.compile in both modes
# (default, reduce-overhead) at each batch; the table takes the faster mode.
# The Llama-architecture decoder (TinyLlama 1.1B's shape, seq 128 prefill) is opt-in:
# `--models resnet50,bert_base,gpt2,llama` (or `--models llama`). Its export (4.4 GB of
# fp32 weights in $MODELDIR/llama.onnx.data) and compiles take minutes; a smaller stack:
# GOPT_LLAMA_LAYERS=4 (and GOPT_LLAMA_HIDDEN=...) in the environment, read by peers.py.
# With GOPT_BEFORE=<an older gopt binary>, that binary's CUDA figures are taken in the
# same run too ($OUT/before_<model>_b<batch>.json), for before/after comparisons.
set -uo pipefail
GOPT="$1"
OUT="$2"
shift 2
MODELS="resnet50,bert_base,gpt2"
if [[ "${1:-}" == "--models" ]]; then MODELS="$2"; fi
mkdir -p "$OUT"
# The ONNX files are large: they stay out of $OUT.
MODELDIR="${MODELDIR:-/tmp/gopt-bench-models}"
# PROFILE_ONLY=1: export the models and profile them (below), timing nothing else.
PROFILE_ONLY="${PROFILE_ONLY:-0}"
if [[ "$PROFILE_ONLY" == 1 ]]; then
    python3 "$(dirname "$0")/peers.py" "$MODELDIR" --models "$MODELS" --export-only 2>&1 | tee "$OUT/peers.log"
else
    python3 "$(dirname "$0")/peers.py" "$MODELDIR" --models "$MODELS" 2>&1 | tee "$OUT/peers.log"
    cp "$MODELDIR/peers.json" "$OUT/"
fi
for m in ${MODELS//,/ }; do
    seq=(); [[ "$m" != resnet50 ]] && seq=(--seq 128)
    [[ "$PROFILE_ONLY" == 1 ]] || for b in 1 32; do
        "$GOPT" bench "$MODELDIR/$m.onnx" --backend cuda --batch "$b" "${seq[@]}" --precision bf16 --json \
            > "$OUT/gopt_${m}_b$b.json" 2> "$OUT/gopt_${m}_b$b.err" \
            || echo "gopt bench $m b$b failed: $(tail -3 "$OUT/gopt_${m}_b$b.err")"
        cat "$OUT/gopt_${m}_b$b.err" >> "$OUT/gopt.err"; rm -f "$OUT/gopt_${m}_b$b.err"
        # The WGSL path on the same GPU through Vulkan (bf16 runs as f16 there).
        if [[ "${WGPU:-1}" == 1 ]]; then
            "$GOPT" bench "$MODELDIR/$m.onnx" --backend wgpu --batch "$b" "${seq[@]}" --precision bf16 \
                --iters 100 --json > "$OUT/gopt_${m}_b${b}_wgpu.json" 2> "$OUT/gopt_${m}_b${b}_wgpu.err" \
                || echo "gopt bench --backend wgpu $m b$b failed: $(tail -3 "$OUT/gopt_${m}_b${b}_wgpu.err")"
            cat "$OUT/gopt_${m}_b${b}_wgpu.err" >> "$OUT/gopt.err"; rm -f "$OUT/gopt_${m}_b${b}_wgpu.err"
        fi
    done
    if [[ -n "${GOPT_BEFORE:-}" && "$PROFILE_ONLY" != 1 ]]; then
        for b in 1 32; do
            "$GOPT_BEFORE" bench "$MODELDIR/$m.onnx" --backend cuda --batch "$b" "${seq[@]}" --precision bf16 --json \
                > "$OUT/before_${m}_b$b.json" 2>> "$OUT/gopt.err" || echo "before: gopt bench $m b$b failed"
        done
    fi
    # Each kernel classed against the GPU's measured peaks and drawn on its roofline:
    # the text table, the JSON (bench/classes.py summarizes it) and the chart.
    for b in 1 32; do
        "$GOPT" bench "$MODELDIR/$m.onnx" --backend cuda --batch "$b" "${seq[@]}" --precision bf16 --profile \
            --iters 20 --plot "$OUT/roofline_${m}_b$b.svg" > "$OUT/profile_${m}_b$b.txt" 2>> "$OUT/gopt.err" \
            || echo "gopt bench --profile $m b$b failed"
        "$GOPT" bench "$MODELDIR/$m.onnx" --backend cuda --batch "$b" "${seq[@]}" --precision bf16 --profile \
            --iters 20 --json > "$OUT/profile_${m}_b$b.json" 2>> "$OUT/gopt.err" || true
    done
    [[ "$PROFILE_ONLY" == 1 ]] && continue
    [[ "${WGPU:-1}" == 1 ]] && "$GOPT" bench "$MODELDIR/$m.onnx" --backend wgpu --batch 32 "${seq[@]}" \
        --precision bf16 --profile --iters 10 > "$OUT/profile_${m}_b32_wgpu.txt" 2>> "$OUT/gopt.err"
    [[ "${WGPU:-1}" == 1 ]] && "$GOPT" bench "$MODELDIR/$m.onnx" --backend wgpu --batch 1 "${seq[@]}" \
        --precision bf16 --profile --iters 10 > "$OUT/profile_${m}_b1_wgpu.txt" 2>> "$OUT/gopt.err"
    "$GOPT" bench "$MODELDIR/$m.onnx" --backend cuda --batch 1 "${seq[@]}" --precision bf16 --no-cuda-graph --json \
        > "$OUT/gopt_${m}_b1_nograph.json" 2>> "$OUT/gopt.err" || true
done
[[ "$PROFILE_ONLY" == 1 ]] || python3 "$(dirname "$0")/table.py" "$OUT" | tee "$OUT/bench.md"
python3 "$(dirname "$0")/classes.py" "$OUT" | tee "$OUT/classes.md"
