"""How the agent meets the OpenTelemetry tooling its users already run: empty OTEL_* values are unset, our
distro and configurator are chosen for a vLLM launch with opentelemetry-distro installed, the other
configurators' "not loaded" warnings about ours are dropped, settings are listed by `opentelemetry-instrument
--help`, and package.py declares what contrib instrumentations declare. (The same, in a real environment with
opentelemetry-distro in both entry-point orders: tests/e2e/test_distro_coexistence.py.)"""

from __future__ import annotations

import gc
import logging
import os

import pytest

from vllm_otel_startup import package
from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.bootstrap import distro


def test_empty_otel_values_are_unset():
    env = {"OTEL_TRACES_EXPORTER": "", "OTEL_METRICS_EXPORTER": "  ", "OTEL_SERVICE_NAME": "x", "HOME": ""}
    assert sorted(distro.unset_empty(env)) == ["OTEL_METRICS_EXPORTER", "OTEL_TRACES_EXPORTER"]
    assert env == {"OTEL_SERVICE_NAME": "x", "HOME": ""}  # only OTEL_* variables


@pytest.mark.parametrize("endpoint, traces, metrics", [
    ("http://collector:4318", "otlp", "otlp"),  # an empty value took the default: a Helm chart's `value: ""`
    (None, "vllm_startup_file", "none"),
])
def test_distro_defaults_apply_over_empty_values(monkeypatch, endpoint, traces, metrics):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(OTEL_TRACES_EXPORTER="", OTEL_METRICS_EXPORTER="", OTEL_EXPORTER_OTLP_PROTOCOL="")
    if endpoint:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    monkeypatch.setattr(os, "environ", env)  # the distro writes the process environment: a private one here
    distro.VllmStartupDistro()._configure()
    assert (env["OTEL_TRACES_EXPORTER"], env["OTEL_METRICS_EXPORTER"]) == (traces, metrics)
    assert env["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf"
    assert env["OTEL_PYTHON_CONFIGURATOR"] == "vllm_startup"  # our distro brings our configurator


def test_other_configurators_warnings_about_ours_are_dropped(caplog):
    distro.quiet_other_configurators()
    distro.quiet_other_configurators()  # idempotent: one filter
    log = logging.getLogger(distro._LOAD_LOGGER)
    assert sum(isinstance(f, distro._OtherConfiguratorNotLoaded) for f in log.filters) == 1
    with caplog.at_level(logging.WARNING, logger=distro._LOAD_LOGGER):
        # the two warnings opentelemetry-instrument's _load_configurators() prints when ours is chosen
        log.warning("Configuration of %s not loaded, %s already loaded", "configurator", "vllm_startup")
        log.warning("Configuration of %s not loaded because %s is set by %s", "configurator", "vllm_startup",
                    "OTEL_PYTHON_CONFIGURATOR")
        # about another configurator, or any other message: kept
        log.warning("Configuration of %s not loaded, %s already loaded", "vllm_startup", "configurator")
        log.warning("Configuration of %s failed", "vllm_startup")
    assert [r.getMessage() for r in caplog.records] == [
        "Configuration of vllm_startup not loaded, configurator already loaded",
        "Configuration of vllm_startup failed"]


def test_package_declares_what_contrib_instrumentations_declare():
    assert package._instruments_any and package._instruments == ()
    assert package._supports_metrics is True
    assert package._semconv_status == "development"


# Inductor's vector-ISA probe as torch 2.8 (import torch first) and torch 2.11 (no torch on Linux) run it
ISA_PROBES = ("import torch\nfrom ctypes import cdll\ncdll.LoadLibrary('/tmp/x.so')\n",
              "\nimport sys\nif sys.platform != 'linux':\n    import torch\nfrom ctypes import cdll\n"
              "cdll.LoadLibrary('/tmp/x.so')\n")


@pytest.mark.parametrize("code", ISA_PROBES)
def test_a_helper_gets_no_sdk(monkeypatch, code):
    """A helper interpreter (here Inductor's ISA probe, 9 per compiling process here, each on its parent's critical
    path) is never traced: the configurator builds nothing and imports no SDK class."""
    monkeypatch.setattr(distro, "cmdline", lambda: ["/v/bin/python", "-c", code])

    def built() -> type:
        raise AssertionError("the SDK configurator was built for a helper")

    monkeypatch.setattr(distro, "_sdk_configurator", built)
    distro.VllmStartupConfigurator().configure(auto_instrumentation_version="0")


def test_a_vllm_process_gets_the_sdk_configurator_with_our_defaults(monkeypatch):
    from opentelemetry.sdk._configuration import _OTelSDKConfigurator

    seen: dict = {}
    monkeypatch.setattr(distro, "cmdline", lambda: ["/v/bin/python", "/v/bin/vllm", "serve", "m"])
    monkeypatch.setattr(_OTelSDKConfigurator, "_configure", lambda self, **kw: seen.update(kw))
    distro.VllmStartupConfigurator().configure(auto_instrumentation_version="0")
    assert issubclass(distro._sdk_configurator(), _OTelSDKConfigurator)
    assert seen["resource_attributes"][sc.PROCESS_KIND] == "api_server"
    assert seen["auto_instrumentation_version"] == "0"


class _Loaded:
    """An entry point whose instrumentor only records that it ran (a real one would patch vLLM)."""

    def __init__(self, name: str, ran: list[str]) -> None:
        self.name, self._ran = name, ran

    def load(self):
        ran, name = self._ran, self.name

        class Instrumentor:
            def instrument(self, **kwargs):
                ran.append(name)

        return Instrumentor


def test_loading_our_instrumentor_leaves_the_collection_schedule_as_vllms(monkeypatch):
    """Nothing of the interpreter's goes to the permanent generation when our instrumentor is loaded (no gc.freeze):
    frozen objects leave the count CPython schedules full collections by, and on the H100 that moved one full
    collection (0.29 s) into the EngineCore's profile run in 13 of 14 starts (docs/results-log.md, 2026-12-06)."""
    from vllm_otel_startup import VllmStartupInstrumentor

    freezes: list[int] = []
    ran: list[str] = []
    monkeypatch.setattr(gc, "freeze", lambda: freezes.append(1))
    monkeypatch.setattr(VllmStartupInstrumentor, "_runtime", object())  # as in a traced process
    before = gc.get_freeze_count()
    d = distro.VllmStartupDistro()
    d.load_instrumentor(_Loaded("another", ran))
    d.load_instrumentor(_Loaded(distro.OURS, ran))
    assert ran == ["another", distro.OURS]
    assert freezes == [] and gc.get_freeze_count() == before
