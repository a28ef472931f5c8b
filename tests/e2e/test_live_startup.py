"""Live startup, proven on real parts: a real instrumented `vllm serve` held in a cold torch.compile (~35 s on the
CI machine's CPU) is seen *while it is still in that phase* — its in-progress series in VictoriaMetrics (OTLP) and
in Prometheus (scraping the opt-in status endpoint), the status endpoint answering with that phase, the
VllmStartupStuckInPhase alert evaluated by a real vmalert and delivered by a real Alertmanager to a webhook
receiver here, naming the phase — all before the server is ready; then the start completes and the alert resolves.

The start under test is the compile-key forensics' changed-env start (conftest's ``compiled_env_changed``: the
compiled starts' cache root, a host-like env value vLLM folds into the key, so a new key: a cold compile; one start
for both, tests/e2e/live_watch.py). It has this node's history: the local start file of the session's cold compiled
start (conftest's ``compiled_cold``, same model and configuration), from which its readiness estimate comes. Its
fleet (cluster label ``e2e-live``) has no phase history in the stores, so the alert takes its budget path, with a
5 s torch.compile budget (the history path: tests/fleet/test_alert_rules.py). vmalert comes from Debian's
victoria-metrics package (tests/e2e/bootstrap.sh), Alertmanager from Debian's prometheus-alertmanager
(tests/e2e/bootstrap_live.sh).
"""

from __future__ import annotations

import json
import re

import pytest
from live_watch import ALERT, CLUSTER, NAME, PHASE

pytestmark = pytest.mark.e2e

LINE = re.compile(r"vllm-otel-startup: starting: (?P<name>.+?) [\d.]+ s(?: of ~[\d.]+ s, ready in ~(?P<rem>[\d.]+) s)? "
                  r"\((?P<at>[\d.]+) s since start")


@pytest.fixture(scope="module")
def live(compiled_env_changed):
    return compiled_env_changed.live


def test_every_sign_came_while_the_start_was_still_in_the_phase(live):
    w, st = live["watch"], live["start"]
    assert not w.errors, w.errors
    t0 = st.spawn_ns / 1e9
    print("seconds after spawn: " + ", ".join(f"{k} {w.seen[k]['at'] - t0:.1f}" for k in w.seen)
          + f", ready {(st.ready_ns - st.spawn_ns) / 1e9:.1f}, resolved "
          f"{live['alerting'].webhook.alerts('resolved')[-1][0] - t0:.1f}")
    for what in ("status", "prometheus", "victoriametrics", "queries", "firing", "trace"):
        seen = w.seen[what]
        assert seen["ready"] is False, f"{what}: the server was already ready"
        assert seen["at"] * 1e9 < st.ready_ns, what
    # the status endpoint answered with the phase before and after each sign (the phase still open)
    assert all(w.seen[k]["status"]["phase"] == PHASE for k in ("status", "prometheus", "victoriametrics"))


def test_status_endpoint_answers_the_phase_stack_across_processes(live):
    doc = live["watch"].seen["status"]["status"]
    assert doc["state"] == "starting" and doc["phase"] == PHASE and doc["phase_name"] == "torch.compile"
    kinds = {p["process_kind"] for p in doc["processes"]}
    assert {"api_server", "engine_core", "worker"} <= kinds
    worker = next(p for p in doc["processes"] if p["process_kind"] == doc["phase_process_kind"])
    assert PHASE in [e["phase"] for e in worker["stack"]]
    api = next(p for p in doc["processes"] if p["process_kind"] == "api_server")
    assert api["stack"][0]["phase"] == "startup" and api["phase"] == "engine_wait"
    # an estimate from the first start (same model and configuration, cold): a number, from one start
    assert doc["estimate"]["history"] == 1 and doc["expected_remaining_s"] > 0


def test_in_progress_series_in_both_stores_name_the_start(live):
    w = live["watch"]
    trace = w.seen["status"]["status"]["trace_id"]
    for store in ("prometheus", "victoriametrics"):
        [series] = [s for s in w.seen[store]["value"] if s["metric"].get("vllm_startup_process_kind") == "worker"]
        m = series["metric"]
        assert m["trace_id"] == trace and m["vllm_model"] == "tiny-model" and float(series["value"][1]) > 0
        assert m["k8s_cluster_name"] == CLUSTER and m["k8s_pod_name"] == NAME


def test_dashboard_and_alert_queries_over_the_in_progress_series_answer_while_starting(live):
    answers = live["watch"].seen["queries"]["value"]
    assert {"dashboard/vllm-startup-fleet/Starting now/A", "dashboard/vllm-startup-fleet/Starting now/B",
            f"alert/{ALERT}/in_progress_phase_seconds"} <= set(answers)
    for source, result in answers.items():
        assert result, f"{source}: no data while starting"


def test_the_alert_fired_naming_pod_model_and_phase_and_resolved_after_ready(live):
    firing = live["watch"].seen["firing"]["value"]
    labels = firing[0][1]["labels"]
    assert labels["k8s_pod_name"] == NAME and labels["vllm_model"] == "tiny-model"
    assert labels["vllm_startup_phase"] == PHASE and labels["vllm_startup_process_kind"] == "worker"
    assert PHASE in firing[0][1]["annotations"]["summary"] and NAME in firing[0][1]["annotations"]["summary"]
    resolved = live["alerting"].webhook.alerts("resolved")
    assert resolved and resolved[-1][0] * 1e9 > live["start"].ready_ns


def test_the_trace_store_shows_the_unfinished_start(live):
    spans = live["watch"].seen["trace"]["value"]
    a = spans[0]["attributes"]
    assert a["vllm.startup.live.phase_stack"][0] == "worker_process" and a["vllm.startup.live.phase_elapsed_s"] >= 0


def test_progress_lines_give_the_estimate_and_its_error(live, workdir):
    """The one-line message at each tick; its estimate against the remaining time measured (printed, recorded)."""
    st = live["start"]
    total = (st.ready_ns - st.spawn_ns) / 1e9
    rows = []
    for m in LINE.finditer(st.log):
        if m.group("rem") is not None:
            at, rem = float(m.group("at")), float(m.group("rem"))
            rows.append({"phase": m.group("name"), "at_s": at, "estimate_s": rem, "actual_s": total - at})
    assert rows, "no progress message with an estimate"
    (workdir / "live-estimate.json").write_text(json.dumps(rows, indent=1))
    err = [abs(r["estimate_s"] - r["actual_s"]) for r in rows]
    print(f"estimate: {len(rows)} messages, mean |error| {sum(err) / len(err):.1f} s, start {total:.1f} s; "
          f"rows in {workdir / 'live-estimate.json'}")
    assert any(r["phase"] == "torch.compile" for r in rows)  # the held phase, named in the message
    assert all(0 <= r["estimate_s"] < 10 * total for r in rows)
    # the history start's own log: no history then, and it says so instead of a number
    first = live["first"].log
    assert "no recorded start of this model and configuration: no estimate" in first and "ready in ~" not in first
