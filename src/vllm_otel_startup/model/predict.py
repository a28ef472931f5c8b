"""The model behind ``vllm-otel-startup predict`` (cli/predict.py renders it): per-phase linear models fitted on
recorded starts, expected vs actual for a new start, and the phase whose residual is largest.

The idea is the "Breaking the Ice" paper's (one near-linear model per startup step), done on traces: each
start is cut into disjoint phase groups (each moment of the start belongs to at most one group, the most
specific one; what no group covers is "other"), so the groups' times add up to the start's duration and a
residual points at one place. Each group has its own few features, all read from the trace (weight bytes,
cache hits, compile ran, capture sizes, KV bytes); a group's model is ordinary least squares with a tiny
ridge. ``--validate`` measures the error honestly: leave one model out (every start of that model is
predicted by a fit that never saw the model), against a naive baseline (the mean start of its class).
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass

from vllm_otel_startup import phase_groups as pg
from vllm_otel_startup.model.errors import ReportError
from vllm_otel_startup.model.facts import Facts, kind_of, phase_of, seconds
from vllm_otel_startup.model.intervals import merge, minus
from vllm_otel_startup.model.spanmodel import Span
from vllm_otel_startup.model.start import Start

# The features each of phase_groups.PREDICT_GROUPS is fitted on ("other" last: the rest of the start).
FEATURES: dict[str, tuple[str, ...]] = {
    "compile": ("compile_miss", "compile_hit", "miss_x_gb", "hit_x_gb"),
    "cudagraphs": ("capture_sizes", "sizes_x_gb"),
    "weights": ("one", "weights_gb", "download_gb"),
    "model_init": ("one", "weights_gb"),
    "model_inspection": ("one", "modelinfo_miss"),
    "kv_cache": ("one", "kv_gb", "weights_gb"),
    "http": ("one",),
    "bootstrap": ("one", "processes"),
    pg.OTHER_GROUP: ("one", "compiled", "weights_gb"),
}
# (group, phases, features), most specific first: a moment counted by an earlier group is not counted again.
GROUPS: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    (g, phases, FEATURES[g]) for g, phases in pg.PREDICT_GROUPS.items() if g != pg.OTHER_GROUP]
OTHER = (pg.OTHER_GROUP, FEATURES[pg.OTHER_GROUP])
RIDGE = 1e-6
# A least-squares solver: (rows of features, targets) -> coefficients. ``least_squares`` below is the standard
# library's; the command line passes numpy's where numpy is installed (cli/lstsq.py: this layer stays stdlib-only).
Solver = Callable[[list[list[float]], list[float]], list[float]]


def features(f: Facts) -> dict[str, float]:
    gb = (f.weights_bytes or 0) / 1e9
    miss = 1.0 if f.compiled and f.compile_hit is not True else 0.0
    hit = 1.0 if f.compiled and f.compile_hit is True else 0.0
    sizes = float(f.capture_sizes or 0) if f.capture_s else 0.0
    return {
        "one": 1.0, "weights_gb": gb, "download_gb": (f.download_bytes or 0) / 1e9, "compiled": float(f.compiled),
        "compile_miss": miss, "compile_hit": hit, "miss_x_gb": miss * gb, "hit_x_gb": hit * gb,
        "modelinfo_miss": 1.0 if f.modelinfo_hit is False else 0.0, "kv_gb": (f.kv_bytes or 0) / 1e9,
        "capture_sizes": sizes, "sizes_x_gb": sizes * gb, "processes": 2.0 + f.tensor_parallel,
    }


def group_seconds(root: Span, spans: list[Span]) -> dict[str, float]:
    """Disjoint seconds of each group in this start, plus "other" (the rest of the root's duration)."""
    taken: list[tuple[int, int]] = []
    out = {}
    for name, phases, _ in GROUPS:
        iv = merge([(max(s.start, root.start), min(s.end, root.end)) for s in spans
                     if phase_of(s) in phases and s.end > s.start and kind_of(s) != "?"])
        own = minus(iv, taken)
        out[name] = sum(b - a for a, b in own) / 1e9
        taken = merge(taken + own)
    out["other"] = max(root.duration - sum(out.values()), 0.0)
    return out


@dataclass
class Sample:
    source: str
    model: str
    x: dict[str, float]
    y: dict[str, float]  # seconds per group, and "total"


def sample(st: Start) -> Sample:
    y = group_seconds(st.root, st.spans)
    y["total"] = st.root.duration
    return Sample(st.source, st.facts.model, features(st.facts), y)


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        if abs(m[p][c]) < 1e-12:
            continue
        m[c], m[p] = m[p], m[c]
        for r in range(n):
            if r != c and m[r][c]:
                k = m[r][c] / m[c][c]
                m[r] = [x - k * y for x, y in zip(m[r], m[c], strict=True)]
    return [m[i][n] / m[i][i] if abs(m[i][i]) > 1e-12 else 0.0 for i in range(n)]


def least_squares(xs: list[list[float]], ys: list[float], ridge: float = RIDGE) -> list[float]:
    k = len(xs[0]) if xs else 0
    ata = [[sum(r[i] * r[j] for r in xs) + (ridge * len(xs) if i == j else 0.0) for j in range(k)] for i in range(k)]
    aty = [sum(r[i] * y for r, y in zip(xs, ys, strict=True)) for i in range(k)]
    return _solve(ata, aty)


@dataclass
class Model:
    coef: dict[str, list[float]]
    feats: dict[str, tuple[str, ...]]
    rmse: dict[str, float]  # leave-one-model-out error per group (0 when not validated)
    n: int
    seen: dict[str, bool] | None = None  # feature -> some training start had it non-zero

    def unseen(self, g: str, x: dict[str, float]) -> list[str]:
        """Features of this start the group's fit never saw non-zero (its expectation means little)."""
        if self.seen is None:
            return []
        return [f for f in self.feats[g] if x.get(f, 0.0) and not self.seen.get(f, True)]

    def expect(self, x: dict[str, float]) -> dict[str, float]:
        out = {g: max(0.0, sum(c * x.get(name, 0.0) for c, name in zip(self.coef[g], self.feats[g], strict=True)))
               for g in self.coef}
        out["total"] = sum(out.values())
        return out

    def to_json(self) -> str:
        return json.dumps({"version": 1, "n": self.n, "seen": self.seen, "groups": {
            g: {"features": list(self.feats[g]), "coef": self.coef[g], "rmse": self.rmse.get(g, 0.0)}
            for g in self.coef}, "rmse_total": self.rmse.get("total", 0.0)}, indent=1)

    @classmethod
    def from_json(cls, text: str, where: str = "model") -> Model:
        try:
            d = json.loads(text)
            groups = d["groups"]
            return cls({g: [float(c) for c in v["coef"]] for g, v in groups.items()},
                       {g: tuple(v["features"]) for g, v in groups.items()},
                       {**{g: float(v.get("rmse", 0.0)) for g, v in groups.items()},
                        "total": float(d.get("rmse_total", 0.0))}, int(d.get("n", 0)), d.get("seen"))
        except (ValueError, KeyError, TypeError) as exc:
            raise ReportError(f"{where}: not a saved predictor ({exc.__class__.__name__}: {exc})") from None


def _spec() -> list[tuple[str, tuple[str, ...]]]:
    return [(g, feats) for g, _, feats in GROUPS] + [OTHER]


def fit(samples: list[Sample], solve: Solver | None = None) -> Model:
    if len(samples) < 3:
        raise ReportError(f"predict needs at least 3 recorded starts that reached ready, got {len(samples)}")
    coef, feats = {}, {}
    for g, fs in _spec():
        xs = [[s.x[name] for name in fs] for s in samples]
        ys = [s.y.get(g, 0.0) for s in samples]
        coef[g], feats[g] = (solve or least_squares)(xs, ys), fs
    seen = {name: any(s.x.get(name, 0.0) for s in samples) for name in samples[0].x}
    return Model(coef, feats, {}, len(samples), seen)


@dataclass
class Validation:
    groups: list[str]
    rows: list[tuple[Sample, dict[str, float]]]  # each held-out sample with its prediction
    baseline: list[float]  # naive prediction of each row's total

    def errors(self, g: str) -> list[float]:
        return [pred[g] - s.y[g] for s, pred in self.rows]

    def stats(self, errs: list[float], actual: list[float] | None = None) -> dict[str, float]:
        out = {"mae": statistics.fmean(abs(e) for e in errs), "rmse": math.sqrt(statistics.fmean(e * e for e in errs)),
               "max": max(abs(e) for e in errs)}
        if actual:
            out["mape"] = 100 * statistics.fmean(abs(e) / a for e, a in zip(errs, actual, strict=True) if a)
        return out


def _class(s: Sample) -> tuple[float, float]:
    return (s.x["compiled"], s.x["modelinfo_miss"])


def validate(samples: list[Sample], solve: Solver | None = None) -> Validation:
    """Leave one model out: each model's starts are predicted by a fit on the other models' starts."""
    models = sorted({s.model for s in samples})
    if len(models) < 3:
        raise ReportError(f"validation needs starts of at least 3 models, got {len(models)}")
    rows, base = [], []
    for m in models:
        train = [s for s in samples if s.model != m]
        model = fit(train, solve)
        for s in (s for s in samples if s.model == m):
            rows.append((s, model.expect(s.x)))
            same = [t.y["total"] for t in train if _class(t) == _class(s)] or [t.y["total"] for t in train]
            base.append(statistics.fmean(same))
    return Validation([g for g, _ in _spec()], rows, base)


def fit_validated(samples: list[Sample], solve: Solver | None = None) -> tuple[Model, Validation | None]:
    model = fit(samples, solve)
    try:
        v = validate(samples, solve)
    except ReportError:
        return model, None
    model.rmse = {g: v.stats(v.errors(g))["rmse"] for g in v.groups}
    model.rmse["total"] = v.stats(v.errors("total"))["rmse"]
    return model, v


def explanation(model: Model, s: Sample) -> tuple[list[dict], dict | None, list[str]]:
    """Per group (then the total): expected, actual, residual, typical error, whether the corpus saw such a start;
    the group whose residual is largest with its verdict; notes."""
    exp = model.expect(s.x)
    rows, notes = [], []
    worst, worst_res = None, 0.0
    for g in [g for g, _ in _spec()] + ["total"]:
        res = s.y.get(g, 0.0) - exp[g]
        unseen = model.unseen(g, s.x) if g != "total" else []
        rows.append({"group": g, "expected_s": exp[g], "actual_s": s.y.get(g, 0.0), "residual_s": res,
                     "typical_error_s": model.rmse.get(g, 0.0), "in_corpus": not unseen})
        if unseen:
            notes.append(f"{g}: the corpus has no start with {', '.join(unseen)}: its expectation is not a prediction")
        if g != "total" and abs(res) > abs(worst_res):
            worst, worst_res = g, res
    largest = None
    if worst is not None:
        rmse = model.rmse.get(worst, 0.0)
        if model.unseen(worst, s.x):
            verdict, look = "(outside the corpus: record starts like this one to predict it)", False
        elif abs(worst_res) > 2 * rmse + 0.5:
            verdict, look = (f"({abs(worst_res) / rmse:.1f}x its typical error: look there)" if rmse else
                             "(beyond the fit: look there)"), True
        else:
            verdict, look = f"(within 2x its typical error ±{seconds(rmse)}: nothing unusual)", False
        largest = {"group": worst, "residual_s": worst_res, "look_there": look, "verdict": verdict}
    return rows, largest, notes
