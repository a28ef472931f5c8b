"""The docs hold together: every page docs/README.md lists exists and every user page is listed; no user page is over
600 lines (the lab notebook, docs/lab/, aside); every relative link of docs/ (lab included), README.md,
CONTRIBUTING.md and the dashboards/ and deploy/ READMEs lands on a file that exists and, where it names an #anchor, on
a heading of that file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs"
MAX_LINES = 600
# the user pages, the lab notebook, and the READMEs a reader starts from
LINKING = sorted(DOCS.rglob("*.md")) + [ROOT / name for name in ("README.md", "CONTRIBUTING.md", "dashboards/README.md",
                                                                  "deploy/README.md")]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^ {0,3}(```|~~~)")


def prose(text: str) -> str:
    """The text as rendered prose: fenced code blocks and inline code spans blanked (no links, no headings there)."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            out.append("")
            continue
        out.append("" if fenced else re.sub(r"`[^`]*`", "``", line))
    return "\n".join(out)


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: its text (link targets and markup out), lowercased, every character but letters,
    digits, '-', '_' and spaces dropped, spaces to '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor a rendered page has: one per heading (a repeated one gets -1, -2, ... as GitHub numbers them),
    plus explicit <a id/name> targets."""
    text = path.read_text()
    seen: dict[str, int] = {}
    out = set(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", text))
    heading = re.compile(r" {0,3}#{1,6}\s+(.*?)\s*#*\s*$")
    for line, raw in zip(prose(text).split("\n"), text.splitlines(), strict=True):
        if not heading.match(line):  # a heading of the rendered page, not a comment in a code block
            continue
        base = anchor(heading.match(raw).group(1))  # its own text, inline code included (prose() blanked it)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def relative_links(path: Path) -> list[str]:
    targets = LINK.findall(prose(path.read_text()))
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t, re.I)]  # http:, https:, mailto:, ...


def test_the_anchor_rule_is_githubs():
    assert anchor("Sampling: a start is one whole trace") == "sampling-a-start-is-one-whole-trace"
    assert anchor("Recording rules (`recording.py`, `mixin/prometheus_rules.yaml`)") == \
        "recording-rules-recordingpy-mixinprometheus_rulesyaml"
    assert anchor("What each vLLM version produces") == "what-each-vllm-version-produces"
    assert anchor("VllmStartupSlow") == "vllmstartupslow"


def test_every_page_the_index_lists_exists_and_every_user_page_is_listed():
    index = DOCS / "README.md"
    listed = {(DOCS / t.split("#")[0]).resolve() for t in relative_links(index)}
    assert all(p.exists() for p in listed), sorted(str(p) for p in listed if not p.exists())
    pages = {p.resolve() for p in DOCS.glob("*.md")} - {index.resolve()}
    assert pages <= listed, sorted(p.name for p in pages - listed)


def test_no_user_page_is_over_600_lines():
    long = {str(p.relative_to(ROOT)): n for p in DOCS.rglob("*.md")
            if DOCS / "lab" not in p.parents and (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}, f"split these pages: {long}"


@pytest.mark.parametrize("page", LINKING, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_lands(page: Path):
    broken = []
    for target in relative_links(page):
        path, _, frag = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif frag and dest.suffix == ".md" and frag.lower() not in anchors(dest):
            broken.append(f"{target}: no such heading")
    assert broken == [], broken


def test_the_current_figures_stay_one_short_table_per_topic():
    """docs/results.md holds today's figures only (the dated notebook is docs/lab/): 150 lines at most."""
    assert len((DOCS / "results.md").read_text().splitlines()) <= 150
