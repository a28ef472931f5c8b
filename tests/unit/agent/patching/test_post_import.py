"""Post-import hooks (agent/patching/post_import.py): a patch point's module gets its hook once it is imported, with
wrapt's rules (at once if imported already, once, never for a failed import), and on Python >= 3.12 with no frame of
ours or wrapt's under the module's own execution: a frame there shifts the stack of everything the import runs, and
CPython maps and unmaps a data-stack chunk at each call landing on a chunk boundary (issue 25).

Run by the unit tier on the project's interpreter (3.11: wrapt's hooks, the fallback) and under CPython 3.12
(tests/py312), where ``sys.monitoring`` carries them."""

from __future__ import annotations

import sys
import textwrap
import uuid

import pytest

from vllm_otel_startup.agent.foundation import sysmon
from vllm_otel_startup.agent.patching import post_import

monitoring = pytest.mark.skipif(not sysmon.available(), reason="sys.monitoring: Python >= 3.12")

# a module that records, while it executes, which frames of ours or wrapt's are under it
BODY = '''
import sys

def _under():
    f, out = sys._getframe(1), []
    while f is not None:
        name = f.f_code.co_filename
        if "/vllm_otel_startup/" in name or "/wrapt/" in name:
            out.append(f.f_code.co_name)
        f = f.f_back
    return out

UNDER = _under()
{extra}
DONE = True
'''


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A fresh importable package name with modules written on demand; hooks and modules forgotten after."""
    name = f"pi_{uuid.uuid4().hex[:8]}"
    root = tmp_path / name
    root.mkdir()
    (root / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(module: str, extra: str = "") -> str:
        (root / f"{module}.py").write_text(BODY.format(extra=textwrap.dedent(extra)))
        return f"{name}.{module}"

    yield write
    post_import.reset()
    for m in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[m]


def test_a_hook_runs_once_when_its_module_has_been_imported(package):
    target = package("target")
    seen: list = []
    post_import.register(lambda m: seen.append((m.__name__, getattr(m, "DONE", False))), target)
    assert seen == []
    __import__(target)
    __import__(target)
    assert seen == [(target, True)]  # after the module's whole execution, once


def test_a_module_imported_already_gets_its_hook_at_once(package):
    target = package("already")
    __import__(target)
    seen: list = []
    post_import.register(seen.append, target)
    assert [m.__name__ for m in seen] == [target]


@monitoring
def test_no_frame_of_ours_or_wrapts_is_under_the_modules_execution(package):
    target = package("deep", extra="from . import nested  # a nested import, hooked too\n")
    nested = package("nested")
    seen: list = []
    post_import.register(seen.append, target)
    post_import.register(seen.append, nested)
    module = __import__(target, fromlist=["UNDER"])
    assert module.UNDER == [] and sys.modules[nested].UNDER == []
    assert [m.__name__ for m in seen] == [nested, target]  # each as its own import returns


@monitoring
def test_a_circular_imports_partial_module_waits_for_its_own_import(package):
    a = package("a", extra="from . import b\n")
    package("b", extra=f"import {a.rsplit('.', 1)[0]}.a as _partial  # a is still executing here\n")
    seen: list = []
    post_import.register(lambda m: seen.append(getattr(m, "DONE", False)), a)
    __import__(a)
    assert seen == [True]


def test_a_failed_import_runs_no_hook_and_a_later_one_does(package, tmp_path):
    target = package("flaky", extra="raise ImportError('not yet')\n")
    seen: list = []
    post_import.register(seen.append, target)
    with pytest.raises(ImportError):
        __import__(target)
    assert seen == []
    package("flaky")  # fixed
    sys.modules.pop(target, None)
    import importlib

    importlib.invalidate_caches()
    __import__(target)
    assert [m.__name__ for m in seen] == [target]


@monitoring
def test_a_hook_that_raises_never_reaches_the_import_and_the_others_still_run(package, caplog):
    target = package("raising")
    seen: list = []

    def bad(module):
        raise RuntimeError("a bug of ours")

    post_import.register(bad, target)
    post_import.register(seen.append, target)
    module = __import__(target, fromlist=["DONE"])
    assert module.DONE and [m.__name__ for m in seen] == [target]


@monitoring
def test_reset_forgets_the_hooks_not_run_and_stops_watching_imports(package):
    target = package("never")
    seen: list = []
    post_import.register(seen.append, target)
    watched = post_import._IMPORTS
    post_import.reset()
    __import__(target)
    assert seen == [] and post_import._IMPORTS is None
    handlers = sysmon.events()._handlers.get(id(sysmon.import_code()), (None, ()))[1]
    assert watched not in handlers


@monitoring
def test_handlers_of_different_kinds_share_a_code_object_and_one_of_a_kind_replaces_the_last():
    """sysmon.Events: importlib's sysmon.import_code() has the import watcher and the post-import hooks; a second
    handler of a kind (a forked child's new import watcher) takes the first one's place rather than doubling its
    events."""
    class Counter:
        def __init__(self):
            self.n = 0

        def started(self, code, frame):
            self.n += 1

        def returned(self, code, frame, result):
            return None

        def unwound(self, code, exc):
            return None

    class Other(Counter):
        pass

    def target():
        return 1

    ev = sysmon.events()
    first, second, other = Counter(), Counter(), Other()
    try:
        assert ev.watch(target.__code__, first) and ev.watch(target.__code__, other)
        target()
        assert (first.n, other.n) == (1, 1)
        ev.watch(target.__code__, second)
        target()
        assert (first.n, second.n, other.n) == (1, 1, 2)
        ev.unwatch(target.__code__, other)
        target()
        assert (second.n, other.n) == (2, 2)
    finally:
        ev.unwatch(target.__code__)
    target()
    assert second.n == 2


@monitoring
def test_a_module_a_hook_imports_gets_its_own_hook_though_no_event_reports_that_import(package):
    """CPython reports no event inside a sys.monitoring callback: a module imported by a hook (or by a frameless row's
    steps) is found as the callback ends (post_import.sweep)."""
    first, second = package("first"), package("second")
    seen: list = []
    post_import.register(lambda m: (seen.append(m.__name__), __import__(second)), first)
    post_import.register(lambda m: seen.append(m.__name__), second)
    __import__(first)
    assert seen == [first, second]


@monitoring
def test_sweep_runs_the_hooks_of_modules_imported_unseen_and_only_once(package):
    target = package("unseen")
    seen: list = []
    post_import.register(seen.append, target)
    post_import.sweep()
    assert seen == []
    module = type(sys)(target)
    sys.modules[target] = module  # as an import inside a callback of ours leaves it: no event came
    post_import.sweep()
    post_import.sweep()
    assert seen == [module]


@monitoring
def test_a_forked_child_gets_a_fresh_lock(package):
    """The hooks' lock may be held by another thread at a fork (VLLM_WORKER_MULTIPROC_METHOD=fork): the child's is
    new (sysmon's after-fork hooks)."""
    post_import.register(lambda m: None, package("forked"))
    imports = post_import._IMPORTS
    assert any(ref() is imports for ref in sysmon._FORK_HOOKS)
    held = imports.lock
    held.acquire()
    try:
        sysmon._after_fork_in_child()
        assert imports.lock is not held and imports.lock.acquire(timeout=1)
        imports.lock.release()
    finally:
        held.release()


@monitoring
def test_an_import_event_after_the_first_takes_no_id_call(package, monkeypatch):
    """``id()`` raises an audit event, and vLLM's processes carry a Python audit hook (filelock's) that runs for each:
    the handlers of importlib's ``sysmon.import_code()`` are found by identity, never through ``id()``, once an event
    found them; watching or unwatching any code forgets that, so a handler added later gets its events."""
    ids: list[int] = []

    def counting_id(obj):
        ids.append(1)
        return sys.modules["builtins"].id(obj)

    seen: list[str] = []
    post_import.register(lambda m: seen.append(m.__name__), first := package("first"))
    __import__(first)
    monkeypatch.setattr(sysmon, "id", counting_id, raising=False)
    for i in range(5):
        __import__(package(f"m{i}"))
    assert ids == []
    assert seen == [first]


@monitoring
def test_handlers_cached_by_an_event_across_a_watch_in_another_thread_are_not_used():
    """The identity cache holds the generation of the handlers it read: an event that read them before another thread's
    watch() and cached them after it cannot hide the handler that watch() added (a watch or unwatch dropping the cache
    in one thread: test_handlers_of_different_kinds_share_a_code_object_and_one_of_a_kind_replaces_the_last)."""
    events = sysmon.events()

    def target() -> int:
        return 1

    class First:
        def started(self, code, frame) -> None:
            return None

    class Second(First):
        pass

    first, second = First(), Second()
    try:
        assert events.watch(target.__code__, first)
        stale, generation = events._lookup(target.__code__), events._generation  # read before the watch()
        assert events.watch(target.__code__, second)
        events._last = (target.__code__, stale, generation)  # ... and cached after it
        assert events._lookup(target.__code__) == (first, second)
    finally:
        events.unwatch(target.__code__)
