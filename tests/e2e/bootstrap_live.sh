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
log() { printf '[live-bootstrap +%ss] %s\n' "$SECONDS" "$*" >&2; }
if [ ! -f "$P/.ok" ]; then
  log "unpacking prometheus-alertmanager from Debian trixie into $P"
  A="$HOME_DIR/live/apt"; rm -rf "$A" "$P"; mkdir -p "$A/lists/partial" "$A/cache/archives/partial" "$A/debs"
  MIRROR=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ${MIRROR:-http://deb.debian.org/debian} trixie main" \
    > "$A/sources.list"
  APT=(-o "Dir::State::Lists=$A/lists" -o "Dir::Etc::SourceList=$A/sources.list" -o Dir::Etc::SourceParts=/nonexistent
       -o "Dir::Cache=$A/cache" -o APT::Sandbox::User=root)
  apt-get "${APT[@]}" -qq update
  (cd "$A/debs" && apt-get "${APT[@]}" -qq download prometheus-alertmanager)
  for d in "$A"/debs/*.deb; do dpkg-deb -x "$d" "$P"; done
  rm -rf "$A"
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
