#!/usr/bin/env bash
# A CPython >= 3.12 for the unit tier's second run (tests/run.sh): there sys.monitoring exists, so the span, ready and
# guard rows run frameless (src/vllm_otel_startup/agent/patching/frameless.py) instead of wrapped as on the project's
# 3.11. The interpreter comes from the machine image (pyenv's 3.12, else 3.13, else python3.12 / python3.13 on PATH);
# the registries here offer none. Prints the venv's python; prints nothing when the host has no such interpreter
# (tests/run.sh then says the run was skipped).
set -euo pipefail
cd "$(dirname "$0")/../.."
H="${VOS_E2E_HOME:-$HOME/.cache/vllm-otel-startup/e2e}"
V="$H/venv-py312"
STAMP="$V/.vos-stamp"
want="$(sha256sum pyproject.toml | cut -c1-16) $(pwd)"

interpreter() {
  local root="${PYENV_ROOT:-$HOME/.pyenv}" minor d c
  for minor in 3.12 3.13; do
    for d in $(ls -d "$root"/versions/"$minor".* 2>/dev/null | sort -V -r); do
      [ -x "$d/bin/python$minor" ] && "$d/bin/python$minor" -c 'import sys, ssl' 2>/dev/null && { echo "$d/bin/python$minor"; return; }
    done
    c=$(command -v "python$minor" 2>/dev/null) && "$c" -c 'import sys, ssl' 2>/dev/null && { echo "$c"; return; }
  done
  return 1
}

if [ -x "$V/bin/python" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$want" ]; then
  echo "$V/bin/python"
  exit 0
fi
PY=$(interpreter) || exit 0
rm -rf "$V"
mkdir -p "$H"
"$PY" -m venv "$V" >&2
"$V/bin/python" -m pip install -q --disable-pip-version-check -e ".[dev,dashboards,fleet-test]" 2>&1 \
  | grep -v "is ignored" >&2 || true
"$V/bin/python" -c 'import sys, vllm_otel_startup, pytest, jsonschema, psutil; assert sys.monitoring' >&2
echo "$want" > "$STAMP"
echo "$V/bin/python"
