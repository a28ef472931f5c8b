"""The truth measure of a start: how much of spawn -> ready is explained on the critical path.

At each instant the innermost live process is the one doing the work (the API server waits on its
EngineCore, the EngineCore on its workers); the instant is explained when a non-waiting leaf span of that
process covers it (a leaf: no child span in the same process). A waiting span explains nothing while the
child it waits for works, and a parent's self time is never counted as explained. One exception, the other way
round: where the innermost process runs no span of its own (a worker idle between its startup calls) while an
outer process collects garbage or imports a module (a detail span: interpreter work, never a phase that waits on
the child), or runs a leaf span that overlaps no span of a process inside it (the executor's handshake with its
idle workers: its own work, not a wait on theirs), that is the work of the instant; and where a worker runs no span
of its own while another worker of its EngineCore runs a leaf span (the executor's collective call waits for every
rank), that rank's work is. What is not covered is named: the process, and the span that ended right before the
gap.

Stdlib only: the printed-at-ready summary uses it inside the server process.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.model.facts import Lane, lanes, phase_of
from vllm_otel_startup.model.facts import leaves as leaf_spans
from vllm_otel_startup.model.intervals import covers, merge, overlaps
from vllm_otel_startup.model.spanmodel import Span


@dataclass
class Gap:
    lane: str  # the process's label, e.g. "worker 0 (pid 123)"
    kind: str
    start_s: float  # offset from the root's start
    seconds: float
    after: str | None  # the leaf span of that process that ended right before the gap


@dataclass
class Straggler:
    """Of several processes of one kind (data-parallel EngineCores, API servers, workers), the one ready last: the
    start waits for it."""

    lane: str  # e.g. "EngineCore 1 (pid 123)"
    of: int  # how many processes of its kind
    trail_s: float  # how long after the next slowest it was ready
    next_lane: str

    def text(self) -> str:
        return (f"slowest of {self.of}: {self.lane.split(' (pid')[0]} was ready {self.trail_s:.2f} s after "
                f"{self.next_lane.split(' (pid')[0]}")


@dataclass
class RankWait:
    """Of one EngineCore's workers (tensor / pipeline parallel ranks), the rank that finished a phase last: the
    executor's collective call returns only then, so every other rank waited for it."""

    phase: str  # the span name, e.g. "Allocate KV cache"
    phase_id: str  # its phase, e.g. "kv_cache_allocate"
    lane: str  # the rank that finished last, e.g. "worker 1 (pid 123)"
    of: int  # how many ranks ran it
    waited_s: float  # its end minus the first rank's end (a barrier: its start minus the first rank's start)
    slowest_s: float  # the phase's duration on that rank (a barrier: the shortest, it waited for no one)
    fastest_s: float  # and on the quickest rank (a barrier: the longest, the rank that waited most)
    arrived_last: bool = False  # a barrier (BARRIER_PHASES): ``lane`` began it last; the others waited inside it

    def text(self) -> str:
        who = self.lane.split(" (pid")[0]
        if self.arrived_last:
            return (f"ranks: {self.phase} waited for {who}, the last of {self.of} to arrive, {self.waited_s:.2f} s "
                    f"after the first (a barrier: it took {self.slowest_s:.2f} s on {who}, up to "
                    f"{self.fastest_s:.2f} s on the ranks that waited)")
        return (f"ranks: {self.phase} ended last on {who} of {self.of}, "
                f"{self.waited_s:.2f} s after the first (took {self.slowest_s:.2f} s; the quickest rank "
                f"{self.fastest_s:.2f} s)")


@dataclass
class CriticalPath:
    total_s: float
    unexplained_s: float
    gaps: list[Gap] = field(default_factory=list)  # largest first
    stragglers: list[Straggler] = field(default_factory=list)  # one per kind with several processes
    rank_waits: list[RankWait] = field(default_factory=list)  # longest wait first, >= RANK_WAIT_MIN_S

    @property
    def share(self) -> float:
        return 1.0 - self.unexplained_s / self.total_s if self.total_s > 0 else 1.0

    def headline(self, top: int = 3) -> str:
        text = f"critical path: {100 * self.share:.1f}% of {self.total_s:.2f} s explained"
        named = [g for g in self.gaps[:top] if g.seconds >= 0.05]
        if named:
            text += "; not covered: " + ", ".join(
                f"{g.seconds:.2f} s in {g.lane.split(' (pid')[0]}" + (f" after '{g.after}'" if g.after else "")
                for g in named)
        return text


KIND_DEPTH = {"api_server": 0, "engine_core": 1, "worker": 2}


def analyse(root: Span, spans: list[Span], ls: list[Lane] | None = None) -> CriticalPath:
    """The critical-path coverage of a linked start (``Start.critical_path``), its processes given or found."""
    ls = ls if ls is not None else lanes(root, spans)
    by_id = {s.span_id: s for s in spans}
    lane_of = {ln.span.span_id: ln for ln in ls}
    owner_of = _owners(ls, lane_of, by_id)
    views = _views(ls, lane_of, by_id)
    t0, t1 = root.start, max(root.end, root.start)
    gaps = [Gap(ln.label, ln.kind, (a - t0) / 1e9, (b - a) / 1e9, after)
            for a, b, ln, after in _uncovered(views, _cuts(views, t0, t1), owner_of)]
    gaps.sort(key=lambda g: -g.seconds)
    return CriticalPath((t1 - t0) / 1e9, sum(g.seconds for g in gaps), gaps, stragglers(root, ls, by_id),
                        rank_waits(ls, owner_of))


Intervals = list[tuple[int, int]]
Stretch = tuple[int, int, Lane, str | None]  # start, end, the process, the span of it that ended right before


@dataclass
class _View:
    """One process as the analysis sees it: where it works, where it waits and on whom."""

    ln: Lane
    depth: tuple[int, int]  # (its kind's depth, its process depth in the tree): the deepest live one works
    leaves: list[Span]  # its non-waiting leaf spans
    covered: Intervals  # their time: explained
    ends: list[tuple[int, str]]  # their ends and names, sorted: the span that ended right before a gap
    own: Intervals  # the time any span of its own runs (idle outside it)
    detail: Intervals  # its garbage collections and imports
    on_front: Intervals  # its waits for its front end
    on_peers: Intervals  # its waits for the other processes of its kind
    solo: Intervals = field(default_factory=list)  # its leaves that overlap no span of a deeper process


def _depth(ln: Lane, lane_of: dict[str, Lane], by_id: dict[str, Span]) -> tuple[int, int]:
    """An API server waits on the EngineCores it is a client of, an EngineCore on its workers, whichever process
    spawned them (a launcher spawns API servers and EngineCores side by side): the kind first, then the tree."""
    d, cur, seen = 0, by_id.get(ln.span.parent_id or ""), 0
    while cur is not None and seen < 64:
        if cur.span_id in lane_of and cur is not ln.span:
            d += 1
        cur = by_id.get(cur.parent_id or "")
        seen += 1
    return KIND_DEPTH.get(ln.kind, 0), d


def _views(ls: list[Lane], lane_of: dict[str, Lane], by_id: dict[str, Span]) -> list[_View]:
    """Each process's work, idle time and waits as intervals."""
    views = []
    for ln in ls:
        leaves = [s for s in leaf_spans(ln.spans) if s is not ln.span and s.end > s.start
                  and not s.attrs.get(sc.WAITING)]
        views.append(_View(
            ln, _depth(ln, lane_of, by_id), leaves, merge((s.start, s.end) for s in leaves),
            sorted((s.end, s.name) for s in leaves),
            merge((s.start, s.end) for s in ln.spans if s is not ln.span and s.end > s.start),
            merge((s.start, s.end) for s in leaves if phase_of(s) in sc.DETAIL_PHASES),
            merge((s.start, s.end) for s in ln.spans if phase_of(s) in sc.WAITS_ON_FRONT_END),
            merge((s.start, s.end) for s in ln.spans if phase_of(s) in sc.WAITS_ON_PEERS)))
    # an outer process's own work: its leaves that overlap no span of a deeper process (a leaf around an RPC to its
    # workers overlaps their spans; the executor's handshake with idle workers overlaps none)
    for v in views:
        deeper = merge((s.start, s.end) for x in views if x.depth > v.depth for s in x.ln.spans
                       if s is not x.ln.span and s.end > s.start)
        v.solo = merge((s.start, s.end) for s in v.leaves
                       if phase_of(s) not in sc.DETAIL_PHASES and not overlaps(deeper, s.start, s.end))
    return views


def _cuts(views: list[_View], t0: int, t1: int) -> list[int]:
    """Every instant inside the start where some process's work or waits begin or end, with the start's ends."""
    cuts = {t0, t1}
    for v in views:
        for t in (v.ln.span.start, v.ln.span.end, *(x for ivs in (v.covered, v.own, v.detail, v.solo, v.on_front,
                                                                   v.on_peers) for iv in ivs for x in iv)):
            if t0 < t < t1:
                cuts.add(t)
    return sorted(cuts)


def _uncovered(views: list[_View], edges: list[int], owner_of: dict[int, str]) -> list[Stretch]:
    """The stretches between the cuts that no process's work explains, adjacent ones of one process joined."""
    raw: list[Stretch] = []
    for a, b in zip(edges, edges[1:], strict=False):
        mid = (a + b) / 2
        live = [v for v in views if v.ln.span.start <= mid < v.ln.span.end]
        if not live:
            continue
        # of several processes at the deepest depth (data-parallel EngineCores, API servers, tensor-parallel
        # workers) the one that ends last is the one the start waits for: its work is the instant's
        inner = max(v.depth for v in live)
        me = max((v for v in live if v.depth == inner), key=lambda v: v.ln.span.end)
        if covers(me.covered, mid) or _explained_elsewhere(me, live, mid, owner_of):
            continue
        i = bisect.bisect_right(me.ends, (a, "\uffff")) - 1
        after = me.ends[i][1] if i >= 0 else None
        if raw and raw[-1][1] == a and raw[-1][2] is me.ln:
            raw[-1] = (raw[-1][0], b, me.ln, raw[-1][3])
        else:
            raw.append((a, b, me.ln, after))
    return raw


def _explained_elsewhere(me: _View, live: list[_View], mid: float, owner_of: dict[int, str]) -> bool:
    """Whether another live process's work is the instant's while ``me``, the innermost, runs no leaf of its own."""
    idle = not covers(me.own, mid)
    # an outer process collects garbage, imports, or works on its own while the innermost one idles
    if idle and any(covers(v.detail, mid) or covers(v.solo, mid) for v in live if v.depth < me.depth):
        return True
    # a worker with no span of its own open waits for the executor's next call, which waits for every rank of
    # its EngineCore (collective RPCs): a busy peer rank's work is the instant's (the straggler's time)
    if idle and me.ln.kind == "worker" and any(
            covers(v.covered, mid) for v in live if v.depth == me.depth and v is not me and v.ln.kind == "worker"
            and owner_of[id(v.ln)] == owner_of[id(me.ln)]):
        return True
    # waiting for its peers (the DP rendezvous): a peer's work is the instant's; for its front end (the
    # EngineCore's handshake): the front-end processes' work is
    if covers(me.on_peers, mid) and any(covers(v.covered, mid) for v in live if v.depth == me.depth and v is not me):
        return True
    return covers(me.on_front, mid) and any(covers(v.covered, mid) for v in live if v.depth[0] < me.depth[0])


RANK_WAIT_MIN_S = 0.05
# collectives every rank of a group enters and leaves together (torch.distributed's process group and vLLM's
# model-parallel groups, NCCL's communicator set-up): the rank that entered last held up the others inside it
BARRIER_PHASES = frozenset({"process_group_init", "model_parallel_init"})


def rank_waits_of(root: Span, spans: list[Span]) -> list[RankWait]:
    """A start's rank waits alone (the metrics' view): its processes, without the whole critical-path analysis."""
    ls = lanes(root, spans)
    return rank_waits(ls, _owners(ls, {ln.span.span_id: ln for ln in ls}, {s.span_id: s for s in spans}))


def rank_waits(ls: list[Lane], owner_of: dict[int, str]) -> list[RankWait]:
    """For each leaf phase every worker of one EngineCore ran once (not a detail span), the rank that ended it last
    and how long after the first: where ranks waited at the executor's next collective call."""
    groups: dict[str, list[Lane]] = {}
    for ln in ls:
        if ln.kind == "worker":
            groups.setdefault(owner_of[id(ln)], []).append(ln)
    out: list[RankWait] = []
    for ranks in groups.values():
        if len(ranks) < 2:
            continue
        per_rank: list[dict[str, Span]] = []
        for ln in ranks:
            seen: dict[str, list[Span]] = {}
            mine = [s for s in ln.spans if s is not ln.span and phase_of(s) not in sc.DETAIL_PHASES]
            parents = {s.parent_id for s in mine}
            for s in mine:  # the leaves: a parent ends when its last child does, and would repeat its wait
                if s.span_id not in parents and s.end > s.start:
                    seen.setdefault(s.name, []).append(s)
            per_rank.append({name: ss[0] for name, ss in seen.items() if len(ss) == 1})
        common = set.intersection(*(set(d) for d in per_rank))
        for name in common:
            phase = phase_of(per_rank[0][name]) or ""
            barrier = phase in BARRIER_PHASES  # every rank leaves together: who came last is told by the starts
            ends = sorted(((d[name].start if barrier else d[name].end, i) for i, d in enumerate(per_rank)))
            waited = (ends[-1][0] - ends[0][0]) / 1e9
            if waited < RANK_WAIT_MIN_S:
                continue
            durs = [d[name].duration for d in per_rank]
            last = ends[-1][1]
            out.append(RankWait(name, phase, ranks[last].label, len(ranks), waited, durs[last],
                                max(durs) if barrier else min(durs), barrier))
    out.sort(key=lambda w: -w.waited_s)
    return out


def _owners(ls: list[Lane], lane_of: dict[str, Lane], by_id: dict[str, Span]) -> dict[int, str]:
    """Each lane (by ``id``) -> the span id of the process that started it (:func:`_owner`)."""
    return {id(ln): _owner(ln, lane_of, by_id) for ln in ls}


def _owner(ln: Lane, lane_of: dict[str, Lane], by_id: dict[str, Span]) -> str:
    """The span id of the process that started ``ln`` (its nearest ancestor that is a process span)."""
    cur, seen = by_id.get(ln.span.parent_id or ""), 0
    while cur is not None and cur.span_id not in lane_of and seen < 64:
        cur, seen = by_id.get(cur.parent_id or ""), seen + 1
    return cur.span_id if cur is not None else ""


def stragglers(root: Span, ls: list[Lane], by_id: dict[str, Span]) -> list[Straggler]:
    """For each kind of process one process started several of (data-parallel EngineCores, API servers, one
    EngineCore's workers), the one ready last and by how much it trailed the next."""
    lane_of = {ln.span.span_id: ln for ln in ls}

    def owner(ln: Lane) -> str:
        return _owner(ln, lane_of, by_id)

    groups: dict[tuple[str, str, str], list[Lane]] = {}
    for ln in ls:
        if ln.span is not root:
            groups.setdefault((ln.kind, phase_of(ln.span), owner(ln)), []).append(ln)
    out = []
    for group in groups.values():
        if len(group) >= 2:
            last, prev = sorted(group, key=lambda ln: ln.span.end)[-1:-3:-1]
            out.append(Straggler(last.label, len(group), (last.span.end - prev.span.end) / 1e9, prev.label))
    return out
