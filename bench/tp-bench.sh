#!/usr/bin/env bash
# On a GPU machine: tensor parallelism on the TinyLlama-1.1B shape (bench/make_decoder.py
# --preset tinyllama: 22 layers, hidden 2048, 32/4 heads, MLP 5632, vocab 32000), bf16,
# batch 32, N ranks against 1 GPU, in one run:
#
#   1. decode: `gopt bench --decode --tensor-parallel N --batch 32 --context 128`, the
#      split step (wall clock per run over all ranks) against the same step on one GPU
#      (CUDA events), with the speed-up and the scaling efficiency;
#   2. prefill: `gopt generate --max-new-tokens 1` at batch 32 with 128-token prompts,
#      the time to the first token (the prefill step with the host's work) with
#      --tensor-parallel N and without;
#   3. $OUT/summary.txt: one line each, the issue's target (>= 1.6x at 2 GPUs) stated
#      as met or not only from these numbers.
#
# Exit status 1 when a run fails (not when a target is missed: the summary says that).
# usage: bench/tp-bench.sh GOPT_BINARY OUT RANKS
set -uo pipefail
GOPT="$1"
OUT="$2"
N="$3"
HERE="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$OUT"
MODELDIR="${MODELDIR:-/tmp/gopt-decode-models}"
mkdir -p "$MODELDIR"
M="$MODELDIR/tinyllama.onnx"
[[ -f "$M" ]] || python3 "$HERE/make_decoder.py" -o "$M" --preset tinyllama --external-data \
    > "$OUT/make_decoder.log" 2>&1 || { echo "make_decoder.py failed"; tail -5 "$OUT/make_decoder.log"; exit 1; }
status=0
"$GOPT" bench "$M" --decode --tensor-parallel "$N" --batch 32 --context 128 --precision bf16 \
    --iters 100 --json > "$OUT/decode.json" 2> "$OUT/decode.err" \
    || { status=1; echo "decode bench failed: $(tail -3 "$OUT/decode.err")"; }
prompt="$(python3 -c 'print(",".join(str((i * 7919) % 32000) for i in range(128)))')"
for tp in "$N" 0; do
    flags=(); ((tp > 0)) && flags=(--tensor-parallel "$tp")
    "$GOPT" generate "$M" --prompt-ids "$prompt" --batch 32 --max-new-tokens 1 --backend cuda \
        --precision bf16 --max-context 256 "${flags[@]}" --json > "$OUT/prefill_tp$tp.json" \
        2> "$OUT/prefill_tp$tp.err" \
        || { status=1; echo "prefill (tp $tp) failed: $(tail -3 "$OUT/prefill_tp$tp.err")"; }
done
python3 - "$OUT" "$N" <<'PY' | tee "$OUT/summary.txt"
import json, os, sys
out, n = sys.argv[1], int(sys.argv[2])
def load(name):
    p = os.path.join(out, name)
    return json.load(open(p)) if os.path.getsize(p) > 0 else None
d = load("decode.json")
if d:
    s, o = d["tensor_parallel"], d["one_gpu"]
    verdict = "met" if d["speed_up"] >= 1.6 else "not met"
    print(f"decode b32 ctx128 bf16: {n} ranks {s['p50_ms']:.3f} ms ({s['tokens_per_s']:.0f} tok/s), "
          f"1 GPU {o['p50_ms']:.3f} ms ({o['tokens_per_s']:.0f} tok/s): speed-up {d['speed_up']:.2f}x, "
          f"scaling {100 * d['scaling_efficiency']:.0f}%" + (f"; >= 1.6x target {verdict}" if n == 2 else ""))
a, b = load(f"prefill_tp{n}.json"), load("prefill_tp0.json")
if a and b:
    up = b["time_to_first_token_ms"] / a["time_to_first_token_ms"]
    verdict = "met" if up >= 1.6 else "not met"
    print(f"prefill b32 x 128 bf16 (time to first token): {n} ranks {a['time_to_first_token_ms']:.2f} ms, "
          f"1 GPU {b['time_to_first_token_ms']:.2f} ms: speed-up {up:.2f}x, scaling {100 * up / n:.0f}%"
          + (f"; >= 1.6x target {verdict}" if n == 2 else ""))
PY
exit $status
