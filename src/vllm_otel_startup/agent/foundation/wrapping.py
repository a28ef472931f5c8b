"""The one way the agent wraps a function of vLLM's or torch's (every patch point, the call counter, torch.compile's
stages): a wrapt function wrapper that travels as the function it wraps.

vLLM pickles functions it holds, and so can anything that keeps a reference to one of our targets: ``vllm serve``
with several API servers pickles its argparse namespace, whose ``dispatch_function`` is the patched
``ServeSubcommand.cmd``, into every API server process; wrapt's proxies refuse to be pickled or copied
(``object proxy must define __reduce__()``) and the launcher died. Here a wrapper pickles as a reference to what it
wraps (``pkgutil.resolve_name("module:Qual.name")``, or a bound method's own ``(getattr, (instance, name))``):
the receiving process finds whatever that name is there, patched by its own agent or plain, exactly as vLLM's
function would have pickled without us; nothing of ours is in the payload. ``copy``/``deepcopy`` return the
wrapper itself, as they do for a function.
"""

from __future__ import annotations

import inspect
import pkgutil
from typing import Any

import wrapt


def _reduce(wrapped: Any, protocol: int) -> Any:
    if inspect.ismethod(wrapped):  # bound to an instance or a class: pickles as (getattr, (owner, name))
        return wrapped.__reduce_ex__(protocol)
    func = getattr(wrapped, "__func__", wrapped)  # a staticmethod / classmethod object from a class __dict__
    module, qualname = getattr(func, "__module__", None), getattr(func, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str) and "<locals>" not in qualname:
        return pkgutil.resolve_name, (f"{module}:{qualname}",)
    return wrapped.__reduce_ex__(protocol)  # whatever the object itself does (fails as it would without us)


class _Travels:
    """Pickle, copy and deep-copy as the wrapped function (a mixin for wrapt's two wrapper classes)."""

    def __reduce_ex__(self, protocol: int) -> Any:
        return _reduce(self.__wrapped__, protocol)

    def __reduce__(self) -> Any:
        return _reduce(self.__wrapped__, 2)

    def __copy__(self) -> Any:
        return self

    def __deepcopy__(self, memo: dict) -> Any:
        return self


class BoundFunctionWrapper(_Travels, wrapt.BoundFunctionWrapper):
    """What attribute access on a class or instance returns for a wrapped method."""


class FunctionWrapper(_Travels, wrapt.FunctionWrapper):
    __bound_function_wrapper__ = BoundFunctionWrapper


def wrap(parent: Any, name: str, wrapper: Any) -> FunctionWrapper:
    """Replace ``parent.name`` by a :class:`FunctionWrapper` calling ``wrapper(wrapped, instance, args, kwargs)``
    (``wrapt.wrap_function_wrapper``'s contract; for a class, the raw ``__dict__`` entry is wrapped)."""
    return wrapt.wrap_object(parent, name, FunctionWrapper, (wrapper,))
