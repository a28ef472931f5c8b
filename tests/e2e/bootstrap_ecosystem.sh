#!/usr/bin/env bash
# Installs what tests/e2e/test_distro_coexistence.py needs, idempotently (after tests/e2e/bootstrap.sh):
#   otel-distro/   opentelemetry-distro (the version matching the installed opentelemetry-instrumentation),
#                  installed on its own, never into venv-vllm: the tests put it on PYTHONPATH in either
#                  entry-point order
set -euo pipefail
HOME_DIR=${VOS_E2E_HOME:-$HOME/.cache/vllm-otel-startup/e2e}
export UV_NATIVE_TLS=1 UV_CACHE_DIR="$HOME_DIR/uv-cache"
UV="$HOME_DIR/uvtool/bin/uv"
V="$HOME_DIR/venv-vllm"
VER=$("$V/bin/python" -c "from opentelemetry.instrumentation.version import __version__ as v; print(v)")
D="$HOME_DIR/otel-distro"
if [ ! -f "$D/.ok-$VER-pyc" ]; then
  printf '[ecosystem-bootstrap] opentelemetry-distro==%s into %s\n' "$VER" "$D" >&2
  rm -rf "$D"
  "$UV" pip install -q -p "$V/bin/python" --target "$D" --no-deps --compile-bytecode "opentelemetry-distro==$VER"
  touch "$D/.ok-$VER-pyc"
fi
# edot/   Elastic's distribution of OpenTelemetry (EDOT Python), a vendor distro beside ours, with its own pinned
#         OpenTelemetry packages: kept are those and EDOT's own modules; the general libraries its install brings
#         (protobuf, requests, packaging, psutil, ...) are dropped so that, put first on PYTHONPATH as an image would
#         have them, they never shadow vLLM's. With its bytecode: PYTHONDONTWRITEBYTECODE=1 (this machine's) would
#         have every process of the start compile EDOT's OpenTelemetry again
EDOT_VER=1.18.0
E="$HOME_DIR/edot"
if [ ! -f "$E/.ok-$EDOT_VER-pyc" ]; then
  printf '[ecosystem-bootstrap] elastic-opentelemetry==%s into %s\n' "$EDOT_VER" "$E" >&2
  rm -rf "$E"
  "$UV" pip install -q -p "$V/bin/python" --target "$E" --compile-bytecode "elastic-opentelemetry==$EDOT_VER"
  for p in "$E"/*; do
    case "$(basename "$p")" in
      opentelemetry|opentelemetry_*|elasticotel|elastic_opentelemetry-*|uuid_utils|uuid_utils-*) ;;
      *) rm -rf "$p" ;;
    esac
  done
  touch "$E/.ok-$EDOT_VER-pyc"
fi
