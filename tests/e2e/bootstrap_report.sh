#!/usr/bin/env bash
# What the report's picture tests need besides the e2e venv (idempotent): headless Chromium, to screenshot
# the waterfall HTML as a user sees it (without it tests/unit/cli/test_waterfall.py fails that test in CI, skips it elsewhere), and Pillow
# (the `report` extra) in the e2e venv for PNG output. Debian/Ubuntu; needs root for apt.
set -euo pipefail
V="${VOS_E2E_HOME:-$HOME/.cache/vllm-otel-startup/e2e}/venv-vllm"
log() { printf '[report bootstrap] %s\n' "$*" >&2; }
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    log "installing chromium (apt)"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
  else
    log "chromium missing and cannot apt-get install it here: the screenshot test fails in CI (CI=true), skips elsewhere"
  fi
fi
if [ -x "$V/bin/python" ] && ! "$V/bin/python" -c 'import PIL' 2>/dev/null; then
  log "installing pillow into $V"
  UV="${VOS_E2E_HOME:-$HOME/.cache/vllm-otel-startup/e2e}/uvtool/bin/uv"
  UV_NATIVE_TLS=1 "$UV" pip install -q -p "$V/bin/python" 'pillow>=10'
fi
# speedscope (npm; the trace viewer py-spy uses, a static page that runs offline): tests/unit/cli/test_trace_event.py
# opens a `report --trace-event` file in it in headless Chromium. Perfetto UI is not published as a package.
S="${VOS_E2E_HOME:-$HOME/.cache/vllm-otel-startup/e2e}/speedscope"
if [ ! -f "$S/node_modules/speedscope/dist/release/index.html" ]; then
  if command -v npm >/dev/null 2>&1; then
    log "installing speedscope into $S (npm)"
    mkdir -p "$S" && npm install --prefix "$S" --no-audit --no-fund -s speedscope@1.25.0 >/dev/null
  else
    log "npm missing: the trace viewer test fails in CI (CI=true), skips elsewhere"
  fi
fi
