"""Tiny PromQL string builders (no names of their own: callers pass names from vocabulary.py).

Why ``new_in`` instead of ``increase()``: startup metrics are recorded once per start, so each start brings
*new* series (a new process, pod or trace id) whose first sample already holds the start's counts and which
never increase afterwards. Prometheus' ``increase()`` over such a series is 0 (it only sees changes between
samples) while VictoriaMetrics' counts the first sample, so the two stores would disagree and Prometheus would
show no starts at all. A series that is present in the window but absent in the window before it is a start
that happened in the window, and its latest value is that start's contribution; both stores agree on that.
(A container restarted in place keeps its pod's label set: on the scrape path its second start only shows once
the first start's series has been gone for a window.)
"""

from __future__ import annotations

from collections.abc import Iterable


def eq(label: str, value: str) -> str:
    return f'{label}="{value}"'


def ne(label: str, value: str) -> str:
    return f'{label}!="{value}"'


def re(label: str, pattern: str) -> str:
    return f'{label}=~"{pattern}"'


def nre(label: str, pattern: str) -> str:
    return f'{label}!~"{pattern}"'


def selector(metric: str, matchers: Iterable[str] = ()) -> str:
    ms = [m for m in matchers if m]
    return f"{metric}{{{', '.join(ms)}}}" if ms else metric


def by(labels: Iterable[str]) -> str:
    return f"by ({', '.join(labels)})"


def on(labels: Iterable[str]) -> str:
    return f"on ({', '.join(labels)})"


def new_in(sel: str, window: str) -> str:
    """Series first seen within the last ``window`` (starts that happened in it), at their latest value."""
    return f"(max_over_time({sel}[{window}]) unless max_over_time({sel}[{window}] offset {window}))"


def seen_in(sel: str, window: str, offset: str = "") -> str:
    """Every series present at some point of the last ``window`` (ending ``offset`` ago), at its largest value."""
    return f"max_over_time({sel}[{window}]{f' offset {offset}' if offset else ''})"


def agg(op: str, labels: Iterable[str], expr: str, param: str = "") -> str:
    labels = list(labels)
    args = f"{param}, {expr}" if param else expr
    return f"{op} {by(labels)} ({args})" if labels else f"{op}({args})"


def buckets(labels: Iterable[str], expr: str, bounds: Iterable[str]) -> str:
    """A cumulative histogram of ``expr``'s values (one value per series: a start's): per bound, how many are
    ``<=`` it, by ``labels``, with the bound as ``le`` ("+Inf": all of them). Every bound of a group is there
    (``sum`` of ``<= bool``: 0 where no value is under it), so histogram_quantile takes the bound below the first
    non-empty bucket as its lower edge, not 0."""
    labels = list(labels)

    def bucket(b: str) -> str:
        return agg("count", labels, expr) if b == "+Inf" else agg("sum", labels, f"{expr} <= bool {b}")

    return " or ".join(f'label_replace({bucket(b)}, "le", "{b}", "", "")' for b in bounds)
