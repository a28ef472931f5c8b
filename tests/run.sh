#!/usr/bin/env bash
# The test command (README): installs what it needs (tests/{e2e,fleet,compat}/bootstrap.sh, tests/e2e/bootstrap_*.sh,
# tests/unit/bootstrap_py312.sh), then lint, unit (also on Python >= 3.12, where patch points run frameless:
# tests/py312/), fleet (dashboards, alerts, deployment) and end-to-end tests.
# Extra arguments go to pytest, e.g. `bash tests/run.sh tests/unit`.
# Last it prints where the time went: each step, each test tier, every real `vllm serve` start (support/run_summary.py).
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=$(mktemp -t vos-steps.XXXXXX)
step() {  # step NAME COMMAND...: run it, note its wall time
  local name=$1 t0=$SECONDS; shift
  "$@"
  echo "$name $((SECONDS - t0))" >> "$STEPS"
}
step "bootstrap e2e" bash tests/e2e/bootstrap.sh >/dev/null
step "bootstrap live" bash tests/e2e/bootstrap_live.sh >/dev/null
step "bootstrap fleet" bash tests/fleet/bootstrap.sh >/dev/null
step "bootstrap report" bash tests/e2e/bootstrap_report.sh >/dev/null
step "bootstrap remote" bash tests/e2e/bootstrap_remote.sh >/dev/null
step "bootstrap ecosystem" bash tests/e2e/bootstrap_ecosystem.sh >/dev/null
step "bootstrap loaders" bash tests/e2e/bootstrap_loaders.sh >/dev/null
step "bootstrap compat" bash tests/compat/bootstrap.sh >/dev/null
V="${VOS_E2E_HOME:-$HOME/.cache/vllm-otel-startup/e2e}/venv-vllm"
step "ruff" "$V/bin/python" -m ruff check src tests benchmarks tools dashboards support
step "bootstrap py3.12" bash tests/unit/bootstrap_py312.sh >/dev/null  # the unit tier's second Python (tests/py312/)
JUNIT=$(mktemp -t vos-junit.XXXXXX.xml)
# (a VOS_START_LEDGER of the caller's is kept: its starts, a line each)
KEEP_LEDGER=${VOS_START_LEDGER:+1}
export VOS_START_LEDGER="${VOS_START_LEDGER:-$(mktemp -t vos-starts.XXXXXX.jsonl)}"
rc=0
t0=$SECONDS
"$V/bin/python" -m pytest -rA -v --junitxml="$JUNIT" "${@:-tests}" || rc=$?
echo "pytest $((SECONDS - t0))" >> "$STEPS"
"$V/bin/python" -m support.run_summary "$JUNIT" "$STEPS" "$VOS_START_LEDGER"
# why each test failed, last: a log cut to its tail keeps it (support/failure_digest.py)
[ "$rc" = 0 ] || "$V/bin/python" -m support.failure_digest "$JUNIT"
rm -f "$JUNIT" "$STEPS"
[ -n "$KEEP_LEDGER" ] || rm -f "$VOS_START_LEDGER"
exit "$rc"
