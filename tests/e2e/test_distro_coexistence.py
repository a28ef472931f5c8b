"""With opentelemetry-distro installed, as the OpenTelemetry docs tell every Python user to do, a plain
`opentelemetry-instrument vllm serve` is configured by us in every process, in either entry-point order, with
no warning line; and the empty OTEL_* values Helm charts render are read as unset (the spec's rule).

The entry-point order is the order in which the distributions' metadata is found on sys.path (within one
directory, the file system's listing order, which no install order controls): opentelemetry-distro is installed
on its own (tests/e2e/bootstrap_ecosystem.sh) and put on PYTHONPATH before our metadata (its distro and
configurator are found first) or after a copy of our metadata (ours first)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from support import ci, harness
from support.plans import Session, plan
from vllm_otel_startup import semconv as sc

pytestmark = pytest.mark.e2e
DISTRO = harness.E2E_HOME / "otel-distro"
EMPTY = {"OTEL_TRACES_EXPORTER": "", "OTEL_METRICS_EXPORTER": "", "OTEL_LOGS_EXPORTER": "",
         "OTEL_EXPORTER_OTLP_PROTOCOL": "", "OTEL_SERVICE_NAME": ""}


def _our_metadata(into: Path) -> Path:
    purelib = Path(harness.VENV / "lib").glob("python*/site-packages")
    src = next(p for d in purelib for p in d.glob("vllm_otel_startup-*.dist-info"))
    shutil.copytree(src, into / src.name)
    return into


ORDERS = {"opentelemetry-distro first": "distro-first", "vllm_startup first": "ours-first"}


def _coexisting(name: str):
    def start(s: Session) -> harness.Start:
        if not (DISTRO / "opentelemetry" / "distro").is_dir():
            ci.missing("opentelemetry-distro not installed", "tests/e2e/bootstrap_ecosystem.sh")
        cache = s.workdir / f"ecosystem-{name}"
        first = [str(DISTRO)] if name == "distro-first" else [str(_our_metadata(s.workdir / "ours-meta")), str(DISTRO)]
        pythonpath = os.pathsep.join(first + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
        # the ours-first start also runs with a sampler meant for request traffic that keeps nothing: each process
        # would decide alone, and the start must still be one whole trace (docs/configuration.md, "Sampling")
        ratio = {"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0"} if name == "ours-first" else {}
        return harness.serve(s.tiny_model, cache, s.backends, args=["--enforce-eager"], name=f"ecosystem-{name}",
                             env={**EMPTY, **ratio, "PYTHONPATH": pythonpath}, warm_modelinfo=True)
    plan(f"distro/{name}")(start)


for _name in ORDERS.values():
    _coexisting(_name)


EDOT = harness.E2E_HOME / "edot"


@plan("distro/edot")
def _edot(s: Session) -> harness.Start:
    """Elastic's distribution of OpenTelemetry (EDOT Python, a vendor distro with its own pinned OpenTelemetry
    packages) on PYTHONPATH ahead of the environment, as an image with it installed would have it. Its cloud resource
    detectors (GCP, AWS, Azure metadata endpoints) are left out: nothing outside this host answers here."""
    if not (EDOT / "elasticotel").is_dir():
        ci.missing("elastic-opentelemetry not installed", "tests/e2e/bootstrap_ecosystem.sh")
    pythonpath = os.pathsep.join([str(EDOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    return harness.serve(s.tiny_model, s.workdir / "ecosystem-edot", s.backends, args=["--enforce-eager"],
                         name="ecosystem-edot", warm_modelinfo=True,
                         env={"PYTHONPATH": pythonpath,
                              "OTEL_EXPERIMENTAL_RESOURCE_DETECTORS": "process_runtime,os,otel,telemetry_distro",
                              # traces only: EDOT's own system metrics share OpenTelemetry's process.* names with
                              # ours, and its resource lacks the k8s.* identity our configurator reads; the session's
                              # fleet queries read the same store
                              "OTEL_METRICS_EXPORTER": "none"})


def test_a_vendor_distro_stays_in_charge_our_hooks_still_run_and_one_line_says_so(e2e, backends):
    """With EDOT installed, `opentelemetry-instrument vllm serve` leaves OpenTelemetry's configuration to EDOT in
    every process (its resource says so: telemetry.distro.name=elastic), the launcher says so in one line, and the
    start is still our one whole trace in the store, every process in it, with its printout at ready."""
    start = e2e.later("distro/edot").result()
    said = [line for line in start.log.splitlines() if "distro configures OpenTelemetry here" in line]
    assert len(said) == 1 and "elastic-opentelemetry" in said[0], said
    spans = backends.trace_of_root(start.pid)
    assert {"api_server", "engine_core", "worker"} <= {s.attrs.get(sc.PROCESS_KIND) for s in spans}
    assert len([s for s in spans if s.name == sc.ROOT_SPAN]) == 1
    local = harness.local_spans(start)
    distros = {s.resource.get("telemetry.distro.name") for s in local}
    assert distros == {"elastic"}, distros  # every process configured by EDOT, ours by none
    assert "vLLM startup: ready in" in start.log
    # the start, until the harness stops the server: vLLM 0.32's own shutdown (mode=abort, timeout=0s) force-kills an
    # EngineCore still exiting and its output handler logs EngineDeadError with a traceback (seen once in CI, after
    # the start this test is about)
    started = start.log.split("[shutdown] API server: shutdown triggered")[0]
    assert not [line for line in started.splitlines() if "Traceback" in line]


@pytest.fixture(scope="module", params=list(ORDERS))
def coexisting(request, e2e):
    return request.param, e2e.later(f"distro/{ORDERS[request.param]}").result()


def test_configured_by_us_in_either_order_without_warnings(coexisting, backends):
    order, start = coexisting
    # the trace went over OTLP although OTEL_TRACES_EXPORTER and the protocol were empty: our distro's defaults
    # (http/protobuf to the harness's HTTP port; opentelemetry-distro's default would be gRPC)
    spans = backends.trace_of_root(start.pid)
    kinds = {s.attrs.get(sc.PROCESS_KIND) for s in spans}
    assert {"api_server", "engine_core", "worker"} <= kinds, (order, kinds)
    # the metrics carry the k8s.* resource only our configurator reads from the downward-API environment
    series = backends.vm_query(f'vllm_startup_starts_total{{k8s_pod_name="{start.name}"}}')
    assert series and series[0]["metric"].get("service_name") == "vllm", (order, series)
    noise = [line for line in start.log.splitlines() if "Configuration of" in line or "not loaded" in line]
    assert noise == [], (order, noise)


def test_a_ratio_sampler_that_keeps_nothing_still_leaves_the_whole_start(e2e, backends):
    """The ours-first start ran with OTEL_TRACES_SAMPLER=traceidratio at 0 (each process would drop everything), the
    distro-first start with the default sampler: the same start either way, phase for phase in every process."""
    def phases(name: str) -> set[tuple[str, str]]:
        start = e2e.later(f"distro/{name}").result()
        # wait for the store to hold every span the start recorded locally (not a trace still arriving)
        expect = len(harness.local_spans(start))
        return {(s.attrs.get(sc.PROCESS_KIND), s.name) for s in backends.trace_of_root(start.pid, expect=expect)
                if s.attrs.get(sc.PHASE) not in sc.DETAIL_PHASES and s.name != sc.PROGRESS_SPAN}
    sampled, default = phases("ours-first"), phases("distro-first")
    assert (None, sc.ROOT_SPAN) in sampled or ("api_server", sc.ROOT_SPAN) in sampled
    assert sampled == default, sorted(sampled ^ default)


def test_launcher_lists_our_settings():
    out = subprocess.run([str(harness.VENV / "bin/opentelemetry-instrument"), "--help"], capture_output=True,
                         text=True, check=True).stdout
    for option in ("--vllm_startup_dir", "--vllm_startup_summary", "--vllm_startup_disabled"):
        assert option in out
    assert "--vllm_startup_traceparent" not in out  # internal hand-overs are not options
