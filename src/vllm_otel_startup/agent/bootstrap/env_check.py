"""Bad OTEL_* settings cost one clear warning each, never the start, never a traceback and never a secret.

Checked before the SDK is configured (the distro runs first), each repaired so the rest works:
- an OTLP protocol the Python exporters do not have, or ``grpc`` without the gRPC exporter installed (the
  ``grpc`` extra) -> ``http/protobuf`` (the SDK would raise, and opentelemetry-instrument would print a traceback
  and run with no SDK at all);
- an endpoint that is not a URL -> OTLP is turned off for that signal and traces go to the local file (the
  exporter would fail at every export);
- malformed ``OTEL_EXPORTER_OTLP*_HEADERS`` entries -> dropped, named by position only (the SDK would print
  the entry, and header values are credentials);
- an unknown ``OTEL_TRACES_SAMPLER`` -> unset, so the SDK's default sampler applies (the SDK would print two
  lines).
"""

from __future__ import annotations

import logging
from collections.abc import MutableMapping
from urllib.parse import unquote, urlsplit

_log = logging.getLogger("vllm_otel_startup")

PROTOCOLS = ("grpc", "http/protobuf")
SIGNALS = ("", "TRACES_", "METRICS_", "LOGS_")
SAMPLERS = ("always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off",
            "parentbased_traceidratio", "parentbased_jaeger_remote", "jaeger_remote", "xray")


def _warn(message: str) -> str:
    _log.warning("vllm-otel-startup: %s", message)
    return message


def _url_ok(value: str, protocol: str) -> bool:
    parts = urlsplit(value if "://" in value or protocol != "grpc" else f"http://{value}")
    try:
        parts.port  # noqa: B018 - raises on a malformed port
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _header_ok(entry: str) -> bool:
    name, sep, value = entry.partition("=")
    return bool(sep and unquote(name).strip() and unquote(value).strip())


def _known_sampler(name: str) -> bool:
    if name in SAMPLERS:
        return True
    from importlib.metadata import entry_points

    return any(ep.name == name for ep in entry_points(group="opentelemetry_traces_sampler"))


def _grpc_exporter() -> bool:
    """Whether OpenTelemetry's OTLP/gRPC exporter is installed (the `grpc` extra; vLLM itself may bring it)."""
    from importlib.util import find_spec

    try:
        return find_spec("opentelemetry.exporter.otlp.proto.grpc") is not None
    except (ImportError, ValueError):
        return False


def repair(environ: MutableMapping[str, str]) -> list[str]:
    """Fix what would break or spam the SDK; one warning per problem (returned too, for tests)."""
    warnings: list[str] = []
    for sig in SIGNALS:
        key = f"OTEL_EXPORTER_OTLP_{sig}PROTOCOL"
        value = environ.get(key, "").strip()
        if value and value not in PROTOCOLS:
            warnings.append(_warn(f"{key}={value!r} is not one of {', '.join(PROTOCOLS)}; using http/protobuf"))
            environ[key] = "http/protobuf"
        elif value == "grpc" and not _grpc_exporter():
            warnings.append(_warn(f"{key}=grpc needs the gRPC exporter (pip install 'vllm-otel-startup[grpc]'); "
                                  "using http/protobuf (point the endpoint at the collector's HTTP port, 4318)"))
            environ[key] = "http/protobuf"
    for sig in SIGNALS[:3]:
        key = f"OTEL_EXPORTER_OTLP_{sig}ENDPOINT"
        value = environ.get(key, "").strip()
        protocol = environ.get(f"OTEL_EXPORTER_OTLP_{sig}PROTOCOL") or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "")
        if value and not _url_ok(value, protocol):
            what = "traces go to the local file" if sig in ("", "TRACES_") else "no OTLP metrics"
            warnings.append(_warn(f"{key} is not a URL (scheme://host[:port]); OTLP export off, {what}"))
            del environ[key]
            if sig in ("", "TRACES_") and environ.get("OTEL_TRACES_EXPORTER", "otlp") == "otlp":
                environ["OTEL_TRACES_EXPORTER"] = "vllm_startup_file"
            if sig in ("", "METRICS_"):
                environ["OTEL_METRICS_EXPORTER"] = "none"
    for sig in SIGNALS:
        key = f"OTEL_EXPORTER_OTLP_{sig}HEADERS"
        value = environ.get(key)
        if value is None:
            continue
        entries = [e for e in value.split(",") if e.strip()]
        bad = [n for n, e in enumerate(entries, 1) if not _header_ok(e)]
        if bad:
            warnings.append(_warn(f"{key}: entries {bad} are not name=value and were dropped (values not shown)"))
            environ[key] = ",".join(e for n, e in enumerate(entries, 1) if n not in bad)
    sampler = environ.get("OTEL_TRACES_SAMPLER", "").strip()
    if sampler and not _known_sampler(sampler):
        warnings.append(_warn(f"OTEL_TRACES_SAMPLER={sampler!r} is not a known sampler; using the default"))
        del environ["OTEL_TRACES_SAMPLER"]
    return warnings
