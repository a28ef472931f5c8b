"""vLLM's own log lines, read back from a start's serve log: its reported durations, the CUDA-graph capture rate,
each process's first line, every stamped line's time, and the lines of ours that both arms of a benchmark print
(the agent's self-cost lines, gpu/vos_gccount.py's full collections). Never our spans: a plain start has none."""

from __future__ import annotations

import calendar
import re
import time

FIGURES = {  # name -> a line's pattern whose group 1 is seconds (the largest match per start: the slowest rank)
    "weights_load_s": r"Loading weights took ([\d.]+) seconds",
    "model_loading_s": r"Model loading took [\d.]+ ?[GM]i?B and ([\d.]+) seconds",
    "torch_compile_s": r"torch\.compile (?:takes|took) ([\d.]+) s in total",
    "compiled_graph_load_s": r"from the cache, took ([\d.]+) s",
    "graph_capture_s": r"Graph capturing finished in ([\d.]+) secs",
    "init_engine_s": r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s",
}
CAPTURE = re.compile(r"Capturing CUDA graphs \((\w+)\):\s+100%\|[^|]*\|\s*(\d+)/\d+ \[[^<]*<[^,]*,\s*([\d.]+)it/s\]")
STAMP = re.compile(r"^(?:\((\w+) pid=(\d+)\) )?\w+ (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\.(\d{3}) \[([^\]]+?) pid=(\d+)\]",
                   re.M)
FULL_GC = re.compile(r"^vos-gc pid=(\d+) wall=[\d.]+ dur=([\d.]+) ", re.M)  # gpu/vos_gccount.py, both arms
SELF_COST = re.compile(r"self-cost (\w+) pid \d+: process cpu ([\d.]+)s; agent threads ([\d.]+)s \(([^)]*)\); "
                       r"other threads ([\d.]+)s(?:; span processor (\d+) calls ([\d.]+)s)?"
                       r"(?:; gc callbacks (\d+) imports watched (\d+))?"
                       r"(?:; PY_UNWIND callbacks (\d+) switched (\d+) times)?"
                       r"(?:; exports (\d+) of (\d+) spans, (\d+) woken by a phase's end)?"
                       r"(?:; sampler (\d+) ticks \(([^)]*)\))?"
                       r"(?:; main thread waited (\d+) times)?")


def figures(log: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, pattern in FIGURES.items():
        found = [float(x) for x in re.findall(pattern, log)]
        if found:
            out[name] = max(found)
    rates: dict[str, list[float]] = {}
    for mode, _n, rate in CAPTURE.findall(log):
        rates.setdefault(mode, []).append(float(rate))
    for mode, rs in rates.items():  # one bar per rank: the slowest
        out[f"capture_{mode.lower()}_it_s"] = min(rs)
    return out


def first_lines(log: str, spawn_ns: int) -> dict[str, float]:
    """Seconds from the launch to each process's first vLLM log line, by process name (the launcher: ``launcher``;
    several of one kind: the latest)."""
    first: dict[int, tuple[str, float]] = {}
    for m in STAMP.finditer(log):
        _, _, stamp, ms, _, pid = m.groups()
        pid = int(pid)
        if pid in first:
            continue
        first[pid] = (_stamp_process(m), _seconds(stamp, ms) - spawn_ns / 1e9)
    out: dict[str, float] = {}
    for name, dt in first.values():
        out[name] = max(dt, out.get(name, dt))
    return out


def full_gcs(log: str) -> dict[str, float]:
    """Full collections per process and their seconds (``full_gc.EngineCore``, ``full_gc_s.EngineCore``), from the
    lines gpu/vos_gccount.py writes in both arms; a process named by its vLLM log lines' pid (others: ``other``,
    e.g. the resource tracker, opentelemetry-instrument's own interpreter). Empty without that module."""
    names: dict[int, str] = {}
    for m in STAMP.finditer(log):
        names.setdefault(int(m.group(6)), _stamp_process(m))
    out: dict[str, float] = {}
    for m in FULL_GC.finditer(log):
        who = names.get(int(m.group(1)), "other")
        out[f"full_gc.{who}"] = out.get(f"full_gc.{who}", 0) + 1
        out[f"full_gc_s.{who}"] = round(out.get(f"full_gc_s.{who}", 0.0) + float(m.group(2)), 4)
    return out


LINE = re.compile(STAMP.pattern + r" \[([^\]]+)\] (.*)$", re.M)  # a stamped line's source and message too


def _seconds(stamp: str, ms: str) -> float:
    """A vLLM log stamp (``2026-11-26 10:00:05`` and its milliseconds) as epoch seconds: the hosts run on UTC."""
    return calendar.timegm(time.strptime(stamp, "%Y-%m-%d %H:%M:%S")) + int(ms) / 1e3


def _process(name: str) -> str:
    """A vLLM process name without its rank or index (``VllmWorker-0``, ``EngineCore_DP1``)."""
    return re.sub(r"[_-]?(DP)?\d+$", "", name)


def _stamp_process(m: re.Match) -> str:
    """The process a STAMP line comes from: its prefix's or its own name, rank dropped; vLLM's MainProcess is
    ``launcher``."""
    name = m.group(1) or m.group(5)
    return "launcher" if name == "MainProcess" else _process(name)


def line_times(log: str, spawn_ns: int, ready_s: float | None) -> dict[str, float]:
    """Seconds from the launch to each vLLM log line, keyed by process, source and the message with its numbers
    masked (``#``) and its occurrence (``#2``: the second such line), up to ``READY``: the first /health 200."""
    out: dict[str, float] = {}
    for _, _, stamp, ms, pname, _, src, msg in LINE.findall(log):
        t = _seconds(stamp, ms) - spawn_ns / 1e9
        if ready_s is not None and t > ready_s:  # after ready: the driver's own waits, not the start
            break
        base = f"{_process(pname)} {src} {re.sub(r'[0-9.]+', '#', msg)[:70]}"
        n = 1
        while f"{base} #{n}" in out:
            n += 1
        out[f"{base} #{n}"] = t
    if ready_s is not None:
        out["READY"] = ready_s
    return out



def self_cost(log: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for (kind, cpu, threads, detail, others, _calls, proc_s, gcs, imports, unwinds, switches, exports, spans, woken,
         ticks, parts, waits) in SELF_COST.findall(log):
        figures = {"process_cpu_s": cpu, "agent_threads_s": threads, "other_threads_s": others}
        for part in filter(None, (p.strip() for p in detail.split(","))):
            name, _, secs = part.rpartition(" ")
            figures[f"{name}_s"] = secs.rstrip("s")
        for part in filter(None, (p.strip() for p in parts.split(","))):  # the sampler's CPU per part of a tick
            name, _, secs = part.rpartition(" ")
            figures[f"sampler.{name}_s"] = secs.rstrip("s")
        # the line's optional parts: an empty group is a part that line did not have
        figures.update({"span_processor_s": proc_s, "gc_callbacks": gcs, "imports_watched": imports,
                        "unwind_callbacks": unwinds, "unwind_switches": switches, "exports": exports,
                        "exported_spans": spans, "exports_after_phase": woken, "sampler_ticks": ticks,
                        "main_thread_waits": waits})
        for key, v in figures.items():
            if v:
                out[f"{kind}.{key}"] = out.get(f"{kind}.{key}", 0.0) + float(v)
    return out
