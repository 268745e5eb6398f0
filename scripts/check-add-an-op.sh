#!/usr/bin/env bash
# Checks that docs/add-an-op.md names exactly the files a new op touches: adds a dummy
# variant to an op family (element-wise by default) in a copy of the workspace and lets
# the compiler list them (scripts/check-add-an-op.py says how).
#   scripts/check-add-an-op.sh [elementwise|reduce|shape|nn|image|control|attention|fused]
set -euo pipefail
exec python3 "$(dirname "${BASH_SOURCE[0]}")/check-add-an-op.py" "$@"
