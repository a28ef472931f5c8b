"""How the agent meets the OpenTelemetry tooling its users already run: empty OTEL_* values are unset, our
distro and configurator are chosen for a vLLM launch with opentelemetry-distro installed, the other
configurators' "not loaded" warnings about ours are dropped, settings are listed by `opentelemetry-instrument
--help`, and package.py declares what contrib instrumentations declare. (The same, in a real environment with
opentelemetry-distro in both entry-point orders: tests/e2e/test_distro_coexistence.py.)"""

from __future__ import annotations

import gc
import logging
import os
from importlib.metadata import entry_points

import pytest

from vllm_otel_startup import environment_variables as ev
from vllm_otel_startup import package, settings
from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent import distro


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


@pytest.mark.parametrize("argv, chosen", [
    (["/v/bin/opentelemetry-instrument", "vllm", "serve", "m"], True),
    (["/v/bin/opentelemetry-instrument", "--traces_exporter", "otlp", "/v/bin/vllm", "serve", "m"], True),
    (["opentelemetry-instrument", "python", "-m", "vllm.entrypoints.openai.api_server"], True),
    (["opentelemetry-instrument", "flask", "run"], False),  # not vLLM: OpenTelemetry's own rules apply
    (["/v/bin/vllm", "serve", "m"], False),  # not the launcher (a child, or vLLM run directly)
    (["opentelemetry-instrument", "python", "serve_vllm.py"], False),
    (["opentelemetry-instrument", "--service_name", "vllm", "python", "gateway.py"], False),  # an option's value
    (["opentelemetry-instrument", "python", "bench.py", "--backend", "vllm"], False),  # the program's argument
    (["opentelemetry-instrument", "--service_name=gw", "vllm", "serve", "m"], True),
])
def test_a_vllm_launch_selects_our_distro_and_configurator(argv, chosen):
    env: dict[str, str] = {}
    assert ev.select_ours(env, argv) is chosen
    assert env == ({"OTEL_PYTHON_DISTRO": "vllm_startup", "OTEL_PYTHON_CONFIGURATOR": "vllm_startup"} if chosen else {})


@pytest.mark.parametrize("named", [{"OTEL_PYTHON_DISTRO": "distro"}, {"OTEL_PYTHON_CONFIGURATOR": "configurator"}])
def test_the_users_choice_wins(named):
    env = dict(named)
    assert not ev.select_ours(env, ["opentelemetry-instrument", "vllm", "serve", "m"])
    assert env == named


def test_an_empty_choice_is_no_choice():
    env = {"OTEL_PYTHON_DISTRO": ""}
    assert ev.select_ours(env, ["opentelemetry-instrument", "vllm", "serve", "m"])
    assert env["OTEL_PYTHON_DISTRO"] == "vllm_startup"


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


def test_settings_are_opentelemetry_instrument_options():
    eps = [ep for ep in entry_points(group="opentelemetry_environment_variables") if ep.name == "vllm_startup"]
    assert len(eps) == 1 and eps[0].load() is ev
    listed = {a for a in dir(ev) if a.startswith("OTEL_")}
    assert listed == {s.name for s in settings.ALL if not s.internal}  # user settings, no internal hand-overs
    assert "OTEL_PYTHON_VLLM_STARTUP_DIR" in listed and "OTEL_PYTHON_VLLM_STARTUP_TRACEPARENT" not in listed


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


def test_a_vendor_distro_stays_in_charge_and_says_so(monkeypatch, tmp_path):
    """A vendor's distro installed beside ours (here a stand-in distribution with Elastic EDOT's entry points; the
    real EDOT runs in tests/e2e/test_distro_coexistence.py): the launch names the vendor's distro and configurator,
    for every process alike, and one line on stderr says so; opentelemetry-distro is not a vendor's."""
    import io
    import sys

    dist = tmp_path / "vendor_otel-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vendor-otel\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[opentelemetry_distro]\ndistro = vendorotel.distro:VendorDistro\n\n"
                                           "[opentelemetry_configurator]\nconfigurator = vendorotel.distro:Conf\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    env: dict[str, str] = {}
    err = io.StringIO()
    assert not ev.select_ours(env, ["opentelemetry-instrument", "vllm", "serve", "m"], err=err)
    assert env == {"OTEL_PYTHON_DISTRO": "distro", "OTEL_PYTHON_CONFIGURATOR": "configurator"}
    [line] = err.getvalue().splitlines()
    assert "vendor-otel's distro configures OpenTelemetry" in line and "OTEL_PYTHON_DISTRO=vllm_startup" in line
    assert ev.vendor_distro() == ("distro", "configurator", "vendor-otel")
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(tmp_path)])
    assert ev.vendor_distro() is None  # ours (and opentelemetry-distro, where installed) only


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
