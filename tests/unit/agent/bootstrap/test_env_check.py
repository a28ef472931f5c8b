"""Bad OTEL_* settings: one warning each, repaired so the start and the rest of the telemetry go on."""

from __future__ import annotations

import logging

from vllm_otel_startup.agent.bootstrap.env_check import repair


def run(environ: dict, caplog) -> list[str]:
    with caplog.at_level(logging.WARNING, logger="vllm_otel_startup"):
        return repair(environ)


def test_good_settings_pass_untouched(caplog):
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
           "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20x,tenant=a", "OTEL_TRACES_SAMPLER": "always_on",
           "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "collector:4317"}
    before = dict(env)
    assert run(env, caplog) == [] and env == before and caplog.records == []


def test_unknown_protocol_falls_back_to_http_protobuf(caplog):
    env = {"OTEL_EXPORTER_OTLP_PROTOCOL": "carrier-pigeon"}
    [w] = run(env, caplog)
    assert env["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf" and "carrier-pigeon" in w
    assert len(caplog.records) == 1


def test_an_endpoint_that_is_not_a_url_turns_otlp_off_and_keeps_the_local_file(caplog):
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "not a url::", "OTEL_TRACES_EXPORTER": "otlp"}
    [w] = run(env, caplog)
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" not in env
    assert env["OTEL_TRACES_EXPORTER"] == "vllm_startup_file" and env["OTEL_METRICS_EXPORTER"] == "none"
    assert "not a URL" in w


def test_malformed_headers_are_dropped_without_showing_values(caplog):
    env = {"OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20sk-secret,garbage-sk-secret2,,=x"}
    [w] = run(env, caplog)
    assert env["OTEL_EXPORTER_OTLP_HEADERS"] == "authorization=Bearer%20sk-secret"
    assert "sk-secret" not in w and "garbage" not in w and "[2, 3]" in w


def test_unknown_sampler_is_unset(caplog):
    env = {"OTEL_TRACES_SAMPLER": "not_a_sampler"}
    [w] = run(env, caplog)
    assert "OTEL_TRACES_SAMPLER" not in env and "not_a_sampler" in w


def test_grpc_without_the_grpc_extra_falls_back_to_http_protobuf(caplog, monkeypatch):
    """The default install carries only the http/protobuf exporter (pyproject's `grpc` extra adds gRPC); asking
    for gRPC without it costs one warning that says what to install, not a traceback and a start with no SDK.
    (The gRPC exporter is installed in the test environment: its absence is stood in for here; tests/e2e/test_wheel
    installs the wheel where it really is absent.)"""
    from vllm_otel_startup.agent.bootstrap import env_check

    monkeypatch.setattr(env_check, "_grpc_exporter", lambda: False)
    env = {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    [w] = run(env, caplog)
    assert env["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf"
    assert "vllm-otel-startup[grpc]" in w and len(caplog.records) == 1
