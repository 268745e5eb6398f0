#!/usr/bin/env bash
# Runs the cargo-fuzz targets of fuzz/ (ONNX import, the `.pb` and `.npy` readers, the IR
# text parser, artifact loading), each for SECONDS (default 60), from its seed corpus
# fuzz/seeds/TARGET plus the corpus earlier runs grew in fuzz/corpus/TARGET. A crash, a
# timeout of one input or an out-of-memory fails the run; libFuzzer saves the input in
# fuzz/artifacts/TARGET/, and `cargo fuzz run TARGET THAT_FILE` replays it (then add it as
# a regression test that reads it from tests/data or frontends/tests/data).
#
#   scripts/fuzz.sh                  every target, 60 s each
#   scripts/fuzz.sh import text 600  those targets, 10 minutes each
#
# cargo-fuzz is installed if missing (cargo install --locked cargo-fuzz, into
# ~/.cargo/bin). It wants a nightly compiler for -Zsanitizer; on a stable toolchain
# RUSTC_BOOTSTRAP=1 lets stable rustc take the flag.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO/fuzz"

step() { echo "==> $*" >&2; }

SECONDS_EACH=60
targets=()
for a in "$@"; do
    if [[ "$a" =~ ^[0-9]+$ ]]; then
        SECONDS_EACH="$a"
    else
        targets+=("$a")
    fi
done

if [[ -f "$HOME/.cargo/env" ]]; then
    # shellcheck disable=SC1091
    source "$HOME/.cargo/env"
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    step "installing cargo-fuzz"
    cargo install --locked cargo-fuzz
fi
export RUSTC_BOOTSTRAP=1
# Build options, the same for `build` and `run` (else `run` builds again). cargo-fuzz
# defaults to one codegen unit per crate, which serializes the instrumented build of the
# big crates (wgpu, naga, gopt-ir) on a 2-core machine.
FLAGS=(--codegen-units 16)

if ((${#targets[@]} == 0)); then
    mapfile -t targets < <(cargo fuzz list)
fi

# One build for all targets (the instrumented dependency tree is the slow part).
step "cargo fuzz build (${targets[*]})"
cargo fuzz build "${FLAGS[@]}"

failed=()
for t in "${targets[@]}"; do
    step "fuzz $t for ${SECONDS_EACH}s"
    mkdir -p "corpus/$t"
    seeds=()
    [[ -d "seeds/$t" ]] && seeds=("seeds/$t")
    # -timeout: one input running 10 s is a hang; -rss_limit_mb / -malloc_limit_mb: an
    # input that makes the reader allocate 2 GiB is a crash (sizes must be checked
    # against the bytes that back them first).
    mkdir -p "artifacts/$t"
    set +e
    cargo fuzz run "${FLAGS[@]}" "$t" "corpus/$t" "${seeds[@]}" -- \
        -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
        -malloc_limit_mb=2048 -print_final_stats=1 > "artifacts/$t/fuzz.log" 2>&1
    rc=$?
    set -e
    tail -40 "artifacts/$t/fuzz.log"
    if [[ "$rc" != 0 ]]; then
        failed+=("$t")
        echo "fuzz $t: FAILED (exit $rc; the input is in fuzz/artifacts/$t/, the log in fuzz/artifacts/$t/fuzz.log)" >&2
    else
        echo "fuzz $t: no crash in ${SECONDS_EACH}s" >&2
    fi
done

if ((${#failed[@]})); then
    echo "fuzz: ${#failed[@]} target(s) crashed: ${failed[*]}" >&2
    exit 1
fi
step "fuzz: no crash (${targets[*]}, ${SECONDS_EACH}s each)"
