"""Prometheus alert rules for slow, failing and cache-missing vLLM starts (runbooks: docs/runbooks.md).

They live here, next to the dashboards, because they ask the same questions in the same vocabulary
(startup_queries.py, which reads the recording rules' series where one answers: load mixin/prometheus_rules.yaml
with them); ``python -m dashboards.generate`` writes them as the mixin's mixin/prometheus_alerts.yaml and, with
the recording rules, as a PrometheusRule (deploy/kubernetes/monitoring/prometheusrule.yaml). Adding an alert is one
builder in ``BUILDERS`` (its runbook: a ``## <AlertName>`` section of docs/runbooks.md).

Budgets are bucket bounds of the recording rules (recording.READY_BOUNDS) where a quantile is compared with them:
then "p95 > budget" holds exactly when more than 5 % of starts took longer than the budget, whatever the
interpolation inside a bucket. Per-start budgets (a phase's time in one start) are compared with the start's own
series, exactly.

Each alert also lists ``checks``: the sub-expressions it combines, each of which returns data on its own when its
inputs exist (``needs`` says which inputs beyond one ready start): the end-to-end proof queries them against
real stores (dashboards/queries.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from . import phases as ph
from . import promql as q
from . import startup_queries as sq
from . import vocabulary as v

# What a check or an alert needs besides one instrumented ready start (queries.py documents them).
KSM, GPU, FAILED_START, COMPILE, COMPILE_MISS, HUB_DOWNLOAD, HISTORY, FIRING = (
    "kube_state_metrics", "gpu", "failed_start", "compile", "compile_cache_miss", "hub_download", "history",
    "firing")
STARTING = "starting"  # a start still in progress (the in-progress series exist only then)


@dataclass(frozen=True)
class Budgets:
    """Every threshold in one place; regenerate the rules after changing one."""

    ready_s: float = 600  # p95 time to ready (our metric), per model unless overridden below
    ready_by_model_s: dict[str, float] = field(default_factory=dict)  # vllm_model regex -> s (first match wins)
    pod_ready_s: float = 900  # pod creation to Ready (kube-state-metrics), image pull and scheduling included
    pod_window_s: int = 7200  # pods created this recently (older never-ready pods: KubePodNotReady's job)
    phase_s: dict[str, float] = field(default_factory=lambda: {
        "imports": 120, "model_inspection": 60, "device_init": 120, "weights_download": 300, "weights_load": 300,
        "torch_compile": 300, "kv_cache_profile": 300, "cudagraph_capture": 120})
    regression_factor: float = 1.5  # a start's phase over factor x the fleet's p95 ...
    regression_min_s: float = 30  # ... and that much longer than it ...
    regression_min_starts: int = 5  # ... with that many starts of the phase within one hour of the baseline
    baseline: str = "1d"  # the fleet's usual p95: the highest hourly p95 of the day before the recent window
    recent: str = "1h"  # starts a per-start alert looks at
    compile_history: str = "7d"  # a fleet that compiled within this window should hit the cache
    failed_window: str = "15m"
    crash_window: str = "30m"
    crash_starts: int = 3
    container: str = "vllm"  # the vLLM container's name (deploy/kubernetes/base/vllm-deployment.yaml)
    # a start still in progress, in one phase: over stuck_factor x the fleet's p95 of that phase (baseline) and
    # stuck_min_s longer than it; without such history, over its budget (stuck_s, else phase_s, else the default)
    stuck_factor: float = 3.0
    stuck_min_s: float = 60
    stuck_s: dict[str, float] | None = None
    stuck_default_s: float = 900


@dataclass(frozen=True)
class Check:
    name: str
    expr: str
    needs: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Alert:
    name: str
    group: str
    expr: str
    summary: str
    description: str
    severity: str = "warning"
    for_: str = "0m"
    checks: tuple[Check, ...] = ()
    needs: frozenset[str] = frozenset()  # inputs the full expression needs besides firing

    @property
    def anchor(self) -> str:
        return self.name.lower()

    def rule(self, runbook_base: str) -> dict:
        return {"alert": self.name, "expr": self.expr, "for": self.for_, "labels": {"severity": self.severity},
                "annotations": {"summary": self.summary, "description": self.description,
                                "runbook_url": RUNBOOK_URL.format(base=runbook_base, anchor=self.anchor)}}


READINESS, PHASES = "vllm-startup.readiness", "vllm-startup.phases"
# Every alert's runbook_url: one pattern over a base set once (generate --runbook-base) and the alert's anchor,
# the GitHub heading anchor of its "## <AlertName>" section in docs/runbooks.md.
RUNBOOK_URL = "{base}#{anchor}"
# The default base: the project's published runbooks page. Absolute, because Alertmanager and Grafana resolve no
# relative link; a team points it at its own copy (generate --runbook-base / --config runbook_base).
RUNBOOK_BASE = "https://github.com/vllm-otel-startup/vllm-otel-startup/blob/main/docs/runbooks.md"
GROUP_INTERVALS = {READINESS: "1m", PHASES: "5m"}  # the phase group looks back days: evaluate it less often


def _lbl(name: str) -> str:
    return f"{{{{ $labels.{name} }}}}"


def _per_model(signal: Callable[[list[str]], str], b: Budgets) -> str:
    """``signal > budget`` with per-model budgets: one comparison per model regex, the default for the rest."""
    parts, seen = [], []
    for pattern, budget in b.ready_by_model_s.items():
        parts.append(f"({signal([q.re(v.MODEL, pattern)] + ([q.nre(v.MODEL, '|'.join(seen))] if seen else []))}"
                     f" > {budget:g})")
        seen.append(pattern)
    parts.append(f"({signal([q.nre(v.MODEL, '|'.join(seen))] if seen else [])} > {b.ready_s:g})")
    return " or ".join(parts)


def pod_slow_to_ready(b: Budgets) -> Alert:
    def ksm(metric: str, *matchers: str) -> str:
        return q.agg("max", [v.KSM_NAMESPACE, v.KSM_POD], q.selector(metric, matchers))

    created, ready_at = ksm(v.KSM_CREATED), ksm(v.KSM_READY_TIME)
    vllm_pods = ksm(v.KSM_CONTAINER_INFO, q.eq(v.KSM_CONTAINER, b.container))
    seconds = (f"((({ready_at} - {created}) or (time() - {created} unless {ready_at})) and {vllm_pods} "
               f"and ({created} > time() - {b.pod_window_s}))")
    return Alert(
        "VllmPodSlowToReady", READINESS, f"{seconds} > {b.pod_ready_s:g}",
        f"vLLM pod {_lbl(v.KSM_NAMESPACE)}/{_lbl(v.KSM_POD)} took over {b.pod_ready_s:g}s from creation to Ready",
        f"Pod {_lbl(v.KSM_NAMESPACE)}/{_lbl(v.KSM_POD)} was created {{{{ $value | humanizeDuration }}}} before it "
        f"became Ready (or is still not Ready): scheduling, image pull and the vLLM start together exceed the "
        f"{b.pod_ready_s:g}s budget. Its startup trace shows how much of it vLLM's own start took.",
        checks=(Check("pod_ready_seconds", seconds, frozenset({KSM})),), needs=frozenset({KSM}))


def startup_slow(b: Budgets) -> Alert:
    def p95(matchers: list[str]) -> str:
        return sq.time_to_ready_quantile(0.95, matchers, b.recent, [v.CLUSTER, v.MODEL])

    return Alert(
        "VllmStartupSlow", READINESS, _per_model(p95, b),
        f"vLLM time to ready over budget for {_lbl(v.MODEL)}",
        f"p95 time to ready of {_lbl(v.MODEL)} in cluster {_lbl(v.CLUSTER)} over the last {b.recent} is "
        f"{{{{ $value | humanizeDuration }}}}, over its budget. The fleet overview's slowest-starts table links each "
        f"start's trace.",
        checks=(Check("time_to_ready_p95", p95([])),))


def phase_over_budget(b: Budgets) -> Alert:
    keys = [*v.START_KEYS, v.MODEL]
    cur = sq.phase_seconds_per_start([], b.recent, keys, list(b.phase_s))
    # The budgets as a vector, one series per phase: label_replace(vector(s), phase, id) or ...
    table = " or ".join(f'label_replace(vector({s:g}), "{v.PHASE}", "{phase}", "", "")'
                        for phase, s in b.phase_s.items())
    return Alert(
        "VllmStartupPhaseOverBudget", PHASES, f"{cur} > {q.on([v.PHASE])} group_left () ({table})",
        f"vLLM startup phase {_lbl(v.PHASE)} over budget on {_lbl(v.POD)}",
        f"Phase {_lbl(v.PHASE)} ({_lbl(v.PROCESS_KIND)}) took {{{{ $value | humanizeDuration }}}} in the start of "
        f"pod {_lbl(v.NAMESPACE)}/{_lbl(v.POD)} ({_lbl(v.MODEL)}), over its budget.",
        checks=(Check("phase_seconds_per_start", cur), Check("phase_budgets", table)))


def phase_regressed(b: Budgets) -> Alert:
    keys = [*v.START_KEYS, v.MODEL]
    fleet = [v.CLUSTER, v.MODEL, v.PROCESS_KIND, v.PHASE]
    cur = sq.phase_seconds_per_start([], b.recent, keys, ph.REGRESSION_PHASES)
    # the baseline ends where the recent window begins: the starts under test are not part of it
    base = sq.phase_fleet_quantile(0.95, [], b.baseline, fleet, ph.REGRESSION_PHASES, offset=b.recent)
    spans = sq.phase_starts([], b.baseline, fleet, ph.REGRESSION_PHASES, offset=b.recent)
    on = q.on(fleet)
    expr = (f"({cur}) > {on} group_left () ({b.regression_factor:g} * {base})"
            f" and ({cur}) - {on} group_left () {base} > {b.regression_min_s:g}"
            f" and {on} ({spans} >= {b.regression_min_starts})")
    return Alert(
        "VllmStartupPhaseRegressed", PHASES, expr,
        f"vLLM startup phase {_lbl(v.PHASE)} regressed on {_lbl(v.POD)}",
        f"Phase {_lbl(v.PHASE)} ({_lbl(v.PROCESS_KIND)}) took {{{{ $value | humanizeDuration }}}} in the start of "
        f"pod {_lbl(v.NAMESPACE)}/{_lbl(v.POD)} ({_lbl(v.MODEL)}): over {b.regression_factor:g}x and "
        f"{b.regression_min_s:g}s more than the p95 of the same phase in this model's fleet (the highest hourly "
        f"p95 of the {b.baseline} before).",
        checks=(Check("phase_seconds_per_start", cur), Check("fleet_phase_p95", base, frozenset({HISTORY})),
                Check("fleet_phase_starts", spans, frozenset({HISTORY}))))


def compile_cache_miss(b: Budgets) -> Alert:
    # What the compile cache is keyed by, as far as labels tell: same fleet key compiled before -> should hit.
    fleet = [v.CLUSTER, v.NAMESPACE, v.MODEL, v.VLLM_VERSION, v.DEVICE_MODEL, v.COMPILE_MODE, v.TENSOR_SIZE,
             v.PIPELINE_SIZE]
    misses = sq.compiles([], b.recent, [*fleet, v.MODE], q.eq(v.COMPILE_CACHE_HIT, v.FALSE))
    before = q.agg("sum", fleet, q.seen_in(q.selector(v.COMPILES), b.compile_history, offset=b.recent))
    return Alert(
        "VllmStartupCompileCacheMiss", PHASES, f"{misses} > 0 and {q.on(fleet)} {before}",
        f"vLLM compile cache missed for {_lbl(v.MODEL)} although this fleet compiled it before",
        f"{{{{ $value }}}} torch.compile run(s) of {_lbl(v.MODEL)} (vLLM {_lbl(v.VLLM_VERSION)}, "
        f"{_lbl(v.DEVICE_MODEL)}, {_lbl(v.NAMESPACE)}) missed the compile cache in the last {b.recent}, although "
        f"the same configuration compiled within the {b.compile_history} before. Start mode "
        f"{_lbl(v.MODE)}: cold means $VLLM_CACHE_ROOT was empty (not persistent), warm means the cache was there "
        f"but its key changed.",
        checks=(Check("compile_misses", misses, frozenset({COMPILE, COMPILE_MISS})),
                Check("compiles_by_hit", sq.compiles([], b.recent, [*fleet, v.MODE, v.COMPILE_CACHE_HIT]),
                      frozenset({COMPILE})),
                Check("compiled_before", before, frozenset({COMPILE, HISTORY}))))


def weights_downloaded(b: Budgets) -> Alert:
    labels = [v.CLUSTER, v.NAMESPACE, v.MODEL]
    downloaded = sq.weights_bytes([], b.recent, labels, q.eq(v.WEIGHTS_SOURCE, v.HUB_DOWNLOAD))
    return Alert(
        "VllmStartupWeightsDownloaded", PHASES, f"{downloaded} > 0",
        f"vLLM downloaded the weights of {_lbl(v.MODEL)} at start",
        f"Starts of {_lbl(v.MODEL)} in {_lbl(v.CLUSTER)}/{_lbl(v.NAMESPACE)} downloaded "
        f"{{{{ $value | humanize1024 }}}}B of weights from the hub in the last {b.recent}: there is no shared model "
        f"cache.",
        checks=(Check("downloaded_bytes", downloaded, frozenset({HUB_DOWNLOAD})),
                Check("bytes_by_source", sq.weights_bytes([], b.recent, [*labels, v.WEIGHTS_SOURCE]))))


def startup_failed(b: Budgets) -> Alert:
    labels = [v.CLUSTER, v.NAMESPACE, v.MODEL, v.VLLM_VERSION]
    failed = sq.starts([], b.failed_window, labels, q.eq(v.OUTCOME, v.FAILED))
    return Alert(
        "VllmStartupFailed", READINESS, f"{failed} > 0",
        f"vLLM start of {_lbl(v.MODEL)} failed",
        f"{{{{ $value }}}} start(s) of {_lbl(v.MODEL)} (vLLM {_lbl(v.VLLM_VERSION)}) in "
        f"{_lbl(v.CLUSTER)}/{_lbl(v.NAMESPACE)} failed before ready in the last {b.failed_window}. The failing "
        f"phase carries the exception in the trace.",
        checks=(Check("failed_starts", failed, frozenset({FAILED_START})),
                Check("starts_by_outcome", sq.starts([], b.failed_window, [*labels, v.OUTCOME]))))


def crash_looping(b: Budgets) -> Alert:
    ours = sq.starts([], b.crash_window, [v.NAMESPACE, v.POD])
    restarts = q.selector(v.KSM_RESTARTS, [q.eq(v.KSM_CONTAINER, b.container)])
    renamed = (f'label_replace(label_replace(increase({restarts}[{b.crash_window}]), "{v.NAMESPACE}", "$1", '
               f'"{v.KSM_NAMESPACE}", "(.*)"), "{v.POD}", "$1", "{v.KSM_POD}", "(.*)")')
    ksm = q.agg("max", [v.NAMESPACE, v.POD], renamed)
    return Alert(
        "VllmStartupCrashLooping", READINESS, f"{ours} >= {b.crash_starts} or {ksm} >= {b.crash_starts}",
        f"vLLM pod {_lbl(v.NAMESPACE)}/{_lbl(v.POD)} keeps restarting",
        f"Pod {_lbl(v.NAMESPACE)}/{_lbl(v.POD)} started vLLM (or restarted its container) {{{{ $value }}}} times "
        f"in the last {b.crash_window}.",
        severity="critical",
        checks=(Check("starts_per_pod", ours), Check("restarts_per_pod", ksm, frozenset({KSM}))))


def stuck_in_phase(b: Budgets) -> Alert:
    keys = [*v.START_KEYS, v.MODEL, v.PROCESS_KIND, v.PHASE, v.TRACE_ID]
    fleet = [v.CLUSTER, v.MODEL, v.PROCESS_KIND, v.PHASE]
    # a process that only waits for another is not where the start is stuck: the other one alerts
    working = q.nre(v.PHASE, ph.regex(ph.WAITING_PHASES))
    cur = sq.in_progress(v.IN_PROGRESS_PHASE_ELAPSED, [], keys, working)
    usual = sq.phase_fleet_usual(0.95, b.baseline, fleet, working)
    budgets = b.stuck_s if b.stuck_s is not None else b.phase_s
    table = " or ".join(f'label_replace(vector({s:g}), "{v.PHASE}", "{phase}", "", "")'
                        for phase, s in budgets.items())
    on = q.on(fleet)
    no_history = f"({cur} unless {on} {usual})"
    expr = (f"(({cur}) > {on} group_left () ({b.stuck_factor:g} * {usual})"
            f" and ({cur}) - {on} group_left () {usual} > {b.stuck_min_s:g})"
            f" or ({no_history} > {q.on([v.PHASE])} group_left () ({table}))"
            f" or (({no_history} unless {q.on([v.PHASE])} ({table})) > {b.stuck_default_s:g})")
    return Alert(
        "VllmStartupStuckInPhase", READINESS, expr,
        f"vLLM start of {_lbl(v.MODEL)} on {_lbl(v.POD)} stuck in phase {_lbl(v.PHASE)}",
        f"Pod {_lbl(v.NAMESPACE)}/{_lbl(v.POD)} ({_lbl(v.MODEL)}) is still starting and its {_lbl(v.PROCESS_KIND)} "
        f"has been in phase {_lbl(v.PHASE)} for {{{{ $value | humanizeDuration }}}}: over {b.stuck_factor:g}x "
        f"(and {b.stuck_min_s:g}s more than) the p95 of that phase in this model's fleet (the highest hourly p95 "
        f"of the last {b.baseline}), or over its budget when the fleet has no such history. Its status endpoint and "
        f"the trace's 'Startup in progress' records show the open phases of every process.",
        checks=(Check("in_progress_phase_seconds", cur, frozenset({STARTING})),
                Check("fleet_phase_usual", usual, frozenset({HISTORY})),
                Check("stuck_budgets", table)),
        needs=frozenset({STARTING}))


BUILDERS: tuple[Callable[[Budgets], Alert], ...] = (
    pod_slow_to_ready, startup_slow, startup_failed, crash_looping, stuck_in_phase,
    phase_over_budget, phase_regressed, compile_cache_miss, weights_downloaded)


def alerts(budgets: Budgets | None = None) -> list[Alert]:
    b = budgets or Budgets()
    return [build(b) for build in BUILDERS]


def rule_groups(budgets: Budgets | None = None, runbook_base: str = RUNBOOK_BASE) -> list[dict]:
    """The ``groups`` of a Prometheus rules file (also a PrometheusRule's ``spec.groups``)."""
    by_group: dict[str, list[Alert]] = {}
    for a in alerts(budgets):
        by_group.setdefault(a.group, []).append(a)
    return [{"name": g, "interval": GROUP_INTERVALS[g], "rules": [a.rule(runbook_base) for a in rules]}
            for g, rules in by_group.items()]
