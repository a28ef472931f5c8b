#!/usr/bin/env bash
# What the remote-source tests (tests/e2e/test_weight_sources.py) need, idempotently, under $VOS_E2E_HOME:
#   fuse/     libfuse2 (Debian's package, unpacked here: the system's apt setup is untouched) for fusepy, which
#             mounts the throttled FUSE passthrough that stands in for slow shared storage
#   fusepy    in venv-vllm (pure Python; finds libfuse through FUSE_LIBRARY_PATH, support/slow_fs.py sets it)
# The hub server is support/hub_server.py (standard library: nothing to install).
set -euo pipefail
HOME_DIR=${VOS_E2E_HOME:-$HOME/.cache/vllm-otel-startup/e2e}
V="$HOME_DIR/venv-vllm"
UV="$HOME_DIR/uvtool/bin/uv"
export UV_NATIVE_TLS=1 UV_CACHE_DIR="$HOME_DIR/uv-cache"
log() { printf '[bootstrap_remote +%ss] %s\n' "$SECONDS" "$*" >&2; }

F="$HOME_DIR/fuse"
if [ ! -f "$F/.ok" ]; then
  log "unpacking libfuse2 into $F"
  A="$HOME_DIR/apt-fuse"; rm -rf "$A" "$F"; mkdir -p "$A/debs" "$F"
  (cd "$A/debs" && apt-get -qq download libfuse2 2>/dev/null || apt-get -qq download libfuse2t64)
  for d in "$A"/debs/*.deb; do dpkg-deb -x "$d" "$F"; done
  rm -rf "$A"
  [ -n "$(find "$F" -name 'libfuse.so.2' -print -quit)" ] || { log "no libfuse.so.2 in the package"; exit 1; }
  touch "$F/.ok"
fi
if ! "$V/bin/python" -c "import fuse" 2>/dev/null; then
  log "installing fusepy into $V"
  "$UV" pip install -q -p "$V/bin/python" 'fusepy==3.0.1'
fi
echo "$F"
