#!/bin/bash
# Benchmark only (issue 25): run ON the GPU machine, in stage2's call, before on_gpu.sh stage2, with this file and
# benchmarks/gpu/vos_gccount.py copied into .gpu/tools:
#
#     bash .gpu/tools/prepare.sh && CALL_LIMIT=540 DRIVER_QUEUE=.gpu/tools/q.json bash .gpu/tools/on_gpu.sh stage2
#
# 1. Byte-compiles the image's base site-packages (torch, sympy, networkx, numpy, transformers, requests, ...). The
#    image has no bytecode there and its Python never writes any (spawned children run with -B), so every process of
#    every start, in both arms, compiled those modules from source: 8.5-11.8 s of each API server's and EngineCore's
#    imports in the 2026-12-05 py-spy pair, and much of the host's start-to-start spread. An image built the usual
#    way (pip compiles at install) has the bytecode; both arms read it alike.
# 2. Installs vos_gccount.py as a .pth there: every Python process of both arms logs its full collections.
# Prints what it did on one line (the call's output). Idempotent; a second run compiles nothing new.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
SP=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
t0=$(date +%s.%N)
before=$(find "$SP" -name '*.pyc' | wc -l)
python3 -m compileall -q -j 16 "$SP" > /tmp/gpu_prepare_compileall.log 2>&1
rc=$?
after=$(find "$SP" -name '*.pyc' | wc -l)
cp "$HERE/vos_gccount.py" "$SP/" && echo "import vos_gccount" > "$SP/zz_vos_gccount.pth"
echo "gpu_prepare: $SP: compileall rc=$rc, .pyc $before -> $after in $(python3 -c "import time; print(round(time.time() - $t0, 1))") s; vos_gccount installed"
