#!/bin/sh
# autoinstrumentation.sh PYTHON PACKAGE TARGET: install PACKAGE (a path or requirement) into PYTHON's environment,
# then copy into TARGET (pip --target, no dependency resolution of its own) every distribution that install added
# or changed, plus opentelemetry-instrumentation (its sitecustomize must be under TARGET, where the Operator's
# PYTHONPATH points, even when the environment already had it). TARGET then holds what the environment lacked, at
# the versions pip resolved against the environment's own packages.
set -eu
PY=$1 PKG=$2 TARGET=$3
TMP=$(mktemp -d)
"$PY" -m pip freeze --all | LC_ALL=C sort > "$TMP/before"
"$PY" -m pip install --no-cache-dir "$PKG"
"$PY" -m pip freeze --all | LC_ALL=C sort > "$TMP/after"
# added or changed: name==version lines (a local install of the package itself is "name @ file://...": PKG below)
LC_ALL=C comm -13 "$TMP/before" "$TMP/after" | grep '==' > "$TMP/added" || true
grep -qi '^opentelemetry-instrumentation==' "$TMP/added" \
  || grep -i '^opentelemetry-instrumentation==' "$TMP/after" >> "$TMP/added"
"$PY" -m pip install --no-cache-dir --no-deps --target "$TARGET" -r "$TMP/added" "$PKG"
test -f "$TARGET/opentelemetry/instrumentation/auto_instrumentation/sitecustomize.py"
rm -rf "$TMP"
