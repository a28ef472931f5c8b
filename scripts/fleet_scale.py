"""What a fleet's starts cost its metrics stores: N simulated starts (support/fleet_sim.py: recorded real starts,
metrics produced by the agent's own code) written into VictoriaMetrics over OTLP and into Prometheus by backfill
of their /metrics scrapes, then measured: series created, bytes on disk, ingestion time, and the latency of every
dashboard panel query, alert expression and recording rule.

    python scripts/fleet_scale.py --n 1000 10000 [--stores vm prom] [--json out.json]
    python scripts/fleet_scale.py --n 1000 --buckets 1,10,60,300 --resource-keep minimal   # a variant
    python scripts/fleet_scale.py --n 100000 --stores vm --design proposed   # the proposed design

Run it with the e2e venv's python (opentelemetry-sdk, prometheus-client, tqdm); the stores are the e2e
pkgroot's (tests/e2e/bootstrap.sh). Under `nice`: it is CPU-heavy. Queries: a dashboard panel's query is a range
query over its dashboard's default time range (fleet overview 24h, compare 7d, one start 6h), step = range/1000
(at least 15 s), the ``raw`` form (recording rules replaced by what they compute: recorded series are not
backfilled); alert expressions and recording-rule expressions are instant queries at the end of the window.
Every query runs ``--repeat`` times (VictoriaMetrics with nocache=1; once when a run takes over 10 s); p50/p95
are over those runs, per query.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(REPO), str(REPO / "src")]

from support import fleet_sim as fs  # noqa: E402
from support.harness import free_port, wait_until  # noqa: E402

PKG_BIN = Path(os.environ.get("VOS_E2E_HOME", Path.home() / ".cache/vllm-otel-startup/e2e")) / "pkgroot/usr/bin"
RANGES = {"now-6h": 6 * 3600, "now-24h": 86400, "now-7d": 7 * 86400}
SLOW_S = 10.0
TIMEOUT_S = 300.0  # a query still running then counts as failed (its time: this)
MINIMAL = fs.PROPOSED_RESOURCE


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
def queries() -> list[tuple[str, str, int | None]]:
    """(source, PromQL, range in s or None for an instant query) of every panel, alert and recording rule."""
    import yaml

    from dashboards import generate
    from dashboards.queries import all_queries

    ranges = {uid: RANGES[doc["time"]["from"]] for uid, doc in generate.dashboards().items()}
    out = [(q.source, q.raw or q.expr, ranges[q.source.split("/")[1]] if q.source.startswith("dashboard/") else None)
           for q in all_queries()]
    for g in yaml.safe_load(generate.RULES.read_text())["groups"]:
        out += [(f"record/{r['record']}", r["expr"], None) for r in g["rules"]]
    return out


FLEET_BY = ", ".join(("k8s_cluster_name", "k8s_namespace_name", "vllm_model", "vllm_version", "vllm_device",
                      "vllm_device_model", "vllm_startup_mode", "vllm_compile_mode"))


def proposed_queries(pod: str = "") -> list[tuple[str, str, int | None]]:
    """The proposal's fleet panels and alerts (docs/results.md "A design that scales"), on its per-start gauges."""
    from vllm_otel_startup import semconv as sc

    fs.proposed([])  # the proposal's gauge in semconv's tables
    last, phase = sc.prom_name("vllm.startup.last_start.duration"), sc.prom_name(fs.PHASE_LAST)
    wb, wt = sc.prom_name("vllm.startup.weights.bytes"), sc.prom_name("vllm.startup.weights.load_time")
    ready, failed = f'{last}{{vllm_startup_outcome="ready"}}', f'{last}{{vllm_startup_outcome="failed"}}'
    day, week, six = RANGES["now-24h"], RANGES["now-7d"], RANGES["now-6h"]
    return [
        ("fleet/starts per hour by model", f"count by (vllm_model) (max_over_time({last}[1h]))", day),
        ("fleet/time to ready p95 by model", f"quantile by (vllm_model) (0.95, max_over_time({ready}[24h]))", None),
        ("fleet/phase p95", "quantile by (vllm_startup_phase, vllm_startup_process_kind) "
                            f"(0.95, max_over_time({phase}[24h]))", None),
        ("fleet/phase p95 over time", f"quantile by (vllm_startup_phase) (0.95, max_over_time({phase}[1h]))", day),
        ("fleet/time to ready p50 cold vs warm over time",
         f"quantile by (vllm_startup_mode) (0.5, max_over_time({ready}[1h]))", day),
        ("fleet/slowest starts", f"topk(10, max by (k8s_pod_name, trace_id) (max_over_time({ready}[24h])))", None),
        ("fleet/failed starts", f"count by (vllm_model, vllm_version) (max_over_time({failed}[24h]))", None),
        ("fleet/weights GB/s by source", f"sum by (vllm_weights_source) (max_over_time({wb}[24h])) / "
                                         f"sum by (vllm_weights_source) (max_over_time({wt}[24h])) / 1e9", None),
        ("compare/phase p95 by version", "quantile by (vllm_version, vllm_startup_phase) "
                                         f"(0.95, max_over_time({phase}[7d]))", None),
        ("compare/phase p95 by version over time", "quantile by (vllm_version, vllm_startup_phase) "
                                                   f"(0.95, max_over_time({phase}[1h]))", week),
        ("compare/time to ready p95 by version over time",
         f"quantile by (vllm_version) (0.95, max_over_time({ready}[1h]))", week),
        ("one-start/phases of one pod's start", "max by (vllm_startup_phase, vllm_startup_process_kind) "
                                                f'(last_over_time({phase}{{k8s_pod_name="{pod}"}}[6h]))', six),
        *(("record/phase seconds le=" + le, f'label_replace(count by ({FLEET_BY}, vllm_startup_phase, '
                  f'vllm_startup_process_kind) ((max_over_time({phase}[1h]) unless '
                  f'max_over_time({phase}[1h] offset 1h)) <= {le}), "le", "{le}", "", "")', None)
          for le in fs.PROPOSED_BOUNDS),
        ("alert/slow start", f"max by (k8s_pod_name, vllm_model) (max_over_time({ready}[5m])) > 600", None),
        ("alert/failure ratio", f"count by (vllm_model) (max_over_time({failed}[1h])) / "
                                f"count by (vllm_model) (max_over_time({last}[1h])) > 0.1", None),
        ("alert/phase regression", "quantile by (vllm_model, vllm_startup_phase) (0.95, max_over_time("
                                   f"{phase}[1h])) > 2 * quantile by (vllm_model, vllm_startup_phase) "
                                   f"(0.95, max_over_time({phase}[1d] offset 1h))", None),
    ]


def time_queries(base: str, end_s: int, repeat: int, vm: bool, design: str = fs.CURRENT, pod: str = "") -> list[dict]:
    from tqdm import tqdm

    out = []
    todo = queries() if design == fs.CURRENT else proposed_queries(pod)
    for source, expr, rng in tqdm(todo, desc="queries", unit="query", file=sys.stderr, mininterval=2):
        params = {"query": expr, "time" if rng is None else "end": str(end_s)}
        if rng is not None:
            params |= {"start": str(end_s - rng), "step": str(max(15, rng // 1000))}
        if vm:
            params["nocache"] = "1"
        url = f"{base}/api/v1/{'query' if rng is None else 'query_range'}?{urllib.parse.urlencode(params)}"
        times, series, error = [], 0, ""
        for _ in range(repeat):
            t0 = time.perf_counter()
            try:
                body = json.loads(http(url, timeout=TIMEOUT_S))
                series = len(body["data"]["result"])
            except urllib.error.HTTPError as exc:  # a query the store refuses is a result too
                error = f"{exc.code}: {exc.read()[:300].decode(errors='replace')}"
            except Exception as exc:  # noqa: BLE001 - a timeout is one too
                error = str(exc)[:200]
            times.append(time.perf_counter() - t0)
            if times[-1] > SLOW_S:  # one run that slow says enough
                break
        out.append({"source": source, "range_s": rng, "p50_s": statistics.median(times),
                    "p95_s": sorted(times)[max(0, round(0.95 * len(times)) - 1)], "series": series, "error": error})
    return out


# ---- VictoriaMetrics over OTLP ------------------------------------------------------------------------------
def run_vm(starts: list[fs.SimStart], work: Path, a: argparse.Namespace, end_s: int) -> dict:
    port, data = free_port(), work / "vm"
    proc = subprocess.Popen([str(PKG_BIN / "victoria-metrics"), f"-httpListenAddr=127.0.0.1:{port}",
                             f"-storageDataPath={data}", "-opentelemetry.usePrometheusNaming",
                             "-search.latencyOffset=0s", "-retentionPeriod=100y", "-search.maxUniqueTimeseries=0",
                             "-search.maxQueryDuration=10m"],
                            stdout=open(work / "vm.log", "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _ok(f"{base}/health"), 30, "VictoriaMetrics")
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
        series = int(json.loads(http(f"{base}/api/v1/series/count"))["data"][0])
        samples = _vm_rows(base)
        lat = [] if a.no_queries else time_queries(base, end_s, a.repeat, vm=True, design=a.design,
                                                   pod=starts[-1].pod)
    finally:
        proc.terminate()
        proc.wait(60)
    return {"store": "victoriametrics (OTLP)", "series": series, "rows": samples, "bytes": du(data),
            "generate_s": gen_s, "ingest_s": ingest_s, "otlp_bytes": sent, "queries": lat}


def _otlp_body(job: tuple[list[fs.SimStart], argparse.Namespace]) -> tuple[int, bytes, float]:
    chunk, a = job
    _buckets(a.buckets)
    t0 = time.perf_counter()
    body = fs.otlp_request(chunk, samples=a.samples, interval_s=a.interval, resource_keep=a.keep, design=a.design)
    return len(chunk), body, time.perf_counter() - t0


def _buckets(spec: str | None) -> None:
    if spec is not None:
        from vllm_otel_startup import semconv as sc

        sc.DURATION_BUCKETS = tuple(float(b) for b in spec.split(",") if b)  # read at record time by our code


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
            lines += fs.openmetrics_file(chunk, om, samples=a.samples, interval_s=a.interval, design=a.design)
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
    size = du(data)
    port = free_port()
    proc = subprocess.Popen([str(PKG_BIN / "prometheus"), f"--storage.tsdb.path={data}",
                             f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=100y",
                             f"--config.file={_prom_config(work)}", "--query.timeout=10m"],
                            stdout=open(work / "prom.log", "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _ok(f"{base}/-/ready"), 300, "Prometheus")
        lat = time_queries(base, end_s, a.repeat, vm=False, design=a.design, pod=starts[-1].pod)
    finally:
        proc.terminate()
        proc.wait(60)
    return {"store": "prometheus (scrape backfill)", "series": series, "rows": lines, "bytes": size,
            "generate_s": gen_s, "ingest_s": ingest_s, "queries": lat}


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
    return (f"| {n:,} | {r['store']} | {r['series']:,} | {r['series'] / n:,.0f} | {r['bytes'] / n:,.0f} | "
            f"{r['ingest_s']:.1f} | {r['generate_s']:.1f} | {statistics.median(p50) * 1000:.0f} | "
            f"{max(x['p95_s'] for x in q) * 1000:.0f} ({worst['source'].split('/', 1)[1][:40]}) | "
            f"{sum(x['p95_s'] > 1 for x in q)}/{len(q)} | {errors} |")


HEADER = ("| starts | store | series | series/start | bytes/start | ingest s | generate s | "
          "query p50 median ms | worst query p95 ms | queries > 1 s | errors |\n" + "|---" * 11 + "|")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, nargs="+", default=[1000])
    ap.add_argument("--stores", nargs="+", default=["vm", "prom"], choices=["vm", "prom"])
    ap.add_argument("--samples", type=int, default=2, help="points per series (each start's series live this long)")
    ap.add_argument("--interval", type=int, default=60, help="s between a series' points (export/scrape interval)")
    ap.add_argument("--window-days", type=float, default=7, help="starts spread over this many days up to now")
    ap.add_argument("--repeat", type=int, default=5, help="runs per query (p50/p95 over them)")
    ap.add_argument("--jobs", type=int, default=1, help="processes generating OTLP requests while one posts")
    ap.add_argument("--batch", type=int, default=50, help="starts per OTLP request")
    ap.add_argument("--buckets", help="comma-separated histogram bounds instead of semconv.DURATION_BUCKETS")
    ap.add_argument("--resource-keep", choices=["all", "minimal"], default="all",
                    help="minimal: only service.name, process kind, worker rank and k8s.* as OTLP resource")
    ap.add_argument("--design", choices=[fs.CURRENT, fs.PROPOSED], default=fs.CURRENT,
                    help="proposed: the per-start gauges of docs/results.md, minimal resource, its own queries")
    ap.add_argument("--end", type=int, help="the newest ready time, unix s (default: now): the same plan again")
    ap.add_argument("--no-queries", action="store_true", help="ingest only (keep the store with --work)")
    ap.add_argument("--work", type=Path, help="keep the stores here (default: a temporary directory)")
    ap.add_argument("--json", type=Path, help="write every figure, every query's latency, here")
    a = ap.parse_args()
    a.keep = MINIMAL if a.resource_keep == "minimal" or a.design == fs.PROPOSED else None
    _buckets(a.buckets)
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
            r |= {"n": n, "end_s": end_s, "design": a.design, "samples": a.samples, "interval_s": a.interval, "buckets": a.buckets,
                  "resource_keep": a.resource_keep}
            results.append(r)
            print(summary(n, r), flush=True)
            if a.json:
                a.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
