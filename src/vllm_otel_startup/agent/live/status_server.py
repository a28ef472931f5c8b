"""The opt-in status endpoint of a starting API server (``OTEL_PYTHON_VLLM_STARTUP_STATUS_PORT``): a standard-
library HTTP server on a daemon thread, up from the first milliseconds of the start until its ready point,
before vLLM's own HTTP server exists.

    GET /status (also /startupz, /)   JSON: state, the phase the start is in, each process's open phase stack,
                                      elapsed, expected remaining (or why there is no estimate), last error
    GET /metrics                      the in-progress series of the whole start (prometheus-client's exposition:
                                      text 0.0.4, OpenMetrics when the scraper asks): a plain Prometheus scrape
                                      sees a starting pod with no collector

The server is the standard library's, not prometheus-client's ``start_http_server``: that one answers every path
with the metrics, and ``/status`` is JSON. Imported only when the setting is set. A bad setting or a port already
taken costs one warning; the start goes on. Closed at the ready point (vLLM's ``/health`` and ``/metrics`` take
over).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.foundation import threads

_log = logging.getLogger("vllm_otel_startup")


def parse(value: str) -> tuple[str, int]:
    """``PORT`` or ``HOST:PORT`` (host default all interfaces: a pod is scraped on its IP); ValueError if bad."""
    host, sep, port = value.strip().rpartition(":")
    n = int(port)
    if not 0 < n < 65536:
        raise ValueError(f"port {n} out of range")
    return (host.strip("[]") if sep and host else "0.0.0.0"), n  # noqa: S104 - a scrape target


class _Series:
    """A one-scrape prometheus-client collector over (metric, value, labels) rows, named as the OTLP path names
    them (semconv.prom_name / prom_label); every in-progress series is a gauge."""

    def __init__(self, series: list[tuple[str, float, dict[str, str]]]) -> None:
        self.series = series

    def collect(self) -> Iterator[Any]:
        from prometheus_client.metrics_core import GaugeMetricFamily

        by_metric: dict[str, list[tuple[float, dict[str, str]]]] = {}
        for metric, value, labels in self.series:
            by_metric.setdefault(metric, []).append((value, labels))
        for metric, rows in by_metric.items():
            fam = GaugeMetricFamily(sc.prom_name(metric), sc.METRICS[metric][3])
            for value, labels in rows:
                fam.add_sample(fam.name, {sc.prom_label(k): str(v) for k, v in labels.items()}, float(value))
            yield fam


def exposition(series: list[tuple[str, float, dict[str, str]]], accept: str | None = None) -> tuple[bytes, str]:
    """The series in the format the scraper asks for (``Accept``): Prometheus text 0.0.4, or OpenMetrics 1.0 when
    asked; prometheus-client writes both (escaping, number formatting). Returns (body, content type)."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.exposition import choose_encoder

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Series(series))
    encoder, content_type = choose_encoder(accept or "")
    return encoder(registry), content_type


class StatusSource(Protocol):
    """What the endpoint serves (live.Live provides it)."""

    def status(self) -> dict[str, Any]: ...

    def series(self) -> list[tuple[str, float, dict[str, str]]]: ...


class _Handler(BaseHTTPRequestHandler):
    live: StatusSource  # set on the subclass made per server
    server_version = "vllm-otel-startup"

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        path = self.path.split("?", 1)[0]
        try:
            if path in ("/", "/status", "/startupz"):
                body, ctype = json.dumps(self.live.status()).encode(), "application/json"
            elif path == "/metrics":
                body, ctype = exposition(self.live.series(), self.headers.get("Accept"))
            else:
                self.send_error(404)
                return
        except Exception:  # noqa: BLE001 - an answer, never an exception into the server thread
            _log.debug("status request failed", exc_info=True)
            self.send_error(500)
            return
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet: the server's log is vLLM's
        return


class StatusServer:
    def __init__(self, live: StatusSource, host: str, port: int) -> None:
        handler = type("Handler", (_Handler,), {"live": live})
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self.address = self.httpd.server_address
        self.thread = threads.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.5},
                                     name="vllm-otel-startup-status", daemon=True)
        self.thread.start()

    def close(self) -> None:
        try:
            self.httpd.shutdown()
            self.httpd.server_close()
        except Exception:  # noqa: BLE001
            _log.debug("status server close failed", exc_info=True)

    def forget(self) -> None:
        """A forked child's copy: close the socket, the serving thread is the parent's."""
        with contextlib.suppress(OSError):
            self.httpd.socket.close()


def start(live: StatusSource, setting: str) -> StatusServer | None:
    try:
        host, port = parse(setting)
    except ValueError:
        _log.warning("vllm-otel-startup: OTEL_PYTHON_VLLM_STARTUP_STATUS_PORT=%r is not PORT or HOST:PORT; no status "
                     "endpoint", setting)
        return None
    try:
        return StatusServer(live, host, port)
    except OSError as exc:
        _log.warning("vllm-otel-startup: no status endpoint on %s:%d (%s); the start goes on", host, port, exc)
        return None
