"""A launcher of several API servers (agent/export/frontends.py): its start ends when the last of them is ready, as
their spooled process spans say, failed if one failed; a waiting span covers the launcher's wait. The runtime as a
whole is in behaviour/test_launcher.py; here the watcher against a host of its own Protocol."""

from __future__ import annotations

import inspect
import tempfile
import threading
import time

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.export import frontends, spool
from vllm_otel_startup.agent.export.frontends import Frontends, LauncherHost

MS = 10**6


class Launcher:
    """A launcher's start as the watcher sees it (LauncherHost): its process span, tracer, and finish."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = provider.get_tracer("launcher")
        self.process_span = self.tracer.start_span(sc.ROOT_SPAN)
        self.done = False
        self.finished: list[tuple[str | None, int | None]] = []
        self.finished_event = threading.Event()

    def trace_id(self) -> str:
        return f"{self.process_span.get_span_context().trace_id:032x}"

    def finish(self, error=None, outcome=None, end_ns=None) -> None:
        self.done = True
        self.finished.append((outcome, end_ns))
        self.finished_event.set()

    def waits(self):
        return [s for s in self.exporter.get_finished_spans() if s.name == sc.API_SERVERS_WAIT_SPAN]


@pytest.fixture
def launcher(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    return Launcher()


def spool_api_server(host: Launcher, pid: int, end_ns: int, outcome: str = "ready") -> None:
    """An API server child's process span, spooled at its ready point as its own process does."""
    provider, exporter = TracerProvider(), InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    span = provider.get_tracer("child").start_span(
        sc.API_SERVER_PROCESS_SPAN, start_time=end_ns - 50 * MS,
        attributes={sc.PHASE: "api_server_process", sc.PROCESS_KIND: "api_server", sc.OUTCOME: outcome})
    span.end(end_time=end_ns)
    assert spool.write(host.trace_id(), spool.process_name("api_server", pid), exporter.get_finished_spans())


def test_not_settled_until_every_api_server_has_spooled(launcher):
    f = Frontends(launcher, 2)
    assert f.settle() is None
    spool_api_server(launcher, 101, f.since + 10 * MS)
    assert f.settle() is None and launcher.waits() == []


def test_settled_at_the_last_api_servers_ready_point_once(launcher):
    f = Frontends(launcher, 2)
    spool_api_server(launcher, 101, f.since + 30 * MS)
    spool_api_server(launcher, 102, f.since + 10 * MS)
    assert f.settle() == (f.since + 30 * MS, None)  # None: ready
    [wait] = launcher.waits()
    assert (wait.start_time, wait.end_time) == (f.since, f.since + 30 * MS)
    assert wait.parent.span_id == launcher.process_span.get_span_context().span_id
    assert f.settle() is None  # the watcher and the exit path may both get here: only the first settles
    assert len(launcher.waits()) == 1


def test_one_failed_api_server_fails_the_launcher(launcher):
    f = Frontends(launcher, 2)
    spool_api_server(launcher, 101, f.since + 10 * MS)
    spool_api_server(launcher, 102, f.since + 20 * MS, outcome="failed")
    assert f.settle() == (f.since + 20 * MS, "failed")


def test_api_servers_ready_before_the_wait_began_end_it_where_it_began(launcher):
    f = Frontends(launcher, 1)
    spool_api_server(launcher, 101, f.since - 100 * MS)
    assert f.settle() == (f.since - 100 * MS, None)
    [wait] = launcher.waits()
    assert wait.end_time == wait.start_time == f.since  # never a span that ends before it starts


def test_a_launcher_already_finished_is_not_settled_again(launcher):
    f = Frontends(launcher, 1)
    spool_api_server(launcher, 101, f.since + 10 * MS)
    launcher.done = True
    assert f.settle() is None and launcher.waits() == []


def test_the_watcher_finishes_the_launchers_start_when_they_are_ready(launcher, monkeypatch):
    monkeypatch.setattr(frontends, "FRONTEND_POLL_S", 0.01)
    f = Frontends(launcher, 1)
    f.watch()
    time.sleep(0.05)
    assert launcher.finished == []  # none ready yet: still starting
    spool_api_server(launcher, 101, f.since + 10 * MS)
    assert launcher.finished_event.wait(5.0)
    assert launcher.finished == [(None, f.since + 10 * MS)]


def test_the_watcher_stops_once_the_launcher_is_done(launcher, monkeypatch):
    monkeypatch.setattr(frontends, "FRONTEND_POLL_S", 0.01)
    before = set(threading.enumerate())
    Frontends(launcher, 3).watch()
    [watcher] = [t for t in set(threading.enumerate()) - before if t.name == "vllm-otel-startup-frontends"]
    assert watcher.daemon  # never keeps the host's interpreter from exiting
    launcher.done = True  # exited before its API servers were ready
    watcher.join(5.0)
    assert not watcher.is_alive() and launcher.finished == []


def test_the_runtime_is_a_launcher_host(start):
    rt = start("api_server").rt
    for name in LauncherHost.__annotations__:
        assert hasattr(rt, name), name
    assert rt.process_span is not None and rt.trace_id() == f"{rt.process_span.get_span_context().trace_id:032x}"
    assert "end_ns" in inspect.signature(rt.finish).parameters
