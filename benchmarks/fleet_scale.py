"""What a fleet's starts cost its metrics stores: N simulated starts (support/fleet_sim.py: recorded real starts,
metrics produced by the agent's own code) written into VictoriaMetrics over OTLP and into Prometheus by backfill
of their /metrics scrapes, with what the recording rules (dashboards/recording.py) record over them, then
measured: series created, bytes on disk, ingestion time, and the latency of every dashboard panel query, template
variable, alert expression and recording rule.

    python -m benchmarks fleet-scale --n 1000 10000 [--stores vm prom] [--json out.json]
    python -m benchmarks fleet-scale --n 100000 --stores vm --work /big --no-queries --end T   # ingest, keep it
    python -m benchmarks fleet-scale --n 100000 --stores vm --store /big/fleet-vm-.../vm --end T  # query it

Run it with the e2e venv's python (opentelemetry-sdk, prometheus-client, numpy, tqdm); the stores are the e2e
pkgroot's (tests/e2e/bootstrap.sh). Under `nice`: it is CPU-heavy. The recording rules' output over the whole
window is computed (fleet_sim.recorded_series: the rules' expressions at every evaluation, checked against the
store evaluating them in tests/fleet/test_fleet_sim.py) and imported, not evaluated minute by minute for a week.
Queries are the dashboards' as shipped (reading recorded series): a panel's query is a range query over its
dashboard's default time range (fleet overview 24h, compare 7d, one start 6h), step = range/1000 or the panel's
minimum interval where longer (as Grafana steps a panel of 1,000 points),
template variables are label-values lookups over that range; alert expressions and recording-rule expressions are
instant queries at the end of the window (a rule's latency is what one evaluation costs the store). Every query
runs ``--repeat`` times (VictoriaMetrics with nocache=1; once when a run takes over 10 s); p50/p95 are over those
runs, per query.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from benchmarks import command_parser
from support import fleet_sim as fs
from support.harness import free_port, wait_until

REPO = Path(__file__).resolve().parents[1]

PKG_BIN = Path(os.environ.get("VOS_E2E_HOME", Path.home() / ".cache/vllm-otel-startup/e2e")) / "pkgroot/usr/bin"
RANGES = {"now-6h": 6 * 3600, "now-24h": 86400, "now-7d": 7 * 86400}
SLOW_S = 10.0
TIMEOUT_S = 300.0  # a query still running then counts as failed (its time: this)


def bar(total: int, desc: str):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="start", file=sys.stderr, mininterval=2)


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def http(url: str, data: bytes | None = None, headers: dict | None = None, timeout: float = 300) -> bytes:
    req = urllib.request.Request(url, data=data, headers=headers or {})
    with urllib.request.urlopen(req, timeout=timeout) as r:  # noqa: S310 - loopback only
        return r.read()


# ---- the queries -------------------------------------------------------------------------------------------
LABELS = "labels"  # a template variable: label values over the dashboard's range


def queries() -> list[tuple[str, str, int, bool]]:
    """(source, PromQL, the dashboard's range in s, instant) of every panel target (instant as the panel asks:
    stat, bar gauge and table panels summarise the range at its end), template variable, alert and recording rule
    (instant, over the last hour); a variable's PromQL is ``label_values(<selector>, <label>)``."""
    from dashboards import generate, recording
    from dashboards.queries import all_queries, variable_queries, walk_panels

    ranges, instant, steps = {}, {}, {}
    for uid, doc in generate.dashboards().items():
        ranges[uid] = RANGES[doc["time"]["from"]]
        for panel in walk_panels(doc.get("panels", [])):
            for t in panel.get("targets") or []:
                source = f"dashboard/{uid}/{panel['title']}/{t['refId']}"
                instant[source] = bool(t.get("instant"))
                steps[source] = _seconds(panel.get("interval") or "15s")  # the panel's minimum interval
    out = [(q.source, q.template, ranges[q.source.split("/")[1]], instant[q.source], steps[q.source])
           if q.source.startswith("dashboard/") else (q.source, q.expr, 3600, True, 0) for q in all_queries()]
    out += [(f"variable/{src.split('/', 1)[1]}", expr, ranges[src.split("/")[1]], False, 0)
            for src, expr in variable_queries() if "$" not in expr.split(", ")[-1]]
    out += [(f"record/{r.record}", r.expr, 3600, True, 0) for r in recording.RECORDINGS]
    return out


def _seconds(duration: str) -> int:
    return int(duration[:-1]) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[duration[-1]]


def _concrete(expr: str, rng: int, one: dict[str, str]) -> str:
    """A query as Grafana sends it over a ``rng``-second range: $__range the range, $__interval its step (1 h at
    least: the stacked panel's minimum interval), $__rate_interval 5 m, the one-start dashboard's variables
    ``one`` (a start's pod and trace id, as its link from the overview fills them), every other variable All."""
    windows = {"__range": f"{rng}s", "__interval": f"{max(3600, rng // 1000)}s", "__rate_interval": "5m", **one}
    return re.sub(r"\$\{?(\w+)(?::\w+)?\}?", lambda m: windows.get(m.group(1), ".*"), expr)


def time_queries(base: str, end_s: int, repeat: int, vm: bool, start: fs.SimStart) -> list[dict]:
    from tqdm import tqdm

    one = {"pod": start.pod, "trace_id": fs.spans_of(start)[0].trace_id}
    out = []
    todo = queries()
    for source, expr, rng, instant, min_step in tqdm(todo, desc="queries", unit="q", file=sys.stderr, mininterval=2):
        if source.startswith("variable/"):
            sel, label = re.fullmatch(r"label_values\((.+), (\w+)\)", expr).groups()
            params = {"match[]": _concrete(sel, rng, one), "start": str(end_s - rng), "end": str(end_s)}
            url = f"{base}/api/v1/label/{label}/values?{urllib.parse.urlencode(params)}"
        else:
            expr = _concrete(expr, rng, one)
            params = {"query": expr, "time" if instant else "end": str(end_s)}
            if not instant:
                params |= {"start": str(end_s - rng), "step": str(max(min_step, rng // 1000))}  # as Grafana
            if vm:
                params["nocache"] = "1"
            url = f"{base}/api/v1/{'query' if instant else 'query_range'}?{urllib.parse.urlencode(params)}"
        times, series, error = [], 0, ""
        for _ in range(repeat):
            t0 = time.perf_counter()
            try:
                body = json.loads(http(url, timeout=TIMEOUT_S))
                series = len(body["data"]["result"] if isinstance(body["data"], dict) else body["data"])
            except urllib.error.HTTPError as exc:  # a query the store refuses is a result too
                error = f"{exc.code}: {exc.read()[:300].decode(errors='replace')}"
            except Exception as exc:  # noqa: BLE001 - a timeout is one too
                error = str(exc)[:200]
            times.append(time.perf_counter() - t0)
            if times[-1] > SLOW_S:  # one run that slow says enough
                break
        out.append({"source": source, "range_s": rng, "instant": instant, "p50_s": statistics.median(times),
                    "p95_s": sorted(times)[max(0, round(0.95 * len(times)) - 1)], "series": series, "error": error})
    return out


# ---- the recording rules' output ------------------------------------------------------------------------------
def recorded(starts: list[fs.SimStart], end_s: int, window_s: int) -> Iterator[tuple[dict, list[int], list[float]]]:
    """Every recording's series over the simulated window (and the hour after the last start)."""
    from dashboards import recording

    for rec in recording.RECORDINGS:
        yield from fs.recorded_series(starts, rec, interval_s=_seconds(recording.INTERVALS[rec.group]),
                                      first_s=end_s - window_s - 3600, last_s=end_s + 3600)


def import_recorded(base: str, starts: list[fs.SimStart], end_s: int, window_s: int) -> dict:
    """The recordings into VictoriaMetrics (/api/v1/import, JSON lines), replacing any imported before: series,
    points and seconds."""
    from dashboards import recording

    t0 = time.perf_counter()
    match = urllib.parse.urlencode({"match[]": f'{{__name__=~"({"|".join(recording.LEVELS)}):.+"}}'})
    http(f"{base}/api/v1/admin/tsdb/delete_series?{match}", b"")
    series = points = 0
    lines: list[str] = []

    def post() -> None:
        http(f"{base}/api/v1/import", "".join(lines).encode())
        lines.clear()

    for labels, ts, values in recorded(starts, end_s, window_s):
        lines.append(json.dumps({"metric": labels, "values": values, "timestamps": [t * 1000 for t in ts]}) + "\n")
        series, points = series + 1, points + len(ts)
        if len(lines) >= 2000:
            post()
    post()
    http(f"{base}/internal/force_flush")
    return {"recorded_series": series, "recorded_points": points, "record_s": time.perf_counter() - t0}


# ---- VictoriaMetrics over OTLP ------------------------------------------------------------------------------
def run_vm(starts: list[fs.SimStart], work: Path, a: argparse.Namespace, end_s: int) -> dict:
    port, data = free_port(), a.store or work / "vm"
    proc = subprocess.Popen([str(PKG_BIN / "victoria-metrics"), f"-httpListenAddr=127.0.0.1:{port}",
                             f"-storageDataPath={data}", "-opentelemetry.usePrometheusNaming",
                             "-search.latencyOffset=0s", "-retentionPeriod=100y", "-search.maxUniqueTimeseries=0",
                             "-search.maxQueryDuration=10m"],
                            stdout=open(work / "vm.log", "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115
    base = f"http://127.0.0.1:{port}"
    out: dict = {"store": "victoriametrics (OTLP)"}
    try:
        wait_until(lambda: _ok(f"{base}/health"), 120, "VictoriaMetrics")
        if a.store is None:
            out |= ingest_vm(base, starts, a)
        out["startup_series"] = int(json.loads(http(f"{base}/api/v1/series/count"))["data"][0])
        http(f"{base}/internal/force_flush")
        out["startup_bytes"] = du(data)
        if not a.no_record:
            out |= import_recorded(base, starts, end_s - a.samples * a.interval, int(a.window_days * 86400))
        out["series"] = int(json.loads(http(f"{base}/api/v1/series/count"))["data"][0])
        ready = [s for s in starts if s.template.outcome == "ready"]
        out["queries"] = [] if a.no_queries else time_queries(base, end_s, a.repeat, vm=True, start=ready[-1])
    finally:
        proc.terminate()
        proc.wait(60)
    out["bytes"] = du(data)
    return out


def ingest_vm(base: str, starts: list[fs.SimStart], a: argparse.Namespace) -> dict:
    gen_s = ingest_s = 0.0
    sent = 0
    chunks = [(starts[i:i + a.batch], a) for i in range(0, len(starts), a.batch)]
    with bar(len(starts), "otlp -> victoriametrics") as pb, multiprocessing.Pool(a.jobs) as pool:
        for n, body, dt in pool.imap(_otlp_body, chunks):  # generated in workers, in order, while we post
            t1 = time.perf_counter()
            http(f"{base}/opentelemetry/v1/metrics", body, {"Content-Type": "application/x-protobuf"})
            gen_s, ingest_s, sent = gen_s + dt, ingest_s + time.perf_counter() - t1, sent + len(body)
            pb.update(n)
    t0 = time.perf_counter()
    http(f"{base}/internal/force_flush")
    ingest_s += time.perf_counter() - t0
    return {"rows": _vm_rows(base), "generate_s": gen_s, "ingest_s": ingest_s,
            "otlp_bytes": sent}


def _otlp_body(job: tuple[list[fs.SimStart], argparse.Namespace]) -> tuple[int, bytes, float]:
    chunk, a = job
    t0 = time.perf_counter()
    body = fs.otlp_request(chunk, samples=a.samples, interval_s=a.interval)
    return len(chunk), body, time.perf_counter() - t0


def _vm_rows(base: str) -> int:
    for line in http(f"{base}/metrics").decode().splitlines():
        if line.startswith("vm_rows_inserted_total{type=\"opentelemetry\"}"):
            return int(float(line.split()[-1]))
    return 0


def _ok(url: str) -> bool:
    try:
        http(url, timeout=2)
        return True
    except OSError:
        return False


# ---- Prometheus from scrapes ---------------------------------------------------------------------------------
def run_prom(starts: list[fs.SimStart], work: Path, a: argparse.Namespace, end_s: int) -> dict:
    data, om = work / "prom", work / "scrapes.om"
    data.mkdir()
    gen_s = ingest_s = 0.0
    lines = 0
    block = 2 * 3600
    groups: dict[int, list[fs.SimStart]] = {}
    for s in starts:  # one backfill per 2 h of ready times: files stay small, blocks barely overlap
        groups.setdefault(s.ready_s // block, []).append(s)
    with bar(len(starts), "scrapes -> prometheus (promtool backfill)") as pb:
        for chunk in groups.values():
            t0 = time.perf_counter()
            lines += fs.openmetrics_file(chunk, om, samples=a.samples, interval_s=a.interval)
            t1 = time.perf_counter()
            r = subprocess.run([str(PKG_BIN / "promtool"), "tsdb", "create-blocks-from", "openmetrics", str(om),
                                str(data)], capture_output=True, text=True)
            if r.returncode:
                raise RuntimeError(r.stderr[-2000:])
            gen_s, ingest_s = gen_s + t1 - t0, ingest_s + time.perf_counter() - t1
            pb.update(len(chunk))
    om.unlink(missing_ok=True)
    listing = subprocess.run([str(PKG_BIN / "promtool"), "tsdb", "list", str(data)], capture_output=True,
                             text=True, check=True).stdout.splitlines()
    series = sum(int(row.split()[6]) for row in listing[1:] if row.strip())  # per block; a series in two counts twice
    out = {"startup_series": series, "startup_bytes": du(data)}
    if not a.no_record:
        out |= backfill_recorded(starts, work, data, end_s - a.samples * a.interval, int(a.window_days * 86400))
    size = du(data)
    port = free_port()
    proc = subprocess.Popen([str(PKG_BIN / "prometheus"), f"--storage.tsdb.path={data}",
                             f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=100y",
                             f"--config.file={_prom_config(work)}", "--query.timeout=10m"],
                            stdout=open(work / "prom.log", "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _ok(f"{base}/-/ready"), 300, "Prometheus")
        ready = [s for s in starts if s.template.outcome == "ready"]
        lat = [] if a.no_queries else time_queries(base, end_s, a.repeat, vm=False, start=ready[-1])
    finally:
        proc.terminate()
        proc.wait(60)
    return {"store": "prometheus (scrape backfill)", "series": series, "rows": lines, "bytes": size,
            "generate_s": gen_s, "ingest_s": ingest_s, "queries": lat, **out}


def backfill_recorded(starts: list[fs.SimStart], work: Path, data: Path, end_s: int, window_s: int) -> dict:
    """The recordings into Prometheus' blocks (promtool backfill, OpenMetrics, one file per recording, written as
    computed: a week of recorded points does not fit in memory as text)."""
    t0 = time.perf_counter()
    series = points = 0
    om = work / "recorded.om"
    name, f = None, None

    def backfill() -> None:
        f.write("# EOF\n")
        f.close()
        r = subprocess.run([str(PKG_BIN / "promtool"), "tsdb", "create-blocks-from", "openmetrics", str(om),
                            str(data)], capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(r.stderr[-2000:])

    for labels, ts, values in recorded(starts, end_s, window_s):
        if labels["__name__"] != name:
            if f is not None:
                backfill()
            name, f = labels["__name__"], open(om, "w")  # noqa: SIM115 - closed by backfill()
        body = ",".join(f'{k}="{v}"' for k, v in labels.items() if k != "__name__")
        f.write("".join(f"{name}{{{body}}} {v:g} {t}\n" for t, v in zip(ts, values, strict=True)))
        series, points = series + 1, points + len(ts)
    if f is not None:
        backfill()
    om.unlink(missing_ok=True)
    return {"recorded_series": series, "recorded_points": points, "record_s": time.perf_counter() - t0}


def _prom_config(work: Path) -> Path:
    path = work / "prometheus.yml"
    path.write_text("global: {scrape_interval: 1m}\nscrape_configs: []\n")
    return path


# ---- report -------------------------------------------------------------------------------------------------
def summary(n: int, r: dict) -> str:
    q = r["queries"] or [{"p50_s": 0.0, "p95_s": 0.0, "source": "-/none", "error": ""}]
    p50 = sorted(x["p50_s"] for x in q)
    worst = max(q, key=lambda x: x["p95_s"])
    errors = sum(bool(x["error"]) for x in q)
    return (f"| {n:,} | {r['store']} | {r['startup_series']:,} | {r['startup_series'] / n:,.0f} | "
            f"{r['startup_bytes'] / n:,.0f} | {r.get('recorded_series', 0):,} | {r['bytes'] / n:,.0f} | "
            f"{r.get('ingest_s', 0):.1f} | {r.get('generate_s', 0):.1f} | {statistics.median(p50) * 1000:.0f} | "
            f"{max(x['p95_s'] for x in q) * 1000:.0f} ({worst['source'].split('/', 1)[1][:40]}) | "
            f"{sum(x['p95_s'] > 1 for x in q)}/{len(q)} | {errors} |")


HEADER = ("| starts | store | startup series | per start | bytes/start | recorded series | bytes/start with them | "
          "ingest s | generate s | query p50 median ms | worst query p95 ms | queries > 1 s | errors |\n"
          + "|---" * 13 + "|")


def main(argv: list[str] | None = None) -> int:
    ap = command_parser("fleet-scale", __doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, nargs="+", default=[1000])
    ap.add_argument("--stores", nargs="+", default=["vm", "prom"], choices=["vm", "prom"])
    ap.add_argument("--samples", type=int, default=2, help="points per series (each start's series live this long)")
    ap.add_argument("--interval", type=int, default=60, help="s between a series' points (export/scrape interval)")
    ap.add_argument("--window-days", type=float, default=7, help="starts spread over this many days up to now")
    ap.add_argument("--repeat", type=int, default=5, help="runs per query (p50/p95 over them)")
    ap.add_argument("--jobs", type=int, default=1, help="processes generating OTLP requests while one posts")
    ap.add_argument("--batch", type=int, default=50, help="starts per OTLP request")
    ap.add_argument("--end", type=int, help="the newest ready time, unix s (default: now): the same plan again")
    ap.add_argument("--no-queries", action="store_true", help="ingest only (keep the store with --work)")
    ap.add_argument("--no-record", action="store_true", help="no recording rules' output (raw series only)")
    ap.add_argument("--store", type=Path, help="VictoriaMetrics: query this data directory (the same --n and --end "
                                               "it was ingested with) instead of ingesting")
    ap.add_argument("--work", type=Path, help="keep the stores here (default: a temporary directory)")
    ap.add_argument("--json", type=Path, help="write every figure, every query's latency, here")
    a = ap.parse_args(argv)
    templates = fs.templates()
    end_s = a.end or int(time.time()) // 60 * 60 - a.samples * a.interval - 60
    results = []
    print(HEADER)
    for n in a.n:
        starts = fs.plan(n, templates, end_s=end_s, window_s=int(a.window_days * 86400))
        for store in a.stores:
            work = Path(tempfile.mkdtemp(prefix=f"fleet-{store}-{n}-", dir=a.work))
            try:
                r = (run_vm if store == "vm" else run_prom)(starts, work, a, end_s + a.samples * a.interval)
            finally:
                if a.work is None:
                    shutil.rmtree(work, ignore_errors=True)
            r |= {"n": n, "end_s": end_s, "samples": a.samples, "interval_s": a.interval}
            results.append(r)
            print(summary(n, r), flush=True)
            if a.json:
                a.json.write_text(json.dumps(results, indent=1))
    return 0
