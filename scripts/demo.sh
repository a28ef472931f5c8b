#!/usr/bin/env bash
# The main job on the embedded default: a real `vllm serve` of a tiny local model (built offline),
# under `opentelemetry-instrument` with no collector configured (startup traces go to a local file),
# stopped once ready, then the startup breakdown read back from that file.
#   bash scripts/demo.sh [--enforce-eager] [other vllm serve flags]
set -euo pipefail
cd "$(dirname "$0")/.."
VOS_E2E_BACKENDS=0 bash tests/e2e/bootstrap.sh >/dev/null
E2E="${VOS_E2E_HOME:-$HOME/.cache/vllm-otel-startup/e2e}"
V="$E2E/venv-vllm"
WORK="${VOS_DEMO_DIR:-$E2E/demo}"
mkdir -p "$WORK"
[ -f "$WORK/tiny-model/model.safetensors" ] || "$V/bin/python" support/make_tiny_model.py "$WORK/tiny-model" >/dev/null 2>&1
PORT=${VOS_DEMO_PORT:-8011}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE=1 VLLM_NO_USAGE_STATS=1
export VLLM_CACHE_ROOT="$WORK/vllm-cache" OTEL_PYTHON_VLLM_STARTUP_DIR="$WORK/starts" PATH="$V/bin:$PATH"
unset OTEL_EXPORTER_OTLP_ENDPOINT OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
echo "starting: opentelemetry-instrument vllm serve $WORK/tiny-model $* (log: $WORK/serve.log)"
opentelemetry-instrument vllm serve "$WORK/tiny-model" --host 127.0.0.1 --port "$PORT" \
  --max-model-len 256 --dtype float32 "$@" >"$WORK/serve.log" 2>&1 &
PID=$!
trap 'kill -TERM $PID 2>/dev/null || true; wait $PID 2>/dev/null || true' EXIT
for _ in $(seq 1 6000); do
  curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
  kill -0 $PID 2>/dev/null || { echo "vllm serve exited; see $WORK/serve.log"; break; }
  sleep 0.1
done
kill -TERM $PID 2>/dev/null || true
wait $PID 2>/dev/null || true
trap - EXIT
vllm-otel-startup report
