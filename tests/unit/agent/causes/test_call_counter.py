"""agent/call_counter.py: a counter a cause probe installs lazily on a library function: it counts the calls from
install() on (from any thread), reports an absent target instead of failing, and uninstall() puts back exactly
what was there (an inherited method shows the base's again)."""

from __future__ import annotations

import sys
import threading
import types

import pytest

from vllm_otel_startup.agent.causes.call_counter import CallCounter


class _Base:
    def capture(self, x):
        return x * 2


class _Graph(_Base):
    pass


class _Builder:
    @staticmethod
    def build(n):
        return n + 1


@pytest.fixture
def lib(monkeypatch):
    mod = types.ModuleType("vos_fake_lib")
    mod.Builder = _Builder
    mod.Graph = _Graph
    monkeypatch.setitem(sys.modules, "vos_fake_lib", mod)
    return mod


def test_calls_after_install_are_counted_and_results_unchanged(lib):
    lib.Builder.build(1)  # before install: not counted
    c = CallCounter("vos_fake_lib", "Builder.build")
    assert c.installed is None and c.install() is True
    assert [lib.Builder.build(i) for i in range(3)] == [1, 2, 3]
    threads = [threading.Thread(target=lib.Builder.build, args=(0,)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert c.count == 7


def test_an_inherited_method_is_counted_and_uninstall_shows_the_bases_again(lib):
    c = CallCounter("vos_fake_lib", "Graph.capture")
    assert c.install() is True
    assert lib.Graph().capture(4) == 8 and c.count == 1
    c.uninstall()
    assert "capture" not in vars(_Graph) and _Graph.capture is _Base.capture
    assert c.installed is None
    _Graph().capture(1)
    assert c.count == 1  # no longer counting


def test_uninstall_restores_a_classs_own_attribute(lib):
    original = vars(_Builder)["build"]
    c = CallCounter("vos_fake_lib", "Builder.build")
    c.install()
    assert vars(_Builder)["build"] is not original
    c.uninstall()
    assert vars(_Builder)["build"] is original


def test_an_absent_module_or_target_is_reported_once_not_raised(lib):
    for module, qualname in (("vos_not_loaded", "Builder.build"), ("vos_fake_lib", "Builder.missing"),
                              ("vos_fake_lib", "Nope.x")):
        c = CallCounter(module, qualname)
        assert c.install() is False and c.installed is False
        assert c.install() is False  # tried once
        c.uninstall()
