"""Every exit a string leaves the process by, driven in process with planted secrets (tests/unit/planted.py):
startup spans (attributes, exception events, status messages; vLLM's own spans and ours), the process span,
the local file, the spool, the resource, metric labels on both export paths, the printout at ready, and the
command line's output, HTML and error messages. None of the planted secrets may reach any of them."""

from __future__ import annotations

import json
import random
import sys
import time
import types

import planted
import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import ProcessResourceDetector, Resource, get_aggregated_resources
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from prometheus_client import CollectorRegistry, generate_latest

from unit.behaviour.test_version_dispatch import call, replace_body
from unit.cli.test_tempo import TRACE, tempo  # noqa: F401 - the fake Tempo fixture
from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.bootstrap.distro import command_line_override
from vllm_otel_startup.agent.export import ready, spool
from vllm_otel_startup.agent.export.file_exporter import StartupFileExporter
from vllm_otel_startup.agent.export.prometheus import StartupCollector
from vllm_otel_startup.cli import main as cli
from vllm_otel_startup.model import redact
from vllm_otel_startup.model.spanmodel import from_readable

R = redact.REDACTED


def plant_env(monkeypatch, cases: list[planted.Case]) -> list[planted.Case]:
    """Set the cases' secret environment variables (a case whose variable another case set to another value
    is left out: that value is not in this process's environment, so nothing could know it is secret)."""
    env: dict[str, str] = {}
    kept = []
    for c in cases:
        if all(env.get(k, v) == v for k, v in c.env.items()):
            env.update(c.env)
            kept.append(c)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    redact.forget_env()
    return kept


@pytest.fixture(autouse=True)
def _fresh_env_secrets():
    redact.forget_env()
    yield
    redact.forget_env()


def exported(spans) -> str:
    """Everything an exporter sends of these SDK spans, as text."""
    return json.dumps([[s.name, dict(s.attributes or {}), [[e.name, dict(e.attributes or {})] for e in s.events],
                        s.status.description] for s in spans], default=str)


PLANTED: dict = {}  # what the fake vLLM functions below raise or return (replace_body takes no closures)


def _raise_planted(self, *args, **kwargs):
    raise RuntimeError(PLANTED["text"])


def _return_planted(self, *args, **kwargs):
    return PLANTED["config"]


def test_property_startup_spans_the_file_and_the_spool(start, monkeypatch, tmp_path):
    """Generated command lines and exception texts through real SDK spans and our span processor: vLLM-style
    spans that carry them as attributes and raise them (record_exception + ERROR status by the SDK), a phase of
    ours that raises, and the process span that fails with all of them and exports the command line."""
    cases = plant_env(monkeypatch, planted.cases(60, base=7000))
    s = start("api_server", "0.33.0")
    vllm_tracer = trace.get_tracer("vllm.model_executor.model_loader")
    texts = [t for c in cases for t in c.texts]
    for c in cases:
        for text in c.texts:
            with pytest.raises(ValueError), vllm_tracer.start_as_current_span(
                    "Load weights", attributes={"vllm.args": c.argv, "vllm.note": text, "vllm.model": c.model}):
                raise ValueError(text)
    PLANTED["text"] = " | ".join(texts)
    replace_body("vllm.engine.arg_utils", "EngineArgs.create_engine_config", _raise_planted)
    with pytest.raises(RuntimeError):
        call("vllm.engine.arg_utils:EngineArgs.create_engine_config")
    s.rt.info.argv = [a for c in cases for a in c.argv]
    s.rt.finish(error=RuntimeError("\n".join(texts)))
    spans = s.spans()
    out = exported(spans)
    for c in cases:
        assert not c.leaked(out), (c.seed, c.leaked(out))
    # they went through the exits checked here, scrubbed, not dropped
    loads = s.spans("Load weights")
    assert len(loads) == len(texts) and all(e.name == "exception" for sp in loads for e in sp.events)
    assert sum(R in sp.status.description for sp in loads) >= len(texts) // 2
    [config] = s.spans("Config resolution")
    assert config.status.status_code.name == "ERROR" and R in config.events[0].attributes["exception.message"]
    [root] = s.spans(sc.ROOT_SPAN)
    assert root.attributes[sc.COMMAND_ARGS][:3] == ("/venv/bin/python", "/venv/bin/vllm", "serve")
    assert R in root.events[0].attributes["exception.stacktrace"] and R in root.status.description

    exporter = StartupFileExporter(str(tmp_path / "starts"))
    exporter.export(spans)
    [written] = list((tmp_path / "starts").glob("*.jsonl"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setattr("tempfile.tempdir", None)
    trace_id = s.rt.trace_id()
    assert spool.write(trace_id, "worker-1", spans)
    spooled = json.dumps([vars(sp) for sp in spool.read(trace_id)], default=str)
    for c in cases:
        assert not c.leaked(written.read_text()) and not c.leaked(spooled), c.seed
    assert len(spool.read(trace_id)) == len(spans)


def test_the_resource_in_the_local_file_and_from_the_process_detector(tmp_path, monkeypatch):
    """A resource that carries a raw command line (an older SDK's ``process`` detector, or a user's own
    attributes) is written scrubbed; where the detector exports the command line, ours replaces it."""
    c = planted.case(42)
    plant_env(monkeypatch, [c])
    monkeypatch.setattr(sys, "orig_argv", c.argv)
    old_sdk = get_aggregated_resources([ProcessResourceDetector(include_command_args=True)]).merge(
        Resource(command_line_override({"OTEL_EXPERIMENTAL_RESOURCE_DETECTORS": "host,process"}, True)))
    assert c.argv[0] in old_sdk.attributes["process.command_line"]
    assert not c.leaked(json.dumps(dict(old_sdk.attributes), default=str))
    assert command_line_override({"OTEL_EXPERIMENTAL_RESOURCE_DETECTORS": "host,process"}) == {}  # SDK >= 1.45
    assert command_line_override({}, True) == {}  # no process detector: nothing added

    raw = Resource({"service.name": "vllm", "process.command_line": " ".join(c.argv), "process.command_args": c.argv})
    provider = TracerProvider(resource=raw)
    provider.add_span_processor(SimpleSpanProcessor(StartupFileExporter(str(tmp_path))))
    provider.get_tracer("t").start_span(sc.ROOT_SPAN, attributes={sc.PHASE: "startup"}).end()
    provider.shutdown()
    [written] = list(tmp_path.glob("*.jsonl"))
    assert not c.leaked(written.read_text()) and '"vllm"' in written.read_text()


def test_a_ready_start_labels_prints_and_exports_no_secret(start, metrics_reader, monkeypatch, capsys):
    """The API server reaches ready with secrets in its command line, its model URL, its served name and its
    environment: the spans, both metric paths' labels and the printout carry none of them; the model label is
    the model's name."""
    secrets = {name: planted.secret(random.Random(name)) for name in
               ("s3_key", "s3_sig", "served", "api_key", "hf_token", "json_token", "query")}
    monkeypatch.setenv("HF_TOKEN", secrets["hf_token"])
    redact.forget_env()
    model = f"s3://AKIAEXAMPLE:{secrets['s3_key']}@bucket/models/llama-3?X-Amz-Signature={secrets['s3_sig']}"
    config = types.SimpleNamespace(model_config=types.SimpleNamespace(
        model=model, served_model_name=[f"svc:{secrets['served']}@db:5432"], dtype="torch.float32",
        enforce_eager=True, max_model_len=256))
    s = start("api_server", "0.33.0")
    s.rt.info.argv = ["vllm", "serve", model, "--api-key", secrets["api_key"], "--hf-overrides",
                      json.dumps({"auth_token": secrets["json_token"]}), "--allowed-origins",
                      f'["https://ok.example/?token={secrets["query"]}"]', "--tokenizer", secrets["hf_token"]]
    PLANTED["config"] = config
    replace_body("vllm.engine.arg_utils", "EngineArgs.create_engine_config", _return_planted)
    call("vllm.engine.arg_utils:EngineArgs.create_engine_config")
    s.rt.finish()
    deadline = time.monotonic() + 10
    while not metrics_reader.exported and time.monotonic() < deadline:  # the ready point's flush thread
        time.sleep(0.05)
    labels = [dict(dp.attributes) for batch in metrics_reader.exported for rm in batch.resource_metrics
              for sm in rm.scope_metrics for m in sm.metrics for dp in m.data.data_points]
    registry = CollectorRegistry()
    registry.register(StartupCollector(lambda: [from_readable(sp) for sp in s.spans()], s.rt.fleet()))
    scraped = generate_latest(registry).decode()
    ready.print_summary(s.rt)
    printed = capsys.readouterr().out
    stores = {"spans": exported(s.spans()), "otlp labels": json.dumps(labels), "/metrics": scraped,
              "printout": printed}
    for store, text in stores.items():
        assert not [k for k, v in secrets.items() if v in text], store
    assert {lb.get(sc.MODEL) for lb in labels if sc.MODEL in lb} == {"llama-3"}
    assert 'vllm_model="llama-3"' in scraped and "vLLM startup" in printed
    [root] = s.spans(sc.ROOT_SPAN)
    assert root.attributes[sc.MODEL] == f"s3://{R}@bucket/models/llama-3?X-Amz-Signature={R}"
    assert root.attributes[sc.SERVED_MODEL_NAME] == f"{R}@db:5432"
    assert "--api-key" in root.attributes[sc.COMMAND_ARGS]


def test_the_command_line_never_shows_a_tempo_urls_credentials(tempo, tmp_path, capsys):  # noqa: F811
    """report / compare / advise with Tempo URLs that carry credentials (user:password, a token as the user
    name, a token in the query): the credentials are still sent (Basic auth), never printed or embedded."""
    pw, tok, q = (planted.secret(random.Random(n)) for n in ("pw", "tok", "q"))
    base = tempo["url"].replace("http://", f"http://me:{pw}@")
    direct = f"{tempo['url'].replace('http://', f'http://{tok}@')}/api/v2/traces/{TRACE}?token={q}"
    assert cli.main(["report", direct, "--html", str(tmp_path / "w.html")]) == 0
    assert cli.main(["compare", direct, direct, "--html", str(tmp_path / "c.html")]) == 0
    assert cli.main(["advise", TRACE, "--tempo", base]) == 0
    assert cli.main(["report", "ab" * 16, "--tempo", base]) == 2  # unknown trace: an error naming the URL
    assert cli.main(["report", f"http://me:{pw}@127.0.0.1:9/api/v2/traces/{TRACE}"]) == 2  # unreachable
    tempo["status"] = 500
    assert cli.main(["report", direct]) == 2
    out = capsys.readouterr()
    text = out.out + out.err + (tmp_path / "w.html").read_text() + (tmp_path / "c.html").read_text()
    assert pw not in text and tok not in text and q not in text
    assert f"http://{R}@127.0.0.1" in text and f"token={R}" in text  # the URL is still named
    sent = {r[1] for r in tempo["requests"]}
    assert len(sent) == 2 and all(a.startswith("Basic ") for a in sent)  # me:pw and tok: as Basic auth
