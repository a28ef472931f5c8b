#!/usr/bin/env bash
# The test command (README): installs what it needs (tests/{e2e,fleet,report,compat}/bootstrap.sh, tests/e2e/bootstrap_*.sh), then lint, unit,
# fleet (dashboards, alerts, deployment) and end-to-end tests. Extra arguments go to pytest, e.g. `bash tests/run.sh tests/unit`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/e2e/bootstrap.sh >/dev/null
bash tests/e2e/bootstrap_live.sh >/dev/null
bash tests/fleet/bootstrap.sh >/dev/null
bash tests/report/bootstrap.sh >/dev/null
bash tests/e2e/bootstrap_remote.sh >/dev/null
bash tests/e2e/bootstrap_ecosystem.sh >/dev/null
bash tests/e2e/bootstrap_loaders.sh >/dev/null
bash tests/compat/bootstrap.sh >/dev/null
V="${VOS_E2E_HOME:-$HOME/.cache/vllm-otel-startup/e2e}/venv-vllm"
"$V/bin/python" -m ruff check src tests scripts dashboards support
JUNIT=$(mktemp -t vos-junit.XXXXXX.xml)
rc=0
"$V/bin/python" -m pytest -rA -v --junitxml="$JUNIT" "${@:-tests}" || rc=$?
# why each test failed, last: a log cut to its tail keeps it (support/failure_digest.py)
[ "$rc" = 0 ] || "$V/bin/python" -m support.failure_digest "$JUNIT"
rm -f "$JUNIT"
exit "$rc"
