"""agent/causes/base.py: what a probe sees of a patched call, the do-nothing probe base, and the helpers the
families share: the file system a path lives on, throughput over exactly the duration a span will carry."""

from __future__ import annotations

from vllm_otel_startup.agent.causes.base import Call, Probe, _file_size, filesystem_of, gb_per_s
from vllm_otel_startup.agent.foundation.span_store import END_TIMES


def test_a_calls_argument_is_found_by_keyword_then_position_else_none():
    call = Call(instance=None, args=("a", "b"), kwargs={"path": "/m"}, result=None)
    assert call.arg(0, "path") == "/m"  # keyword first
    assert call.arg(1, "other") == "b" and call.arg(5, "absent") is None


def test_the_base_probes_hooks_do_nothing():
    p = Probe()
    assert (p.name, p.names, p.phase) == (None, (), None)
    assert p.after_call(None, None, Call(None, (), {}, None)) is None
    assert p.on_start(None, None) is None and p.on_ending(None, None) is None and p.uninstall() is None


def test_the_file_system_is_the_longest_mount_point_holding_the_real_path(tmp_path):
    with open("/proc/self/mounts") as f:
        mounts = {line.split()[1]: line.split()[2] for line in f}
    assert filesystem_of("/") == mounts["/"]
    if "/proc" in mounts:
        assert filesystem_of("/proc/self/status") == mounts["/proc"] == "proc"
    link = tmp_path / "to-proc"
    link.symlink_to("/proc")
    assert filesystem_of(str(link / "self")) == filesystem_of("/proc/self")


class _Span:  # a span's start time, weakly referable as the SDK's spans are (the end-time slot is weak)
    def __init__(self, start_time: int | None) -> None:
        self.start_time = start_time


def test_throughput_over_the_spans_own_duration_or_none():
    span = _Span(start_time=1_000_000_000)
    END_TIMES.set(span, 3_000_000_000)  # the end it is about to carry: 2 s
    assert gb_per_s(4_000_000_000, span) == 2.0
    assert gb_per_s(0, span) is None and gb_per_s(1, _Span(start_time=None)) is None


def test_a_files_size_or_none(tmp_path):
    (tmp_path / "w").write_bytes(b"x" * 10)
    assert _file_size(tmp_path / "w") == 10
    assert _file_size(tmp_path / "absent") is None and _file_size(None) is None and _file_size(3.5) is None
