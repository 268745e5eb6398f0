#!/usr/bin/env bash
# On the GPU machine (no Rust toolchain there): runs the test binaries built here and
# carried along, against the real GPU, and leaves logs in $OUT.
#
# Here:   scripts/gpu-check.sh --build      (builds and copies the binaries to gpu-bin/)
# There:  scripts/gpu-check.sh              (needs gpu-bin/, writes $OUT/gpu-check.log)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

if [[ "${1:-}" == "--build" ]]; then
    cargo test --profile test-opt --test cuda_kernels --no-run 2>&1 | tail -1
    bin="$(ls -t target/test-opt/deps/cuda_kernels-* | grep -v '\.d$' | head -1)"
    mkdir -p gpu-bin
    cp "$bin" gpu-bin/cuda_kernels
    strip gpu-bin/cuda_kernels 2>/dev/null || true
    ls -la gpu-bin
    exit 0
fi

OUT="${OUT:-/tmp/gopt-gpu-out}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export GOPT_CUDA_INCLUDE="${GOPT_CUDA_INCLUDE:-/usr/local/cuda/include}"
export GOPT_REPO="$REPO"
{
    echo "== $(date -u +%FT%TZ) commit $(cat gpu-bin/COMMIT 2>/dev/null || echo unknown)"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
    echo "== generated kernels against the interpreter, and their bandwidth"
    ./gpu-bin/cuda_kernels --ignored --nocapture --test-threads 1
} 2>&1 | tee "$OUT/gpu-check.log"
