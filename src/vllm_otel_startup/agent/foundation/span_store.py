"""A value per span, for as long as the span lives: the slot one part of the agent fills and another reads, without
setting attributes on the SDK's span object (keyed weakly: an ended span that is dropped takes its value along)."""

from __future__ import annotations

import contextlib
import weakref
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class SpanSlot(Generic[T]):
    def __init__(self) -> None:
        self._values: weakref.WeakKeyDictionary[Any, T] = weakref.WeakKeyDictionary()

    def set(self, span: Any, value: T) -> None:
        with contextlib.suppress(TypeError):  # not weakly referable (a test double): no slot, the reader falls back
            self._values[span] = value

    def get(self, span: Any, default: T | None = None) -> T | None:
        try:
            return self._values.get(span, default)
        except TypeError:
            return default


# the end time a span is about to carry, taken as its end() starts (export/processor.py): what a cause probe derives
# from the span's duration while it ends (GB/s) is over exactly that duration
END_TIMES: SpanSlot[int] = SpanSlot()
