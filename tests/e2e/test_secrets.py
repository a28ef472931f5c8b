"""No planted secret leaves a real start: one `opentelemetry-instrument vllm serve` with secrets in every form
the redaction knows (conftest.py's `eager` start: a list-valued `--api-key`, a JSON flag value with a token,
an environment secret and a URL with credentials, URLs with `@` and `/` inside the password, a signed query,
a scheme-less `user:password@host`, `HF_TOKEN`, a `*_API_KEY` variable, OTLP headers), and every store it
reaches: the trace store (Phoenix: attributes, events, status), the local file (spans and resources),
VictoriaMetrics (OTLP metrics of every process), Prometheus (the server's own /metrics), our lines in the
server log (the printout at ready) and the spool."""

from __future__ import annotations

import json
import re

import pytest

from vllm_otel_startup import semconv as sc

pytestmark = pytest.mark.e2e
R = "<redacted>"
# vLLM itself logs its non-default arguments with only api_key / hf_token masked (not ours to change): the
# values it never writes must be absent from the whole log, the others from our lines of it.
NEVER_LOGGED_BY_VLLM = ("api_key_1", "api_key_2", "hf_token", "otlp_header")


def leaked(planted: dict[str, str], text: str) -> list[str]:
    return [name for name, value in planted.items() if value in text]


def our_log_lines(log: str) -> str:
    """The printout at ready (from its header to its last line) and every line that names us."""
    lines = log.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("vLLM startup: ready in"))
    end = next(i for i in range(start, len(lines)) if "full tree: vllm-otel-startup report" in lines[i])
    return "\n".join(lines[start:end + 1] + [line for line in lines if re.search("vllm[-_]otel[-_]startup", line)])


def test_no_planted_secret_in_any_store(eager, backends, tiny_model):
    obs, planted = eager, eager.planted
    start = obs.start
    stores = {
        "Phoenix": json.dumps([(s.name, s.attrs, s.events, s.status_message) for s in obs.spans]),
        "local file": json.dumps(obs.file_docs()),
        "VictoriaMetrics": json.dumps(backends.vm_query(f'{{k8s_pod_name="{start.name}"}}')),
        "Prometheus (/metrics)": json.dumps(backends.prom_query(f'{{k8s_pod_name="{start.name}"}}',
                                                                at=start.scraped_at)),
        "our log lines": our_log_lines(start.log),
        "spool": "".join(obs.spooled),
    }
    for store, text in stores.items():
        assert not leaked(planted, text), (store, leaked(planted, text))
    never = {k: planted[k] for k in NEVER_LOGGED_BY_VLLM}
    assert not leaked(never, start.log), leaked(never, start.log)
    # the stores held this start (a leak check on an empty store proves nothing)
    assert len(stores["VictoriaMetrics"]) > 1000 and len(stores["Prometheus (/metrics)"]) > 1000
    assert len(obs.spooled) == 2 and all(sc.PHASE in text for text in obs.spooled)  # EngineCore and worker


def test_what_stays_readable(eager, backends, tiny_model):
    """The redaction keeps the start readable: flag names, URL hosts, the model; the metric label is the
    model's name (this branch's code ran in every process: the label was the full path before)."""
    root = eager.root.attrs
    args = list(root[sc.COMMAND_ARGS])
    i = args.index("--api-key")
    assert args[i + 1:i + 4] == [R, R, R] and args[i + 4] == "--hf-overrides"
    overrides = json.loads(args[i + 5])
    assert overrides["auth_token"] == R and overrides["note"] == R
    assert overrides["mirror"] == f"https://{R}@mirror.invalid/m?sig={R}"
    # the last origin keeps its user: its password is also MY_SERVICE_URL's, which the environment's secrets replace
    # first (the URL rule alone would take the user too)
    origins = json.loads(args[args.index("--allowed-origins") + 1])
    assert origins == [f"https://{R}@example.invalid", f"https://{R}@example.invalid",
                       f"https://example.invalid/?token={R}", f"{R}@db.invalid:5432", f"https://admin:{R}@example.invalid"]
    assert root[sc.MODEL] == str(tiny_model) and root[sc.OUTCOME] == "ready"
    label = sc.prom_label(sc.MODEL)
    for series in (backends.vm_query(f'vllm_startup_starts_total{{k8s_pod_name="{eager.start.name}"}}'),
                   backends.prom_query(f'vllm_startup_starts_total{{k8s_pod_name="{eager.start.name}"}}',
                                       at=eager.start.scraped_at)):
        assert [s["metric"][label] for s in series] == [tiny_model.name]
    printed = our_log_lines(eager.start.log)
    assert re.search(r"vLLM startup: ready in [\d.]+ s", printed) and tiny_model.name in printed
