"""Regenerate the generated tables of docs/telemetry.md from the code (the code is the source of truth).

    python scripts/gen_docs.py          # rewrite in place
    python scripts/gen_docs.py --check  # exit 1 when the committed doc differs from the code
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from vllm_otel_startup import semconv as sc  # noqa: E402
from vllm_otel_startup import settings  # noqa: E402
from vllm_otel_startup.agent.patch_points import NATIVE_SPANS, PATCH_POINTS, SPAN_PHASES  # noqa: E402

DOC = Path(__file__).resolve().parents[1] / "docs" / "telemetry.md"


def phases_table() -> str:
    names: dict[str, list[str]] = {}
    for name, phase in SPAN_PHASES.items():
        names.setdefault(phase, []).append(name)
    rows = ["| phase | span name(s) | meaning | vLLM >= 0.16 emits it itself |", "|---|---|---|---|"]
    for phase, meaning in sc.PHASES.items():
        spans = names.get(phase, [])
        native = [n for n in spans if n in NATIVE_SPANS]
        rows.append(f"| `{phase}` | {', '.join(f'`{n}`' for n in spans) or '—'} | {meaning} | "
                    f"{', '.join(native) if native else 'no (ours on every version)'} |")
    return "\n".join(rows)


def patch_table() -> str:
    rows = ["| target | span | phase | process | vLLM versions | hook | vLLM traces it natively since |",
            "|---|---|---|---|---|---|---|"]
    for p in PATCH_POINTS:
        rows.append(f"| `{p.target}` | {f'`{p.span}`' if p.span else '—'} | `{p.phase}` | {p.process} | "
                    f"`{p.versions}` | {p.hook} | {p.native_since or '—'} |")
    return "\n".join(rows)


def metrics_table(metrics: dict, fleet: bool) -> str:
    rows = ["| metric (OTLP) | Prometheus name | instrument | unit | labels | meaning |", "|---|---|---|---|---|---|"]
    for name, (kind, unit, labels, meaning) in metrics.items():
        shown = (["fleet labels"] if fleet else []) + [f"`{sc.prom_label(x)}`" for x in labels]
        rows.append(f"| `{name}` | `{sc.prom_name(name)}` | {kind} | `{unit}` | {', '.join(shown) or '—'} "
                    f"| {meaning} |")
    return "\n".join(rows)


def settings_table() -> str:
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    for s in settings.ALL:
        rows.append(f"| `{s.name}` | {f'`{s.default}`' if s.default else '—'} | "
                    f"{'internal: ' if s.internal else ''}{s.doc} |")
    return "\n".join(rows)


def render(text: str) -> str:
    tables = (("phases", phases_table()), ("patch-points", patch_table()), ("settings", settings_table()),
              ("startup-metrics", metrics_table(sc.STARTUP_METRICS, True)),
              ("resource-metrics", metrics_table(sc.RESOURCE_METRICS, False)),
              ("live-metrics", metrics_table(sc.LIVE_METRICS, True)))
    for name, table in tables:
        start, end = f"<!-- generated:{name} -->", f"<!-- /generated:{name} -->"
        head, rest = text.split(start, 1)
        _, tail = rest.split(end, 1)
        text = f"{head}{start}\n{table}\n{end}{tail}"
    return text


if __name__ == "__main__":
    current = DOC.read_text()
    wanted = render(current)
    if "--check" in sys.argv:
        if wanted != current:
            print("docs/telemetry.md is out of date: run python scripts/gen_docs.py", file=sys.stderr)
            sys.exit(1)
    else:
        DOC.write_text(wanted)
