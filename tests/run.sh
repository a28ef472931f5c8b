#!/usr/bin/env bash
# The test command (README): installs what it needs (tests/{e2e,fleet,report,compat}/bootstrap.sh, tests/e2e/bootstrap_*.sh,
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
step "bootstrap report" bash tests/report/bootstrap.sh >/dev/null
step "bootstrap remote" bash tests/e2e/bootstrap_remote.sh >/dev/null
step "bootstrap ecosystem" bash tests/e2e/bootstrap_ecosystem.sh >/dev/null
step "bootstrap loaders" bash tests/e2e/bootstrap_loaders.sh >/dev/null
# The compat tier's environments are built beside the rest of the run (2.5-5.9 min on a fresh machine, before pytest
# until 2026-11-29): nice, in the idle I/O class, holding a lock the tier waits on before it reads them
# (tests/compat/compat_facts.py: wait_for_bootstrap). Its failure fails the run, with its log. Without flock: first.
E2E_HOME="${VOS_E2E_HOME:-$HOME/.cache/vllm-otel-startup/e2e}"
COMPAT_LOG=$(mktemp -t vos-compat-bootstrap.XXXXXX.log)
COMPAT_PID=
if command -v flock >/dev/null && command -v setsid >/dev/null; then
  LOW=(nice -n 19)
  ionice -c 3 true 2>/dev/null && LOW+=(ionice -c 3)
  mkdir -p "$E2E_HOME/compat"
  exec 9>"$E2E_HOME/compat/.bootstrap.lock"
  flock -x 9  # taken before pytest can look; the job's copy of fd 9 holds it until the job ends
  setsid bash -c 't0=$SECONDS; rc=0; "${@:2}" >/dev/null || rc=$?
                  echo "bootstrap compat (beside the run) $((SECONDS - t0))" >> "$1"; exit "$rc"' \
    _ "$STEPS" "${LOW[@]}" bash tests/compat/bootstrap.sh 2>"$COMPAT_LOG" &
  COMPAT_PID=$!
  exec 9>&-
  trap '[ -z "$COMPAT_PID" ] || kill -- -"$COMPAT_PID" 2>/dev/null || true' EXIT  # never left running
else
  step "bootstrap compat" bash tests/compat/bootstrap.sh >/dev/null
fi
V="$E2E_HOME/venv-vllm"
step "ruff" "$V/bin/python" -m ruff check src tests scripts dashboards support
step "bootstrap py3.12" bash tests/unit/bootstrap_py312.sh >/dev/null  # the unit tier's second Python (tests/py312/)
JUNIT=$(mktemp -t vos-junit.XXXXXX.xml)
# (a VOS_START_LEDGER of the caller's is kept: its starts, a line each)
KEEP_LEDGER=${VOS_START_LEDGER:+1}
export VOS_START_LEDGER="${VOS_START_LEDGER:-$(mktemp -t vos-starts.XXXXXX.jsonl)}"
rc=0
t0=$SECONDS
"$V/bin/python" -m pytest -rA -v --junitxml="$JUNIT" "${@:-tests}" || rc=$?
echo "pytest $((SECONDS - t0))" >> "$STEPS"
if [ -n "$COMPAT_PID" ]; then
  compat_rc=0; wait "$COMPAT_PID" || compat_rc=$?
  COMPAT_PID=
  [ "$compat_rc" = 0 ] || { echo "tests/compat/bootstrap.sh failed (exit $compat_rc):"; tail -n 40 "$COMPAT_LOG"; rc=1; }
fi
rm -f "$COMPAT_LOG"
"$V/bin/python" -m support.run_summary "$JUNIT" "$STEPS" "$VOS_START_LEDGER"
# why each test failed, last: a log cut to its tail keeps it (support/failure_digest.py)
[ "$rc" = 0 ] || "$V/bin/python" -m support.failure_digest "$JUNIT"
rm -f "$JUNIT" "$STEPS"
[ -n "$KEEP_LEDGER" ] || rm -f "$VOS_START_LEDGER"
exit "$rc"
