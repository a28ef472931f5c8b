#!/usr/bin/env bash
# Installs what tests/e2e/test_loaders.py needs into the e2e venv, idempotently (a marker per pin set):
#   runai-model-streamer[s3]  the Run:ai streamer (--load-format runai_streamer) and its S3 backend
#   tensorizer                vLLM's pin (--load-format tensorizer)
#   moto[server]              a real S3-protocol server on 127.0.0.1 (the object-store source)
# Runs after tests/e2e/bootstrap.sh (needs its uv and venv); torch is held by the same overrides.
set -euo pipefail
HOME_DIR=${VOS_E2E_HOME:-$HOME/.cache/vllm-otel-startup/e2e}
V="$HOME_DIR/venv-vllm"
UV="$HOME_DIR/uvtool/bin/uv"
export UV_NATIVE_TLS=1 UV_CACHE_DIR="$HOME_DIR/uv-cache"
PINS=('runai-model-streamer[s3]==0.15.7' 'tensorizer==2.10.1' 'moto[server]>=5,<6')
MARK="$V/.loaders-ok-$(printf '%s\n' "${PINS[@]}" | sha256sum | cut -c1-12)"
[ -f "$MARK" ] && exit 0
FIND_LINKS=()
for d in /opt/wheels; do [ -d "$d" ] && FIND_LINKS+=(--find-links "$d"); done
"$UV" pip install -q -p "$V/bin/python" "${FIND_LINKS[@]}" --override "$HOME_DIR/uv-overrides.txt" \
  --compile-bytecode "${PINS[@]}"
"$V/bin/python" -c 'import runai_model_streamer, tensorizer, moto.server'
touch "$MARK"
