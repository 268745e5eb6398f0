#!/usr/bin/env bash
# On the GPU machine: weight-only quantized decode against bf16, in one run.
#
#   1. the TinyLlama-1.1B-shape decoder (bench/make_decoder.py --preset tinyllama,
#      random fp32 weights in external data) in $MODELDIR;
#   2. `gopt bench --decode` at batch 1 and 16, 128 tokens in the cache, in bf16 with
#      the weights as they are, with --quantize int8 and with --quantize int4 (groups of
#      128, symmetric): CUDA events around each replay of the decode step's CUDA graph,
#      against the memory roof of the bytes each step reads;
#   3. prefill at batch 32, 128-token prompts: `gopt generate --max-new-tokens 1`'s time
#      to first token (the prefill step with the host's work), bf16 against int4;
#   4. $OUT/quant.md, the table docs/benchmarks.md takes (bench/quant_table.py).
#
# usage: bench/quant-bench.sh GOPT_BINARY OUT
set -uo pipefail
GOPT="$1"
OUT="$2"
HERE="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$OUT"
MODELDIR="${MODELDIR:-/tmp/gopt-decode-models}"
mkdir -p "$MODELDIR"
M="$MODELDIR/tinyllama.onnx"
[[ -f "$M" ]] || python3 "$HERE/make_decoder.py" -o "$M" --preset tinyllama --external-data \
    2>&1 | tee "$OUT/make_decoder.log"
status=0
for q in bf16 int8 int4; do
    flags=()
    [[ "$q" != bf16 ]] && flags=(--quantize "$q")
    for b in 1 16; do
        "$GOPT" bench "$M" --decode --backend cuda --batch "$b" --context 128 --precision bf16 \
            "${flags[@]}" --iters 200 --json > "$OUT/decode_${q}_b$b.json" \
            2> "$OUT/decode_${q}_b$b.err" \
            || { status=1; echo "bench --decode $q b$b failed: $(tail -3 "$OUT/decode_${q}_b$b.err")"; }
    done
done
prompt="$(python3 -c 'print(",".join(str((i * 7919) % 32000) for i in range(128)))')"
for q in bf16 int4; do
    flags=()
    [[ "$q" != bf16 ]] && flags=(--quantize "$q")
    "$GOPT" generate "$M" --prompt-ids "$prompt" --batch 32 --max-new-tokens 2 --backend cuda \
        --precision bf16 --max-context 256 "${flags[@]}" --json > "$OUT/prefill_${q}_b32.json" \
        2> "$OUT/prefill_${q}_b32.err" \
        || { status=1; echo "prefill $q failed: $(tail -3 "$OUT/prefill_${q}_b32.err")"; }
done
python3 "$HERE/quant_table.py" "$OUT" | tee "$OUT/quant.md"
exit $status
