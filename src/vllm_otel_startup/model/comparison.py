"""The comparison behind ``vllm-otel-startup compare A B`` (cli/compare.py renders it): two starts, or two sets of
starts (medians), phase by phase: durations, deltas and the causes that changed ("torch.compile: compile cache
miss -> hit, -29.1 s")."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.model import compile_factors as cf
from vllm_otel_startup.model.errors import ReportError
from vllm_otel_startup.model.facts import KIND_LABEL, human_bytes, kind_of, no_aot_artifact_yet, phase_of
from vllm_otel_startup.model.formatting import signed_seconds as _signed
from vllm_otel_startup.model.spanmodel import Span
from vllm_otel_startup.model.start import Start

# Structured causes compared between the sides: (label, attribute, how a value reads)
CAUSES: list[tuple[str, str, dict[object, str] | None]] = [
    ("compile cache", sc.COMPILE_CACHE_HIT, {True: "hit", False: "miss"}),
    ("modelinfo cache", sc.MODEL_INSPECTION_CACHE_HIT, {True: "hit", False: "miss"}),
    ("AOT artifact", sc.COMPILE_AOT_LOADED, {True: "loaded", False: "not loaded"}),
    ("weights source", sc.WEIGHTS_SOURCE, None),
    ("load format", sc.WEIGHTS_LOAD_FORMAT, None),
    ("CUDA graphs", sc.CUDAGRAPH_COUNT, None),
    ("C++ builds", sc.COMPILE_CPP_BUILDS, None),
]


@dataclass
class Row:
    key: tuple[str, str]  # (process kind, phase id)
    name: str
    depth: int
    order: float
    a: float | None
    b: float | None
    causes_a: dict[str, str] = field(default_factory=dict)
    causes_b: dict[str, str] = field(default_factory=dict)

    @property
    def delta(self) -> float:
        return (self.b or 0.0) - (self.a or 0.0)

    def changes(self) -> list[str]:
        out = []
        for label in dict.fromkeys([*self.causes_a, *self.causes_b]):
            va, vb = self.causes_a.get(label, "absent"), self.causes_b.get(label, "absent")
            if va != vb:
                out.append(f"{label} {va} → {vb}")
        return out

    def pct(self) -> str:
        return f"{100 * self.delta / self.a:+.0f}%" if self.a and self.a >= 0.05 else ""


@dataclass
class Comparison:
    a_label: str
    b_label: str
    a_n: int
    b_n: int
    model: str
    rows: list[Row]
    start_changes: list[str]


def _side_values(starts: list[Start]) -> tuple[dict[tuple[str, str], list[float]], dict[tuple[str, str], list[dict]]]:
    times: dict[tuple[str, str], list[float]] = {}
    causes: dict[tuple[str, str], list[dict]] = {}
    for st in starts:
        for key, v in st.facts.seconds.items():
            times.setdefault(key, []).append(v)
        per_key: dict[tuple[str, str], dict[str, str]] = {}
        for s in st.spans:
            key = (kind_of(s), phase_of(s))
            for label, attr, names in CAUSES:
                if attr in s.attrs:
                    v = s.attrs[attr]
                    per_key.setdefault(key, {})[label] = names.get(v, str(v)) if names else str(v)
            if phase_of(s) == "weights_download" and isinstance(s.attrs.get(sc.DOWNLOAD_BYTES), int):
                n = s.attrs[sc.DOWNLOAD_BYTES]  # the download span of a hub-cache hit downloads nothing
                per_key.setdefault(key, {})["hub download"] = human_bytes(n) if n else "none (hub cache)"
            if s.attrs.get(sc.COMPILE_AOT_LOADED) is False:
                err = str(s.attrs.get(sc.COMPILE_AOT_LOAD_ERROR) or "")
                per_key.setdefault(key, {})["AOT artifact"] = (
                    "none yet" if no_aot_artifact_yet(err) else "load failed" if err else "not loaded")
        for key, d in per_key.items():
            causes.setdefault(key, []).append(d)
    return times, causes


def _majority(dicts: list[dict[str, str]]) -> dict[str, str]:
    out = {}
    for label in dict.fromkeys(k for d in dicts for k in d):
        values = Counter(d[label] for d in dicts if label in d)
        top, n = values.most_common(1)[0]
        out[label] = top if len(values) == 1 else f"{top} ({n}/{sum(values.values())})"
    return out


def _models(starts: list[Start]) -> list[str]:
    return sorted({st.model for st in starts})


def compare(a: list[Start], b: list[Start], *, a_label: str = "A", b_label: str = "B",
            allow_different_models: bool = False) -> Comparison:
    ma, mb = _models(a), _models(b)
    if not allow_different_models:
        for side, models in (("A", ma), ("B", mb)):
            if len(models) > 1:
                raise ReportError(f"{side} holds starts of {len(models)} models ({', '.join(models)}); "
                                  "pass --allow-different-models to compare anyway")
        if ma != mb:
            raise ReportError(f"A and B are starts of different models ({ma[0]} vs {mb[0]}); "
                              "pass --allow-different-models to compare anyway")
    ta, ca = _side_values(a)
    tb, cb = _side_values(b)
    order = _tree_order([a[0], b[0]])
    rows = []
    for key, (at, depth, name) in order.items():
        rows.append(Row(key, name, depth, at,
                        statistics.median(ta[key]) if key in ta else None,
                        statistics.median(tb[key]) if key in tb else None,
                        _majority(ca.get(key, [])), _majority(cb.get(key, []))))
    rows.sort(key=lambda r: r.order)
    start_changes = []
    modes_a = Counter(st.root.attrs.get(sc.MODE) for st in a)
    modes_b = Counter(st.root.attrs.get(sc.MODE) for st in b)
    if modes_a.most_common(1)[0][0] != modes_b.most_common(1)[0][0]:
        start_changes.append(f"cache root {modes_a.most_common(1)[0][0]} → {modes_b.most_common(1)[0][0]}")
    start_changes += _compile_key_changes(a, b)
    model = ma[0] if ma == mb and len(ma) == 1 else ", ".join(sorted(set(ma + mb)))
    return Comparison(a_label, b_label, len(a), len(b), model, rows, start_changes)


def _compile_key_changes(a: list[Start], b: list[Start]) -> list[str]:
    """The compile-cache key of each side's first start that has one, and the factors that differ."""
    ka = next((k for st in a if (k := cf.key_info(st.spans)) is not None), None)
    kb = next((k for st in b if (k := cf.key_info(st.spans)) is not None), None)
    if ka is None or kb is None or ka.key == kb.key:
        return []
    diff = cf.key_diff(ka, kb)
    return [f"compile cache key {ka.key} → {kb.key}: {cf.describe(diff)} changed; pin: {cf.pin_hint(diff)}"]


def _tree_order(starts: list[Start]) -> dict[tuple[str, str], tuple[float, int, str]]:
    """Rows in depth-first tree order of the first start (children by start time); a phase only the other
    start has goes right after the nearest ancestor phase both share."""
    order: dict[tuple[str, str], tuple[float, int, str]] = {}
    counter = [0.0]
    for n, st in enumerate(starts):

        def walk(s: Span, depth: int, anchor: float, n: int = n) -> None:
            key = (kind_of(s), phase_of(s))
            if key[1] and key not in order:
                counter[0] += 1
                order[key] = ((counter[0] if n == 0 else anchor + counter[0] * 1e-4), depth, s.name)
            here = order.get(key, (anchor, 0, ""))[0]
            for c in s.children:
                walk(c, depth + 1, here)

        walk(st.root, 0, 0.0)
    return order


def shown_rows(cmp: Comparison, min_share: float = 0.005) -> list[Row]:
    total = max((r.a or 0) for r in cmp.rows if r.key[1] == "startup") if cmp.rows else 0
    floor = max(0.05, min_share * total)
    return [r for r in cmp.rows if max(r.a or 0, r.b or 0) >= floor or abs(r.delta) >= floor or r.changes()]


def headlines(cmp: Comparison) -> list[str]:
    """Changed causes with the time they moved, biggest first."""
    out = []
    for r in sorted(cmp.rows, key=lambda r: -abs(r.delta)):
        if r.changes():
            out.append(f"{r.name} [{KIND_LABEL.get(r.key[0], r.key[0])}]: {', '.join(r.changes())}, "
                       f"{_signed(r.delta)}")
    total = next((r for r in cmp.rows if r.key[1] == "startup"), None)
    for change in cmp.start_changes:
        out.append(f"start: {change}" + (f", {_signed(total.delta)} in total" if total else ""))
    return out
