#!/usr/bin/env bash
# Fingerprints what the code generators write, without a GPU: for every conformance case
# (tests/data/conformance), shipped model and decoder, `gopt compile --target cuda` and
# `--target wgsl` write an artifact; this prints one line per case and target with the
# SHA-256 of the kernels' text and of plan.json's steps (its file hashes left out), or of
# the error. Two trees that print the same lines generate the same kernels and plans, so a
# refactor of the writers can be checked byte for byte on a machine with no GPU:
#
#   scripts/codegen-fingerprint.sh > before.txt   # on the old tree
#   scripts/codegen-fingerprint.sh > after.txt    # on the new tree
#   diff before.txt after.txt
#
# GOPT_BIN picks the binary (default: target/debug/gopt, built if missing).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
BIN="${GOPT_BIN:-target/debug/gopt}"
if [[ ! -x "$BIN" ]]; then
    cargo build -q
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

models=()
for d in tests/data/conformance/*/ tests/data/models/*/ tests/data/decoders/*/; do
    [[ -f "$d/model.onnx" ]] && models+=("${d%/}")
done
if ((${#models[@]} == 0)); then
    echo "codegen-fingerprint: no models under tests/data (run scripts/test.sh once to generate them)" >&2
    exit 2
fi

strip_plan() {
    python3 - "$1" <<'PY'
import hashlib, json, sys
plan = json.load(open(sys.argv[1]))
for k in ("sha256", "files"):
    plan.pop(k, None)
print(hashlib.sha256(json.dumps(plan, sort_keys=True).encode()).hexdigest()[:16])
PY
}

# One artifact per case, target and variant; `name` keeps each line's key stable.
fingerprint() {
    local name="$1" model="$2" target="$3"
    shift 3
    local out="$work/out" msg
    rm -rf "$out"
    if msg="$("$BIN" compile "$model" --target "$target" "$@" -o "$out" 2>&1 >/dev/null)"; then
        local src="$out/kernels.cu"
        [[ "$target" == wgsl ]] && src="$out/kernels.wgsl"
        echo "$name $target $* kernels=$(sha256sum "$src" | cut -c1-16) plan=$(strip_plan "$out/plan.json")"
    elif [[ "$msg" == *"panicked at"* ]]; then
        # A panic is a bug whatever the tree: named by its place (the message carries
        # the thread's id, which changes from run to run).
        echo "$name $target $* PANIC $(grep -m1 -o 'panicked at [^ ]*' <<<"$msg")"
    else
        echo "$name $target $* error=$(printf '%s' "$msg" | sha256sum | cut -c1-16)"
    fi
}

variants=("" "--precision bf16" "--precision fp16" "--quantize int4" "--quantize int8 --asymmetric")
for m in "${models[@]}"; do
    name="$(basename "$m")"
    case "$m" in
        tests/data/conformance/*)
            for target in cuda wgsl; do
                fingerprint "$name" "$m/model.onnx" "$target"
            done
            fingerprint "$name" "$m/model.onnx" cuda --precision bf16
            ;;
        *)
            # Bind the models' and decoders' symbolic dims (a prompt, then one decode step).
            read -r -a syms <<<"$("$BIN" inspect "$m/model.onnx" 2>/dev/null | grep -oE '\b(batch|seq|batch_size|sequence_length|past_sequence_length)\b' | sort -u | tr '\n' ' ')"
            for shape in prompt step; do
                binds=()
                # prompt: batch 2, 16 new positions; step: batch 1, one new position
                # after 16 (the GEMV and decode-attention paths).
                local_batch=2 new=16 past=0
                [[ "$shape" == step ]] && local_batch=1 new=1 past=16
                for s in "${syms[@]}"; do
                    case "$s" in
                        batch | batch_size) binds+=(--bind "$s=$local_batch") ;;
                        seq | sequence_length) binds+=(--bind "$s=$new") ;;
                        past_sequence_length) binds+=(--bind "$s=$past") ;;
                    esac
                done
                for v in "${variants[@]}"; do
                    read -r -a extra <<<"$v"
                    for target in cuda wgsl; do
                        fingerprint "$name/$shape" "$m/model.onnx" "$target" "${binds[@]}" "${extra[@]}"
                    done
                done
            done
            ;;
    esac
done
