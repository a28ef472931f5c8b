#!/usr/bin/env bash
# Installs what the live-startup proof (tests/e2e/test_live_startup.py) needs besides tests/e2e/bootstrap.sh's pkgroot
# (which already holds vmalert: Debian's victoria-metrics package ships it), idempotently:
#   live/pkgroot/usr/bin/prometheus-alertmanager   Debian trixie's Alertmanager, unpacked (the system's apt
#                                                  setup is untouched)
#   /usr/share/prometheus/alertmanager/*.tmpl      its notification templates, copied from the package when absent:
#                                                  Debian's build reads them from that fixed path (without them it
#                                                  refuses its configuration)
# Prints the home directory.
set -euo pipefail
HOME_DIR=${VOS_E2E_HOME:-$HOME/.cache/vllm-otel-startup/e2e}
P="$HOME_DIR/live/pkgroot"
# shellcheck source=tests/e2e/trixie.sh
. "$(dirname "$0")/trixie.sh"
log() { printf '[live-bootstrap +%ss] %s\n' "$SECONDS" "$*" >&2; }
if [ ! -f "$P/.ok" ]; then
  log "unpacking prometheus-alertmanager from Debian trixie into $P"
  rm -rf "$P"
  unpack_trixie "$HOME_DIR/live/apt" "$P" prometheus-alertmanager
  [ -x "$P/usr/bin/prometheus-alertmanager" ] || { echo "no prometheus-alertmanager in the package" >&2; exit 1; }
  touch "$P/.ok"
fi
T=/usr/share/prometheus/alertmanager
if [ ! -f "$T/default.tmpl" ]; then
  log "installing Alertmanager's templates into $T"
  mkdir -p "$T" && cp "$P$T"/*.tmpl "$T"/
fi
log "live tools ready"
echo "$HOME_DIR"
