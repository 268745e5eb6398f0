#!/usr/bin/env bash
# On the GPU machine: LLM decode, gopt against PyTorch in one run.
#
#   1. the TinyLlama-1.1B-shape decoder with its KV cache (bench/make_decoder.py
#      --preset tinyllama: 22 layers, hidden 2048, 32/4 heads, MLP 5632, vocab 32000,
#      random fp32 weights in external data) in $MODELDIR;
#   2. `gopt bench --decode` in bf16 at batch 1 and 16, 128 tokens in the cache: the
#      decode step timed with CUDA events around each CUDA-graph replay, against the
#      memory roof (weights + cache bytes per token over the measured copy bandwidth);
#   3. `gopt generate` at batch 1: a 64-token prompt, 64 new tokens (time to first
#      token, milliseconds per token with the host's work, tokens/s);
#   4. bench/peers.py --decode: transformers' static-cache greedy decode, eager and under
#      torch.compile(reduce-overhead, fullgraph), same shape, same context, same batches;
#   5. $OUT/decode.md, the table docs/benchmarks.md takes (bench/decode_table.py).
#
# usage: bench/decode-bench.sh GOPT_BINARY OUT
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
for b in 1 16; do
    "$GOPT" bench "$M" --decode --backend cuda --batch "$b" --context 128 --precision bf16 \
        --iters 200 --json > "$OUT/gopt_decode_b$b.json" 2> "$OUT/gopt_decode_b$b.err" \
        || echo "gopt bench --decode b$b failed: $(tail -3 "$OUT/gopt_decode_b$b.err")"
done
"$GOPT" bench "$M" --decode --backend cuda --batch 1 --context 128 --precision bf16 --iters 200 \
    2>&1 | tee "$OUT/gopt_decode_b1.txt"
prompt="$(python3 -c 'print(",".join(str((i * 7919) % 32000) for i in range(64)))')"
"$GOPT" generate "$M" --prompt-ids "$prompt" --max-new-tokens 64 --backend cuda --precision bf16 \
    --json > "$OUT/gopt_generate_b1.json" 2> "$OUT/gopt_generate_b1.err" \
    || echo "gopt generate failed: $(tail -3 "$OUT/gopt_generate_b1.err")"
python3 "$HERE/peers.py" --decode --model tinyllama --batch 1,16 --context 128 \
    --json "$OUT/peers_decode.jsonl" 2>&1 | tail -20 | tee "$OUT/peers_decode.log"
python3 "$HERE/decode_table.py" "$OUT" | tee "$OUT/decode.md"
