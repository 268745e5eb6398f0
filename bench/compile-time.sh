#!/usr/bin/env bash
# Compile time and peak memory on real transformers exports, beside ONNX Runtime.
#
# Usage: bench/compile-time.sh [--models "bert_base gpt2 llama"] [--runs 3] [--no-all-buckets]
#
# The models are bench/graphs/*.onnx: graph-only copies of transformers' BERT-base,
# GPT-2 124M and a Llama-architecture 1.1B decoder (TinyLlama's shape, grouped-query
# attention), exported on the GPU machine by bench/peers.py (TorchScript exporter,
# opset 17, batch and seq dynamic) and stripped by bench/graph_only.py. Their weights
# (0.4, 0.6 and 4.1 GiB of fp32) are regenerated from the recorded shapes into
# ${GOPT_BENCH_DIR:-/tmp/gopt-bench} (random values, seed 0) once, and reused.
#
# Per model, each timed --runs times with the files in the page cache (a first,
# untimed run warms it), medians reported:
#   ort_s       onnxruntime creating an optimized CPU session (ORT_ENABLE_ALL) of the
#               same file, and its peak RSS
#   gopt_s      `gopt compile MODEL --bind batch=1 --bind seq=128 --precision bf16
#               --json`: import to plan (the sum of the stages gopt reports), and
#               the process's peak RSS (`peak_memory_bytes`)
#   artifact_s  the same with `-o DIR` (writing weights.bin, plan and reports), wall
#   all_s       every default bucket (no --bind), import to plan (--no-all-buckets
#               skips; the 1.1B decoder is skipped as well: 30 buckets of it are not
#               a configuration anyone ships)
# and the ratios the targets are stated in: gopt / ORT, peak / weights file, all / one.
#
# Needs target/release/gopt (cargo build --release); override with GOPT=path. Uses the
# project's Python venv (scripts/python-env.sh) and installs onnxruntime into it if it
# is missing (it is not a test dependency).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$SCRIPT_DIR/.." && pwd)"
GOPT="${GOPT:-$REPO/target/release/gopt}"
DIR="${GOPT_BENCH_DIR:-/tmp/gopt-bench}"
MODELS="bert_base gpt2 llama"
RUNS=3
ALL=1

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }

while [[ $# -gt 0 ]]; do
    case "$1" in
        --models) MODELS="$2"; shift 2 ;;
        --runs) RUNS="$2"; shift 2 ;;
        --no-all-buckets) ALL=0; shift ;;
        -h | --help) usage; exit 0 ;;
        *) echo "compile-time.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
    esac
done

if [[ ! -x "$GOPT" ]]; then
    echo "compile-time.sh: $GOPT not found; run 'cargo build --release' first" >&2
    exit 2
fi

PY="$(bash "$REPO/scripts/python-env.sh")"
if ! "$PY" -c "import onnxruntime" 2>/dev/null; then
    echo "installing onnxruntime into the venv (benchmark only)" >&2
    "$PY" -m pip install -q "onnxruntime==1.31.1" >&2
fi
mkdir -p "$DIR"
RESULTS="$(mktemp -d "${TMPDIR:-/tmp}/gopt-compile-time.XXXXXX")"
trap 'rm -rf "$RESULTS"' EXIT

ort_once() {
    "$PY" - "$1" <<'EOF'
import json, resource, sys, time
import onnxruntime as ort
so = ort.SessionOptions()
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
t = time.perf_counter()
ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
s = time.perf_counter() - t
print(json.dumps({"s": s, "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
EOF
}

gopt_once() { # model, extra args...
    local m="$1"; shift
    "$GOPT" compile "$m" --precision bf16 --json "$@" 2>/dev/null | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
print(json.dumps({"s": sum(s["ms"] for s in d["stages"]) / 1e3, "peak": d["peak_memory_bytes"],
                  "stages": {s["stage"]: s["ms"] for s in d["stages"]}, "buckets": len(d["buckets"])}))'
}

wall_once() { # command...
    local t0 t1
    t0=$(date +%s.%N)
    "$@" > /dev/null 2>&1
    t1=$(date +%s.%N)
    "$PY" -c "print('{\"s\": %f}' % ($t1 - $t0))"
}

for name in $MODELS; do
    cp -f "$REPO/bench/graphs/$name.onnx" "$DIR/$name.onnx"
    "$PY" "$SCRIPT_DIR/graph_only.py" regen "$DIR/$name.onnx" >&2
    m="$DIR/$name.onnx"
    echo "$name: warming the page cache" >&2
    ort_once "$m" > /dev/null
    gopt_once "$m" --bind batch=1 --bind seq=128 > /dev/null
    for ((r = 1; r <= RUNS; r++)); do
        echo "$name: run $r/$RUNS" >&2
        ort_once "$m" > "$RESULTS/$name-ort-$r.json"
        gopt_once "$m" --bind batch=1 --bind seq=128 > "$RESULTS/$name-gopt-$r.json"
        rm -rf "$DIR/$name.gopt"
        sync
        wall_once "$GOPT" compile "$m" --bind batch=1 --bind seq=128 --precision bf16 \
            -o "$DIR/$name.gopt" > "$RESULTS/$name-art-$r.json"
        if [[ "$ALL" == 1 && "$name" != llama ]]; then
            gopt_once "$m" > "$RESULTS/$name-all-$r.json"
        fi
    done
done

"$PY" - "$RESULTS" "$DIR" "$RUNS" $MODELS <<'EOF'
import json, os, statistics, sys
res, d, runs, models = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
def load(name, kind):
    out = []
    for r in range(1, runs + 1):
        p = os.path.join(res, f"{name}-{kind}-{r}.json")
        if os.path.exists(p):
            out.append(json.load(open(p)))
    return out
med = lambda xs, k: statistics.median(x[k] for x in xs) if xs else None
gib = lambda b: b / 2**30
print("| model | weights file | ORT session | ORT peak | gopt import→plan | gopt / ORT | gopt peak | peak / weights | with artifact | all buckets (n) | all / one |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for name in models:
    w = os.path.getsize(os.path.join(d, f"{name}.weights"))
    o, g, a, al = load(name, "ort"), load(name, "gopt"), load(name, "art"), load(name, "all")
    os_, gs = med(o, "s"), med(g, "s")
    gp = max(x["peak"] for x in g)
    all_s = med(al, "s")
    all_cell = f"{all_s:.2f} s ({al[0]['buckets']})" if al else "–"
    ratio = f"{all_s / gs:.2f}×" if al else "–"
    print(f"| {name} | {gib(w):.2f} GiB | {os_:.2f} s | {gib(max(x['peak'] for x in o)):.2f} GiB "
          f"| {gs:.2f} s | {gs / os_:.2f}× | {gib(gp):.2f} GiB | {gp / w:.2f}× "
          f"| {med(a, 's'):.2f} s | {all_cell} | {ratio} |")
print()
print("Stages (median ms, one bucket):")
for name in models:
    g = load(name, "gopt")
    keys = list(g[0]["stages"].keys())
    print(f"- {name}: " + ", ".join(f"{k} {statistics.median(x['stages'][k] for x in g):.0f}" for k in keys))
EOF
