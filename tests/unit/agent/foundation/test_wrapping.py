"""Nothing of ours travels: what vLLM pickles or copies pickles and copies under the agent as it does without it.

``vllm serve --api-server-count 2`` (and every data-parallel start) pickles its argparse namespace, whose
``dispatch_function`` is the patched ``ServeSubcommand.cmd``, into each API server process; the wrapper refused
(``object proxy must define __reduce__()``) and the launcher died. Every patch point of the table, applied on a fake
release tree, is pickled here the ways vLLM's objects reach a pickler (module function, class attribute, bound
method, inside a namespace, a ``functools.partial``, multiprocessing's ``ForkingPickler``) and copied; the payload
names no module of ours, and unpickles to what the receiving process has under that name.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import importlib
import pickle
import sys
from multiprocessing.reduction import ForkingPickler

import pytest

from vllm_otel_startup.agent.foundation.patch_points import PATCH_POINTS
from vllm_otel_startup.agent.foundation.wrapping import FunctionWrapper, wrap

PROTOCOLS = range(2, pickle.HIGHEST_PROTOCOL + 1)
OURS = b"vllm_otel_startup"


def reached(target: str):
    """The patched object as vLLM's code reaches it: ``module.func`` or ``Class.method``."""
    module, qual = target.split(":")
    obj = importlib.import_module(module)
    for part in qual.split("."):
        obj = getattr(obj, part)
    return obj


def applied(started) -> list[str]:
    """The table's targets the agent wrapped in this process, once every module of the table is imported (importing
    runs its post-import hook)."""
    for point in PATCH_POINTS:
        if point.module.startswith("vllm"):
            with contextlib.suppress(ImportError):
                importlib.import_module(point.module)
    return sorted({key.removesuffix("#since") for key, status in started.installer.status.items()
                   if status in ("applied", "native") and is_wrapt(reached(key.removesuffix("#since")))})


def is_wrapt(obj) -> bool:
    return any(c.__name__ == "_FunctionWrapperBase" for c in type(obj).__mro__)


def round_trip(obj, protocol: int):
    data = pickle.dumps(obj, protocol)
    assert OURS not in data, f"our module is in the payload of {obj!r}"
    return pickle.loads(data)


def test_every_applied_patch_point_pickles_and_copies_as_vllms_function(start, monkeypatch):
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_OFF", "frameless")  # Python >= 3.12: every row wrapped, as on 3.11
    s = start("api_server", "0.33.0")
    targets = applied(s)
    assert len(targets) >= 20, targets  # the API server's rows on this release: imports really applied them
    for target in targets:
        obj = reached(target)
        assert isinstance(obj, (FunctionWrapper, FunctionWrapper.__bound_function_wrapper__)), target  # only ours
        for protocol in PROTOCOLS:
            back = round_trip(obj, protocol)
            assert back == obj or back is reached(target), (target, protocol)
        assert copy.copy(obj) is obj and copy.deepcopy(obj) is obj, target


def test_the_serve_namespace_crosses_to_an_api_server_process(start):
    """What APIServerProcessManager hands multiprocessing: the parsed arguments with their dispatch function."""
    start("api_server", "0.33.0")
    serve = importlib.import_module("vllm.entrypoints.cli.serve")
    cmd = serve.ServeSubcommand.cmd
    assert isinstance(cmd, FunctionWrapper.__bound_function_wrapper__)  # patched (marker row)
    args = argparse.Namespace(model="m", api_server_count=2, dispatch_function=cmd)
    data = bytes(ForkingPickler.dumps(args))
    assert OURS not in data
    back = pickle.loads(data)
    assert back.dispatch_function == cmd and back.model == "m"
    assert copy.deepcopy(args).dispatch_function is cmd


def test_bound_methods_partials_and_unpatched_receivers(start, monkeypatch):
    s = start("engine_core", "0.33.0")
    core = importlib.import_module("vllm.v1.engine.core")
    target = "vllm.v1.engine.core:EngineCore._initialize_kv_caches"
    assert s.installer.status[target] in ("applied", "native")
    engine = core.EngineCore.__new__(core.EngineCore)
    bound = engine._initialize_kv_caches
    for protocol in PROTOCOLS:
        back = round_trip(bound, protocol)  # (getattr, (instance, name)): the receiving side binds its own
        assert back.__name__ == "_initialize_kv_caches" and type(back.__self__) is core.EngineCore
    part = functools.partial(core.EngineCore._initialize_kv_caches, engine)
    assert round_trip(part, pickle.HIGHEST_PROTOCOL).func == core.EngineCore._initialize_kv_caches

    # a receiving process without the agent finds vLLM's plain function under the name: unpatch, then load
    payload = pickle.dumps(core.EngineCore._initialize_kv_caches)
    s.installer.uninstall()
    plain = pickle.loads(payload)
    assert not is_wrapt(plain) and plain is vars(core.EngineCore)["_initialize_kv_caches"]


def test_a_wrapped_module_function_and_staticmethod(tmp_path, monkeypatch):
    """The wrapper itself, outside the table: module function, staticmethod, classmethod."""
    mod = tmp_path / "travel_target.py"
    mod.write_text("def f(x):\n    return x + 1\n\nclass C:\n    @staticmethod\n    def s(x):\n        return x * 2\n"
                   "    @classmethod\n    def c(cls, x):\n        return (cls.__name__, x)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("travel_target", None)
    m = importlib.import_module("travel_target")
    calls = []

    def counting(wrapped, instance, args, kwargs):
        calls.append(wrapped.__name__)
        return wrapped(*args, **kwargs)

    for parent, name in ((m, "f"), (m.C, "s"), (m.C, "c")):
        wrap(parent, name, counting)
    for obj, arg, want in ((m.f, 1, 2), (m.C.s, 3, 6), (m.C.c, 4, ("C", 4)), (m.C().s, 5, 10)):
        for protocol in PROTOCOLS:
            back = round_trip(obj, protocol)
            assert back(arg) == want  # still ours in this process: the name resolves to the wrapper
        assert copy.deepcopy(obj) is obj
    assert calls and set(calls) == {"f", "s", "c"}
    with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
        def local(x):
            return x
        holder = type(sys)("holder")
        holder.local = local
        wrap(holder, "local", counting)
        pickle.dumps(holder.local)  # a local function does not pickle without us either
