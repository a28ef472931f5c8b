"""``vllm-otel-startup predict`` as text: the leave-one-model-out validation table and one start's expected vs
actual per phase group (the fitting and the numbers: model/predict.py)."""

from __future__ import annotations

import argparse
import statistics

from vllm_otel_startup import settings
from vllm_otel_startup.cli import sources
from vllm_otel_startup.cli.output import to_stderr, warn
from vllm_otel_startup.model import predict
from vllm_otel_startup.model.errors import ReportError
from vllm_otel_startup.model.facts import seconds
from vllm_otel_startup.model.formatting import signed_seconds as _signed
from vllm_otel_startup.model.predict import Model, Sample, Validation, explanation


def validation_table(v: Validation) -> str:
    n_models = len({s.model for s, _ in v.rows})
    lines = [f"leave-one-model-out validation: {len(v.rows)} starts of {n_models} models, each predicted by a fit "
             "that never saw its model", "",
             f"{'group':<18} {'mean actual':>12} {'MAE':>9} {'RMSE':>9} {'max err':>9}"]
    for g in [*v.groups, "total"]:
        st = v.stats(v.errors(g))
        mean = statistics.fmean(s.y[g] for s, _ in v.rows)
        lines.append(f"{g:<18} {seconds(mean):>12} {seconds(st['mae']):>9} {seconds(st['rmse']):>9} "
                     f"{seconds(st['max']):>9}")
    tot = v.stats(v.errors("total"), [s.y["total"] for s, _ in v.rows])
    b = v.stats([p - s.y["total"] for (s, _), p in zip(v.rows, v.baseline, strict=True)],
                [s.y["total"] for s, _ in v.rows])
    lines += ["", f"total: mean absolute error {seconds(tot['mae'])} ({tot['mape']:.1f} %), max {seconds(tot['max'])}; "
              f"naive baseline (mean start of its class: compiled x modelinfo miss) {seconds(b['mae'])} "
              f"({b['mape']:.1f} %), max {seconds(b['max'])}"]
    return "\n".join(lines)


def explain(model: Model, s: Sample) -> str:
    """Expected vs actual per group for one start, and the group whose residual is largest."""
    rows, largest, notes = explanation(model, s)
    lines = [f"{'group':<18} {'expected':>10} {'actual':>10} {'residual':>10} {'typical error':>14}"]
    for r in rows:
        rmse = r["typical_error_s"]
        lines.append(f"{r['group']:<18} {seconds(r['expected_s']):>10} {seconds(r['actual_s']):>10} "
                     f"{_signed(r['residual_s']):>10} {('±' + seconds(rmse)) if rmse else '':>14}"
                     + ("" if r["in_corpus"] else "  (no such start in the corpus)"))
    if largest is not None:
        lines.append("")
        lines.append(f"largest residual: {largest['group']} {_signed(largest['residual_s'])} {largest['verdict']}")
    lines += [f"note: {n}" for n in notes]
    return "\n".join(lines)


def run(args: argparse.Namespace, tempo: str | None) -> int:
    """The command: fit (or load) the model, then --validate's table or one start's expected vs actual."""
    corpus = args.corpus or [settings.start_dir()]
    if args.json and args.validate:
        raise ReportError("--json is for a start's prediction, not --validate (its table)")
    say = to_stderr if args.json else print  # stdout holds only the document
    if args.model:
        try:
            with open(args.model, encoding="utf-8") as fh:
                model = predict.Model.from_json(fh.read(), args.model)
        except OSError as exc:
            raise ReportError(f"{args.model}: cannot read ({exc.strerror})") from None
        validation = None
    else:
        starts = sources.many(corpus, ready_only=True, warn=warn)
        from vllm_otel_startup.cli.lstsq import solver

        model, validation = predict.fit_validated([predict.sample(s) for s in starts], solver())
        say(f"fitted on {model.n} starts from {' '.join(corpus)}")
    if args.save:
        try:
            with open(args.save, "w", encoding="utf-8") as fh:
                fh.write(model.to_json())
        except OSError as exc:
            raise ReportError(f"{args.save}: cannot write ({exc.strerror})") from None
        say(f"saved: {args.save}")
    if args.validate:
        if validation is None:
            raise ReportError("--validate needs a corpus (not --model) with starts of at least 3 models")
        print(validation_table(validation))
        return 0
    st = sources.one(args.source, tempo_url=tempo, jaeger_url=getattr(args, "jaeger", None))
    if not st.ready:
        raise ReportError(f"{st.source}: the start did not reach ready; nothing to predict")
    if args.json:
        from vllm_otel_startup.cli import json_out

        rows, largest, notes = predict.explanation(model, predict.sample(st))
        print(json_out.dumps(json_out.predict(st, rows, largest, notes, model.n)))
        return 0
    print(f"start {st.trace_id}: {st.source}")
    print(explain(model, predict.sample(st)))
    return 0
