"""The wait-causes benchmark (issue 58): each voluntary switch of a vLLM process's main thread, from `perf script`'s
sched_switch records with their kernel call chains, named by what it slept in. The text below is perf's own format
(`perf script -F comm,pid,tid,time,trace,ip,sym,dso`), cut from a real recording of a start on the development VM."""

from __future__ import annotations

import json
import textwrap
from collections import Counter

import pytest

from benchmarks import wait_causes


def event(comm: str, pid: int, tid: int, state: str, *frames: str) -> str:
    head = (f"{comm:>15} {pid}/{tid}  60503.326000: prev_comm={comm} prev_pid={tid} prev_prio=120 "
            f"prev_state={state} ==> next_comm=swapper/0 next_pid=0 next_prio=120")
    body = [f"\t{0xffffffff82248208 + i:x} {f} ([kernel.kallsyms])" for i, f in enumerate(frames)]
    return "\n".join([head, *body, "\t           ee137 read (/usr/lib/x86_64-linux-gnu/libc.so.6)", ""]) + "\n"


def wake(comm: str, pid: int, tid: int, target: int, target_comm: str = "vllm") -> str:
    """A sched_waking record (sched_wakeup has the same fields): ``comm`` (thread ``tid`` of ``pid``) wakes thread
    ``target``."""
    return (f"{comm:>15} {pid}/{tid}  60503.327000: comm={target_comm} pid={target} prio=120 target_cpu=001\n"
            "\tffffffff813b4dc5 ttwu_do_activate ([kernel.kallsyms])\n\n")


DISK = ("__schedule", "schedule", "io_schedule", "folio_wait_bit_common", "filemap_get_pages", "vfs_read")
DIR = ("__schedule", "schedule", "io_schedule", "bit_wait_io", "__wait_on_bit", "ext4_readdir", "iterate_dir")
GIL = ("__schedule", "schedule", "futex_wait_queue", "__futex_wait", "futex_wait", "do_futex", "__x64_sys_futex")
PIPE = ("__schedule", "schedule", "anon_pipe_read", "vfs_read", "ksys_read")
VFORK = ("__schedule", "schedule", "schedule_timeout", "__wait_for_common", "kernel_clone")
NAP = ("__schedule", "schedule", "do_nanosleep", "hrtimer_nanosleep")
ODD = ("__schedule", "schedule", "rwsem_down_write_slowpath", "down_write_killable", "__vm_munmap")


def test_each_switch_is_named_by_the_kernel_path_it_slept_in():
    assert wait_causes.cause(list(DISK)) == "disk" and wait_causes.cause(list(DIR)) == "disk"
    assert wait_causes.cause(list(GIL)) == "futex"
    assert wait_causes.cause(list(PIPE)) == "pipe/socket"
    assert wait_causes.cause(list(VFORK)) == "child"
    assert wait_causes.cause(list(NAP)) == "sleep"
    assert wait_causes.cause(list(ODD)) == "other: rwsem_down_write_slowpath"  # the first frame past the scheduler
    assert wait_causes.cause([]) == "other"


def test_only_main_threads_that_chose_to_wait_count():
    text = (event("vllm", 100, 100, "S", *GIL)  # the API server's main thread waits for the GIL
            + event("vllm", 100, 100, "R+", "__schedule", "preempt_schedule")  # preempted: not a wait
            + event("vos-sampler", 100, 104, "S", *NAP)  # a thread of ours: not the main thread
            + event("vllm", 100, 100, "D", *DISK))
    assert sorted((pid, why) for pid, _, why in wait_causes.switches(text.splitlines(keepends=True))) == \
        [(100, "disk"), (100, "futex")]


def test_processes_are_named_by_their_names_at_ready_when_the_recording_says_so():
    """perf names a process by what it was called when it switched: an EngineCore that renamed itself late is still
    `python` there, so the tree read at ready decides (else perf's last name for it)."""
    text = (event("vllm", 100, 100, "S", *GIL) + event("python", 200, 200, "S", *DISK)
            + event("python", 200, 200, "S", *GIL) + event("VLLM::Worker", 300, 300, "S", *PIPE)
            + event("victoria-metric", 400, 400, "S", *GIL))  # a backend beside the start: not counted
    lines = text.splitlines(keepends=True)
    by_tree = wait_causes.per_process(lines, 100, {100: "vllm", 200: "VLLM::EngineCor", 300: "VLLM::Worker"})
    assert by_tree == {"API server": Counter(futex=1), "EngineCore": Counter(disk=1, futex=1),
                       "worker": Counter({"pipe/socket": 1})}
    by_perf = wait_causes.per_process(lines)  # no tree: the process named vllm is the API server
    assert by_perf == {"API server": Counter(futex=1), "worker": Counter({"pipe/socket": 1})}


def test_read_prints_the_median_of_each_cause_per_process_and_arm(tmp_path, capsys):
    for i, n in enumerate((2, 4)):
        f = tmp_path / f"a{i}.txt"
        f.write_text(event("vllm", 100, 100, "S", *GIL) * n + event("vllm", 100, 100, "D", *DISK) * 10)
        (tmp_path / f"a{i}.json").write_text(json.dumps({"pid": 100, "procs": {"100": "vllm"}}))
    (tmp_path / "p.txt").write_text(event("vllm", 7, 7, "S", *GIL) + event("vllm", 7, 7, "D", *DISK) * 30)
    out = tmp_path / "w.json"
    assert wait_causes.main(["read", f"instr={tmp_path / 'a0.txt'}", f"instr={tmp_path / 'a1.txt'}",
                             f"plain={tmp_path / 'p.txt'}", "--out", str(out)]) == 0
    rows = {tuple(line.split()[:3]): line.split()[3:] for line in capsys.readouterr().out.splitlines()[1:]}
    assert rows[("API", "server", "instr")] == ["2", "13", "3", "10", "0", "0", "0", "0"]
    assert rows[("API", "server", "plain")] == ["1", "31", "1", "30", "0", "0", "0", "0"]
    assert json.loads(out.read_text())["instr"][1] == {"API server": {"futex": 4, "disk": 10}}


def test_bad_input_says_what_is_wanted(tmp_path):
    with pytest.raises(SystemExit, match="ARM=FILE"):
        wait_causes.main(["read", str(tmp_path / "missing.txt")])
    with pytest.raises(SystemExit, match="one or more"):
        wait_causes.main(["cpu", "--rounds", "0"])


def test_a_real_perf_header_parses():
    line = textwrap.dedent("""\
        VLLM::EngineCor 11970/11970 60510.101010: prev_comm=VLLM::EngineCor prev_pid=11970 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
        \tffffffff82248208 __schedule ([kernel.kallsyms])
        \tffffffff82248b73 futex_wait_queue ([kernel.kallsyms])

        """)  # noqa: E501 - perf's line as it is
    assert list(wait_causes.switches(line.splitlines(keepends=True))) == [(11970, "VLLM::EngineCor", "futex")]


def test_each_futex_wait_is_named_by_the_thread_that_woke_it():
    """The waker held the GIL the main thread wanted: a thread of ours by its OS-level name, a Python thread the OS
    names as its process, none where no wake-up was recorded; only futex waits are attributed."""
    text = (event("vllm", 100, 100, "S", *GIL) + wake("vos-sampler", 100, 104, 100)
            + event("vllm", 100, 100, "S", *GIL) + wake("vllm", 100, 101, 100)  # an unnamed Python thread
            + event("vllm", 100, 100, "D", *DISK) + wake("kworker/0:1", 9, 9, 100)  # I/O done: not a futex wait
            + event("vllm", 100, 100, "S", *GIL) + event("vllm", 100, 100, "S", *GIL)  # the first's wake-up unseen
            + wake("ZMQbg/IO/0", 100, 107, 100)
            + event("vllm", 100, 100, "S", *GIL))  # the recording ends while it waits
    counts = wait_causes.per_process(text.splitlines(keepends=True), 100, {100: "vllm"})["API server"]
    assert counts == Counter({"futex": 5, "disk": 1, "by:vos-sampler": 1, "by:unnamed": 1, "by:ZMQbg/IO/0": 1,
                              "by:no wake-up": 2})
    arms = {"instr": [{"API server": counts}]}
    assert wait_causes.table(arms).splitlines()[1].split()[4] == "6"  # all waits: the waker keys not counted again
    rows = wait_causes.waker_table(arms).splitlines()
    assert rows[0].split()[6:] == ["no", "wake-up", "vos-sampler", "unnamed", "ZMQbg/IO/0", "rest"]
    assert rows[1].split() == ["instr", "2", "1", "1", "1", "0"]


def test_a_recording_without_wake_ups_names_no_waker():
    text = event("vllm", 100, 100, "S", *GIL) + event("vllm", 100, 100, "S", *GIL)
    counts = wait_causes.per_process(text.splitlines(keepends=True), 100, {100: "vllm"})
    assert counts == {"API server": Counter(futex=2)}
    assert wait_causes.waker_table({"plain": [counts]}) == ""


def test_a_waker_alive_at_ready_is_named_by_its_python_name():
    """The OS names a Python thread as its process; py-spy's dump at ready (recorded beside the text) names it."""
    line = 'Thread 6047 (idle): "OtelBatchSpanRecordProcessor"'  # py-spy 0.4's dump
    m = wait_causes.THREAD.match(line)
    assert m is not None and (m["tid"], m["name"]) == ("6047", "OtelBatchSpanRecordProcessor")
    names = {101: "OtelBatchSpanRecordProcessor", 102: "Thread-3 (_run)", 104: "vllm-otel-startup-sampler"}
    assert wait_causes.waker_name("vllm", 101, "vllm", names) == "otel-span-export"
    assert wait_causes.waker_name("vllm", 102, "vllm", names) == "Thread-3 (_run)"
    assert wait_causes.waker_name("vos-sampler", 104, "vllm", names) == "vos-sampler"  # ours: the OS name
    assert wait_causes.waker_name("vllm", 103, "vllm", names) == "unnamed"  # gone by ready


def test_read_takes_the_thread_names_recorded_beside_the_text(tmp_path, capsys):
    f = tmp_path / "a.txt"
    f.write_text(event("vllm", 100, 100, "S", *GIL) + wake("vllm", 100, 101, 100))
    (tmp_path / "a.json").write_text(json.dumps({"pid": 100, "procs": {"100": "vllm"},
                                                 "threads": {"101": "OtelPeriodicExportingMetricReader"}}))
    assert wait_causes.main(["read", f"instr={f}"]) == 0
    assert "otel-metric-read" in capsys.readouterr().out
