"""environment_variables.py: our settings as opentelemetry-instrument options, and the distro choice when it launches
vLLM: ours unless the user named one (empty is no choice), a vendor's distro left in charge with one line saying
so."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest

from vllm_otel_startup import settings
from vllm_otel_startup.agent.bootstrap import environment_variables as ev


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


def test_settings_are_opentelemetry_instrument_options():
    eps = [ep for ep in entry_points(group="opentelemetry_environment_variables") if ep.name == "vllm_startup"]
    assert len(eps) == 1 and eps[0].load() is ev
    listed = {a for a in dir(ev) if a.startswith("OTEL_")}
    assert listed == {s.name for s in settings.ALL if not s.internal}  # user settings, no internal hand-overs
    assert "OTEL_PYTHON_VLLM_STARTUP_DIR" in listed and "OTEL_PYTHON_VLLM_STARTUP_TRACEPARENT" not in listed


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
