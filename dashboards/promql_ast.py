"""Read PromQL with a real parser (``promql-parser``): which series and labels a query uses, and which labels its
result carries. Used by the vocabulary tests and by queries.py (expected labels)."""

from __future__ import annotations

from dataclasses import dataclass, field

import promql_parser as pp

# Functions whose string arguments name labels: label_replace(v, dst, replacement, src, regex),
# label_join(v, dst, separator, src...).
_LABEL_ARGS = {"label_replace": (1, 3), "label_join": (1, 3, 4, 5, 6, 7, 8, 9)}


@dataclass
class Used:
    """Names a query uses."""

    selectors: list[tuple[str, list[str]]] = field(default_factory=list)  # (series name, matcher label names)
    labels: set[str] = field(default_factory=set)  # grouping, matching and label-function label names
    created: set[str] = field(default_factory=set)  # labels the query itself creates (label_replace dst, ...)
    matchers: list[tuple[str, str, str, str]] = field(default_factory=list)  # (series, label, op, value)

    @property
    def series(self) -> set[str]:
        return {s for s, _ in self.selectors}


def parse(expr: str) -> pp.Expr:
    return pp.parse(expr)


def _children(node) -> list:
    kind = type(node).__name__
    if kind == "BinaryExpr":
        return [node.lhs, node.rhs]
    if kind in ("AggregateExpr", "ParenExpr", "UnaryExpr", "SubqueryExpr"):
        return [node.expr] + ([node.param] if kind == "AggregateExpr" and node.param is not None else [])
    if kind == "MatrixSelector":
        return [node.vector_selector]
    if kind == "Call":
        return list(node.args)
    return []


def used(expr: str) -> Used:
    out = Used()

    def visit(node) -> None:
        kind = type(node).__name__
        if kind == "VectorSelector":
            names = [m.name for m in node.matchers.matchers if m.name != "__name__"]
            series = node.name or next(m.value for m in node.matchers.matchers if m.name == "__name__")
            out.selectors.append((series, names))
            out.matchers += [(series, m.name, str(m.op).split(".")[-1], m.value) for m in node.matchers.matchers]
        elif kind == "AggregateExpr":
            if node.modifier is not None:
                out.labels.update(node.modifier.labels)
            if str(node.op) == "count_values":
                out.created.add(node.param.val)
        elif kind == "BinaryExpr" and node.modifier is not None:
            if node.modifier.matching is not None:
                out.labels.update(node.modifier.matching.labels)
            out.labels.update(node.modifier.group_labels or [])
        elif kind == "Call" and node.func.name in _LABEL_ARGS:
            positions = _LABEL_ARGS[node.func.name]
            names = [a.val for i, a in enumerate(node.args) if i in positions]
            out.created.add(names[0])
            out.labels.update(n for n in names[1:] if n)
        for child in _children(node):
            visit(child)

    visit(parse(expr))
    return out


_SCALAR_FUNCS = {"time", "scalar", "pi"}
_SET_OPS = {"and", "unless"}


def output_labels(expr: str) -> frozenset[str] | None:
    """Labels every series of the result carries (given its inputs carry them), or None when a raw selector's
    labels reach the result (then the query cannot promise a label set)."""
    return _out(parse(expr))


def _out(node) -> frozenset[str] | None:  # noqa: C901 - one case per node kind
    kind = type(node).__name__
    if kind in ("NumberLiteral", "StringLiteral"):
        return frozenset()
    if kind in ("ParenExpr", "UnaryExpr", "SubqueryExpr"):
        return _out(node.expr)
    if kind in ("VectorSelector", "MatrixSelector"):
        return None
    if kind == "AggregateExpr":
        mod = node.modifier
        if mod is not None and str(mod.type).endswith("By"):
            base = frozenset(mod.labels)
        elif mod is None:
            base = frozenset()
        else:
            inner = _out(node.expr)
            base = None if inner is None else inner - set(mod.labels)
        if str(node.op) in ("topk", "bottomk", "limitk", "limit_ratio"):
            return _out(node.expr)
        if str(node.op) == "count_values" and base is not None:
            return base | {node.param.val}
        return base
    if kind == "Call":
        name = node.func.name
        if name in _SCALAR_FUNCS or name == "vector":
            return frozenset()
        if name == "histogram_quantile":
            inner = _out(node.args[1])
            return None if inner is None else inner - {"le"}
        if name in _LABEL_ARGS:
            inner = _out(node.args[0])
            return None if inner is None else inner | {node.args[1].val}
        vectors = [a for a in node.args if type(a).__name__ not in ("NumberLiteral", "StringLiteral")]
        return _out(vectors[0]) if vectors else frozenset()
    if kind == "BinaryExpr":
        lhs, rhs = _out(node.lhs), _out(node.rhs)
        op = str(node.op)
        scalar_l, scalar_r = _is_scalar(node.lhs), _is_scalar(node.rhs)
        if scalar_l or scalar_r:
            return rhs if scalar_l else lhs
        if op in _SET_OPS:
            return lhs
        if op == "or":
            return None if lhs is None or rhs is None else lhs & rhs
        mod = node.modifier
        card = str(mod.card).split(".")[-1] if mod is not None else "OneToOne"
        if card == "ManyToOne":
            return None if lhs is None else lhs | set(mod.group_labels or [])
        if card == "OneToMany":
            return None if rhs is None else rhs | set(mod.group_labels or [])
        if mod is not None and mod.matching is not None and str(mod.matching.type).endswith("Include"):
            return frozenset(mod.matching.labels)  # one-to-one on(...): Prometheus keeps only those
        return lhs
    raise ValueError(f"unhandled PromQL node {kind}")


def _is_scalar(node) -> bool:
    kind = type(node).__name__
    if kind == "NumberLiteral":
        return True
    if kind in ("ParenExpr", "UnaryExpr"):
        return _is_scalar(node.expr)
    if kind == "Call":
        return node.func.name in _SCALAR_FUNCS
    if kind == "BinaryExpr":
        return _is_scalar(node.lhs) and _is_scalar(node.rhs)
    return False
