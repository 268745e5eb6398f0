#!/usr/bin/env bash
# The whole test suite, as CI runs it:
#   1. the Python venv with the pinned onnx (scripts/python-env.sh),
#   2. the ONNX backend conformance cases in tests/data/conformance (generated once,
#      skipped while up to date), and a check that the committed quantized models in
#      tests/data/quantized are what scripts/make-quantized.py writes,
#   3. every crate's tests in the optimized test profile, snapshots never auto-accepted
#      (NVRTC from the venv's CUDA 13.0 wheels compiles every generated CUDA kernel),
#   4. a check that no snapshot is left pending review (*.snap.new).
# Extra arguments go to `cargo test` (e.g. `scripts/test.sh -p gopt-ir`).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

step() { echo "==> $*" >&2; }

step "python environment"
bash scripts/python-env.sh >/dev/null
# NVRTC and the CUDA headers come from the venv's pinned wheels (no GPU needed).
CU13="$(.venv/bin/python -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13"))')"
export LD_LIBRARY_PATH="$CU13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export GOPT_CUDA_INCLUDE="$CU13/include"

# Mesa's Vulkan drivers want a runtime dir; wgpu's tests run on lavapipe.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}"

step "conformance data"
.venv/bin/python scripts/gen-conformance.py tests/data/conformance

step "quantized test data"
qdir="$(mktemp -d)"
.venv/bin/python scripts/make-quantized.py "$qdir" >/dev/null
if ! diff -rq "$qdir" tests/data/quantized >&2; then
    rm -rf "$qdir"
    echo "tests/data/quantized is not what scripts/make-quantized.py writes: rerun it" >&2
    exit 1
fi
rm -rf "$qdir"

step "cargo test --workspace --profile test-opt"
INSTA_UPDATE=no cargo test --workspace --profile test-opt --no-fail-fast "$@"

step "conformance totals"
INSTA_UPDATE=no cargo test --profile test-opt -p gopt --test conformance -q -- --nocapture 2>&1 \
    | grep -E '^conformance|% of'

step "pending snapshots"
pending="$(find . -name '*.snap.new' -not -path './target/*' -not -path './.venv/*')"
if [[ -n "$pending" ]]; then
    echo "snapshots changed and are pending review (run \`cargo insta review\`):" >&2
    echo "$pending" >&2
    exit 1
fi
step "all tests passed"
