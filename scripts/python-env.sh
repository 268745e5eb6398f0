#!/usr/bin/env bash
# Create/refresh the project's Python venv at $REPO/.venv with the pinned
# packages from scripts/requirements.txt. Idempotent: a stamp file holding the
# sha256 of requirements.txt makes the second run a no-op.
#
# Usage: bash scripts/python-env.sh      (prints the venv's python path on stdout)
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$SCRIPT_DIR/.." && pwd)"
VENV="$REPO/.venv"
REQS="$SCRIPT_DIR/requirements.txt"
STAMP="$VENV/.requirements.sha256"
PY="$VENV/bin/python"

log() { echo "python-env: $*" >&2; }

want="$(sha256sum "$REQS" | cut -d' ' -f1)"

if [[ -x "$PY" && -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]] && "$PY" -c 'import sys' 2>/dev/null; then
    log "up to date ($VENV)"
    echo "$PY"
    exit 0
fi

if [[ ! -x "$PY" ]] || ! "$PY" -c 'import sys' 2>/dev/null; then
    log "creating venv at $VENV with $(command -v python3) ($(python3 --version 2>&1))"
    rm -rf "$VENV"
    python3 -m venv "$VENV"
else
    log "requirements changed, updating $VENV"
fi

rm -f "$STAMP"
log "installing $(grep -Ev '^\s*(#|$)' "$REQS" | paste -sd' ')"
"$PY" -m pip install --quiet --disable-pip-version-check -r "$REQS" >&2
echo "$want" > "$STAMP"
log "done ($("$PY" -c 'import onnx, numpy; print(f"onnx {onnx.__version__}, numpy {numpy.__version__}")'))"
echo "$PY"
