#!/usr/bin/env bash
# Compile-time benchmark on synthetic BERT-style encoders of growing depth.
#
# Usage: bench/compile-time.sh [--layers "1 2 4 8 12 24"] [--seq 128] [--batch 1] [--runs 3]
#                              [--norm layernorm|decomposed|rms] [--gelu erf|tanh]
#
# Generates (with bench/make_transformer.py) one model per layer count -- hidden 768,
# heads 12, ffn 3072 (BERT-base widths) but vocab 1000 instead of 30522 to keep the
# files small (the embedding table is the only thing vocab changes) -- into
# ${GOPT_BENCH_DIR:-/tmp/gopt-bench}, reusing files that already exist. Then runs
#   target/release/gopt compile MODEL --bind batch=B --bind seq=S --json
# --runs times per model and prints a markdown table: layers, nodes before and after
# binding+folding, nodes and kernels after the optimizer, the largest e-graph, the
# median total ms (sum of the stages) and the median of each stage, in the order
# `gopt compile --json` lists them. --norm decomposed writes each LayerNorm as the
# nine ops exporters emit (more nodes for the optimizer to fuse).
#
# Needs target/release/gopt (cargo build --release); override with GOPT=path.
# Creates the Python venv (scripts/python-env.sh) if needed.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$SCRIPT_DIR/.." && pwd)"
GOPT="${GOPT:-$REPO/target/release/gopt}"
DIR="${GOPT_BENCH_DIR:-/tmp/gopt-bench}"

LAYERS="1 2 4 8 12 24"
SEQ=128
BATCH=1
RUNS=3
NORM=layernorm
GELU=erf
HIDDEN=768
HEADS=12
FFN=3072
VOCAB=1000 # not 30522: keeps the files small; only the embedding table shrinks

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }

while [[ $# -gt 0 ]]; do
    case "$1" in
        --layers) LAYERS="$2"; shift 2 ;;
        --seq) SEQ="$2"; shift 2 ;;
        --batch) BATCH="$2"; shift 2 ;;
        --runs) RUNS="$2"; shift 2 ;;
        --norm) NORM="$2"; shift 2 ;;
        --gelu) GELU="$2"; shift 2 ;;
        -h | --help) usage; exit 0 ;;
        *) echo "compile-time.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
    esac
done

if [[ ! -x "$GOPT" ]]; then
    echo "compile-time.sh: $GOPT not found; run 'cargo build --release' first" >&2
    exit 2
fi

PY="$(bash "$REPO/scripts/python-env.sh")"
mkdir -p "$DIR"
RESULTS="$(mktemp -d "${TMPDIR:-/tmp}/gopt-compile-time.XXXXXX")"
trap 'rm -rf "$RESULTS"' EXIT

for L in $LAYERS; do
    suffix=""
    [[ "$NORM" != layernorm || "$GELU" != erf ]] && suffix="-${NORM}-${GELU}"
    model="$DIR/bert-l${L}-h${HIDDEN}-a${HEADS}-f${FFN}-v${VOCAB}${suffix}.onnx"
    if [[ -s "$model" ]]; then
        echo "reusing $model" >&2
    else
        "$PY" "$SCRIPT_DIR/make_transformer.py" -o "$model" --layers "$L" --hidden "$HIDDEN" \
            --heads "$HEADS" --ffn "$FFN" --vocab "$VOCAB" --norm "$NORM" --gelu "$GELU" >&2
    fi
    for ((r = 1; r <= RUNS; r++)); do
        echo "compile $L layers, run $r/$RUNS" >&2
        "$GOPT" compile "$model" --bind "batch=$BATCH" --bind "seq=$SEQ" --json \
            > "$RESULTS/l${L}-r${r}.json"
    done
done

"$PY" - "$RESULTS" "$RUNS" "$SEQ" "$BATCH" $LAYERS <<'EOF'
import json, os, statistics, sys

results, runs, seq, batch, layers = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
rows, stages = [], []
for L in layers:
    reps = []
    for r in range(1, runs + 1):
        with open(os.path.join(results, f"l{L}-r{r}.json")) as f:
            reps.append(json.load(f))
    per_stage = {}
    for rep in reps:
        for s in rep["stages"]:
            if s["stage"] not in stages:
                stages.append(s["stage"])
            per_stage.setdefault(s["stage"], []).append(s["ms"])
    total = statistics.median(sum(s["ms"] for s in rep["stages"]) for rep in reps)
    after = reps[0].get("after") or {}
    opt = (reps[0].get("buckets") or [{}])[0].get("optimizer") or {}
    opt_nodes = (opt.get("after") or {}).get("nodes", "-")
    kernels = (opt.get("after") or {}).get("kernels", "-")
    enodes = max((i["nodes"] for i in opt.get("iterations", [])), default="-")
    rows.append((L, reps[0]["before"]["nodes"], after.get("nodes", "-"), opt_nodes, kernels, enodes,
                 opt.get("stop_reason", "-"), total, {k: statistics.median(v) for k, v in per_stage.items()}))

print(f"batch={batch} seq={seq}, median of {runs} runs, times in ms")
print()
head = ["layers", "nodes imported", "after folding", "optimized", "kernels", "max e-nodes", "stop", "total ms"] + [f"{s} ms" for s in stages]
print("| " + " | ".join(head) + " |")
print("|" + "|".join("---:" for _ in head) + "|")
for L, nb, na, no, kn, en, stop, total, med in rows:
    cells = [L, nb, na, no, kn, en, stop, f"{total:.1f}"] + [f"{med[s]:.1f}" if s in med else "-" for s in stages]
    print("| " + " | ".join(str(c) for c in cells) + " |")
EOF
