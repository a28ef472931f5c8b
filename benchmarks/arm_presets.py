"""Named arms for the overhead benchmark (``--variant NAME`` alone), splitting OpenTelemetry's own floor (issue 58
item 3): what of it is the launcher, the SDK, and our distro's and configurator's choices. Environment only, no code
of ours: each is what a user could set.

- ``otelonly``: OpenTelemetry alone under our distro and configurator (its bootstrap, the SDK with its exporters,
  batch processor and metric reader threads, its resource detection, our resource attributes); our instrumentor does
  nothing (``OTEL_PYTHON_VLLM_STARTUP_OFF=instrumentor``, a diagnostics switch). Until 2026-12-07 this arm was
  ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=vllm_startup``, which since "off means off" (issue 60) also stops our distro
  and configurator: it measured the launcher with no SDK at all (docs/lab/overhead.md says which figures).
- ``sdkoff``: ``OTEL_SDK_DISABLED=true``: the launcher, its entry-point scans, our distro and configurator loaded as
  entry points and returning at once (off means off: no SDK is configured).
- ``launcher``: the launcher and its entry-point scans only: distro and configurator names that match no entry point
  (opentelemetry-instrument then takes its DefaultDistro and configures nothing; one warning line a process that
  ``vllm_startup`` was not loaded), every instrumentor skipped (``*``).
- ``sdkdefaults``: OpenTelemetry alone with the SDK's own defaults, our distro not selected: opentelemetry-distro's
  ``distro`` and ``configurator`` (the SDK's ``_OTelSDKConfigurator``; opentelemetry-sdk registers no configurator of
  its own, and a name that matches none, e.g. ``sdk``, configures nothing), OTLP traces, metrics and logs (its
  defaults), no resource detector of ours. Needs opentelemetry-distro importable: the CPU form puts the e2e suite's
  copy first on PYTHONPATH (tests/e2e/bootstrap_ecosystem.sh: ``E2E_HOME/otel-distro``); the GPU form expects it
  carried as ``.gpu/tools/otel-distro`` (``pip install --no-deps --target .gpu/tools/otel-distro
  opentelemetry-distro==<the image's opentelemetry-instrumentation version>``).
- ``env``: the agent activated through the environment with no launcher (see overhead.py).
"""

from __future__ import annotations

from pathlib import Path

DISTRO_PATH = "@otel-distro"  # replaced by each form with where opentelemetry-distro is importable from
GPU_DISTRO_PATH = "@tools/otel-distro:@R/site:@R/site-otel"  # the patched driver's folders (its own PYTHONPATH after)
NOT_OURS = {"OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "vllm_startup"}

PRESETS: dict[str, dict[str, str]] = {
    "otelonly": {"OTEL_PYTHON_VLLM_STARTUP_OFF": "instrumentor"},
    "sdkoff": {"OTEL_SDK_DISABLED": "true", **NOT_OURS},
    "launcher": {"OTEL_PYTHON_DISTRO": "none", "OTEL_PYTHON_CONFIGURATOR": "none",
                 "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "*"},
    "sdkdefaults": {"PYTHONPATH": DISTRO_PATH, "OTEL_PYTHON_DISTRO": "distro",
                    "OTEL_PYTHON_CONFIGURATOR": "configurator", "OTEL_TRACES_EXPORTER": "otlp", **NOT_OURS},
    "env": {},
}


def placed(variants: dict[str, dict[str, str]], distro_path: str) -> dict[str, dict[str, str]]:
    """``variants`` with the preset's placeholder for opentelemetry-distro's folder replaced by ``distro_path``."""
    return {name: {k: v.replace(DISTRO_PATH, distro_path) for k, v in env.items()} for name, env in variants.items()}


def distro_importable(folder: Path) -> bool:
    """opentelemetry-distro's package and its entry points (dist-info) in ``folder``."""
    return (folder / "opentelemetry" / "distro").is_dir() and any(folder.glob("opentelemetry_distro-*.dist-info"))
