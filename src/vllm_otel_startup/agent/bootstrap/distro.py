"""Distro and configurator: safe defaults for a vLLM server, applied before the SDK is built.

- OTLP over HTTP/protobuf unless the user chose a protocol (safe across fork; gRPC works when chosen).
- No OTLP endpoint configured: startup traces go to a local file (file_exporter.py), nothing is sent
  anywhere, nothing hangs; metrics go over OTLP only when an endpoint is configured (they are served on
  vLLM's own /metrics either way); logs exporter defaults to none.
- service.name defaults to "vllm"; process.*, host.* and k8s.* (downward-API environment) resource
  attributes. The command line is never a resource attribute of ours; where the SDK's ``process`` resource
  detector is enabled and exports it (SDK < 1.45 always did), our redacted command line replaces it.

- An empty ``OTEL_*`` variable is unset (the specification's rule; Helm charts render empty values).

With another distro installed (opentelemetry-distro), ``opentelemetry-instrument vllm ...`` selects ours
(environment_variables.py); once ours configures, the other configurators' "not loaded" warnings about it are
dropped (one line per process otherwise).
"""

from __future__ import annotations

import logging
import os
import platform
import socket
import sys
from functools import cache
from typing import Any

from opentelemetry.instrumentation.distro import BaseDistro

from vllm_otel_startup import semconv as sc
from vllm_otel_startup import settings
from vllm_otel_startup.agent.foundation.process import HELPER, child_rank, classify, cmdline, redact_argv

ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
METRICS_ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")


OURS = settings.ENTRY_POINT  # our distro's and configurator's entry-point name
_LOAD_LOGGER = "opentelemetry.instrumentation.auto_instrumentation._load"


def unset_empty(environ: Any = None) -> list[str]:
    """Remove every empty ``OTEL_*`` variable: the OpenTelemetry specification reads an empty value as unset."""
    environ = os.environ if environ is None else environ
    empty = [k for k, v in environ.items() if k.startswith("OTEL_") and not v.strip()]
    for k in empty:
        del environ[k]
    return empty


class _OtherConfiguratorNotLoaded(logging.Filter):
    """opentelemetry-instrument warns once per process for every configurator it did not load, ours chosen."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not (str(record.msg).startswith("Configuration of %s not loaded") and OURS in args[1:])


def quiet_other_configurators() -> None:
    log = logging.getLogger(_LOAD_LOGGER)
    if not any(isinstance(f, _OtherConfiguratorNotLoaded) for f in log.filters):
        log.addFilter(_OtherConfiguratorNotLoaded())


def endpoint_configured(environ: Any = None, names: tuple[str, ...] = ENDPOINT_VARS) -> bool:
    environ = os.environ if environ is None else environ
    return any(environ.get(k) for k in names)


class VllmStartupDistro(BaseDistro):
    def _configure(self, **kwargs: Any) -> None:
        if settings.switched_off():  # loaded by opentelemetry-instrument regardless; off means off
            return
        from vllm_otel_startup.agent.bootstrap.env_check import repair

        unset_empty(os.environ)
        # our distro runs: our configurator goes with it, whatever the entry points' order
        if os.environ.setdefault("OTEL_PYTHON_CONFIGURATOR", OURS) == OURS:
            quiet_other_configurators()
        repair(os.environ)  # bad OTEL_* values: one warning each, repaired (children inherit the repair)
        remote = endpoint_configured()
        os.environ.setdefault("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        os.environ.setdefault("OTEL_TRACES_EXPORTER", "otlp" if remote else "vllm_startup_file")
        os.environ.setdefault("OTEL_METRICS_EXPORTER", "otlp" if endpoint_configured(names=METRICS_ENDPOINT_VARS)
                              else "none")
        os.environ.setdefault("OTEL_LOGS_EXPORTER", "none")
        if settings.flag(settings.EXPORT_EACH_PHASE):
            # spans that are not phases leave within half a second too (SDK default 5 s). Without it the SDK's
            # schedule stands: an export every 500 ms would take the GIL beside a busy main thread
            os.environ.setdefault("OTEL_BSP_SCHEDULE_DELAY", "500")


def _service_name_set(environ: Any = None) -> bool:
    environ = os.environ if environ is None else environ
    if environ.get("OTEL_SERVICE_NAME"):
        return True
    return any(p.strip().startswith("service.name=") for p in environ.get("OTEL_RESOURCE_ATTRIBUTES", "").split(","))


def resource_attributes(environ: Any = None) -> dict[str, Any]:
    environ = os.environ if environ is None else environ
    argv = cmdline()
    attrs: dict[str, Any] = {
        "process.pid": os.getpid(),
        "process.parent_pid": os.getppid(),
        "process.executable.name": os.path.basename(sys.executable),
        "process.executable.path": sys.executable,
        "process.runtime.name": sys.implementation.name,
        "process.runtime.version": platform.python_version(),
        "host.name": socket.gethostname(),
        "host.arch": platform.machine(),
        "os.type": sys.platform,
        sc.PROCESS_KIND: classify(argv, environ),
    }
    rank = child_rank(attrs[sc.PROCESS_KIND])
    if rank is not None:  # tensor-parallel workers' metric streams differ by it
        attrs[sc.WORKER_RANK] = rank
    if not _service_name_set(environ):
        attrs["service.name"] = "vllm"
    for key, names in sc.K8S_ENV.items():
        for name in names:
            if environ.get(name):
                attrs[key] = environ[name]
                break
    return attrs


def command_line_override(environ: Any = None, detector_exports_args: bool | None = None) -> dict[str, Any]:
    """The redacted command line as resource attributes, where the SDK's ``process`` detector is enabled and
    exports the raw one: our attributes are merged last, so they replace the detector's."""
    environ = os.environ if environ is None else environ
    detectors = [d.strip() for d in environ.get("OTEL_EXPERIMENTAL_RESOURCE_DETECTORS", "").split(",")]
    if "process" not in detectors:
        return {}
    if detector_exports_args is None:
        from opentelemetry.sdk.resources import ProcessResourceDetector

        # SDK >= 1.45 exports the command line only when asked to (include_command_args, off by default)
        detector_exports_args = "include_command_args" not in ProcessResourceDetector.__init__.__code__.co_varnames
    if not detector_exports_args:
        return {}
    args = redact_argv(sys.orig_argv if hasattr(sys, "orig_argv") else sys.argv)
    return {"process.command_line": " ".join(args), "process.command_args": args}


class VllmStartupConfigurator:
    """The SDK's configurator with our defaults, in every process but a helper (resource tracker, compile worker,
    Inductor's ISA probe, model inspection: never traced), which gets no SDK at all: no SDK or exporter import, the
    global providers stay no-op (a helper interpreter starts faster without them; Inductor starts several ISA
    probes per compiling process and waits for each). opentelemetry-instrument calls only
    ``configure``; the SDK's class is imported once a process needs it. Under an off switch
    (settings.switched_off) no process gets an SDK either: the only spans it would carry in a vLLM server are
    vLLM's own, as fragments; a host that wants OpenTelemetry's SDK for other instrumentations while ours is off
    selects another configurator (``OTEL_PYTHON_CONFIGURATOR``)."""

    def configure(self, **kwargs: Any) -> None:
        if settings.switched_off() or classify(cmdline()) == HELPER:
            return
        _sdk_configurator()().configure(**kwargs)


@cache
def _sdk_configurator() -> type:
    from opentelemetry.sdk._configuration import _OTelSDKConfigurator

    class Configurator(_OTelSDKConfigurator):
        def _configure(self, **kwargs: Any) -> None:
            unset_empty(os.environ)  # also when another distro ran before us
            attrs = {**resource_attributes(), **command_line_override()}
            attrs.update(kwargs.get("resource_attributes") or {})
            kwargs["resource_attributes"] = attrs
            if not os.environ.get("OTEL_PYTHON_ID_GENERATOR"):
                from vllm_otel_startup.agent.foundation.ids import UrandomIdGenerator

                kwargs.setdefault("id_generator", UrandomIdGenerator())
            super()._configure(**kwargs)
            from opentelemetry import trace

            from vllm_otel_startup.agent.foundation import fragments

            fragments.install(trace.get_tracer_provider())  # vLLM's spans outside a start: dropped, never roots

    return Configurator
