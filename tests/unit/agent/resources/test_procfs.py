"""The sampler's /proc readings, on real processes and /proc, no stand-ins. The API server's sampler finds the
start's process tree once a second from every thread's children file (a child belongs to the thread that started
it); its own threads' files stay open (one read each instead of open, read, close: each syscall releases the GIL its
importing main thread then takes back), at most ProcFiles.MAX_OPEN of them, and an ended thread's file is closed.
A span's own readings (/proc/self/io, statm) go through one kept descriptor per process."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading

import pytest

from vllm_otel_startup.agent.resources import procfs
from vllm_otel_startup.agent.resources.procfs import OwnFile, ProcFiles
from vllm_otel_startup.agent.resources.sampler import Sampler

pytestmark = pytest.mark.skipif(not os.path.isdir(f"/proc/{os.getpid()}/task"), reason="needs Linux /proc")
SLEEP = [sys.executable, "-c", "import time; time.sleep(30)"]


def _own_children_files(files: ProcFiles) -> set[str]:
    return {p for p in files._fds if p.startswith(f"/proc/{os.getpid()}/task/")}


def test_children_of_every_thread_are_found_and_only_live_threads_files_stay_open():
    s = Sampler(host=True)
    files = ProcFiles()
    started: list[subprocess.Popen] = []
    release = threading.Event()

    def starter() -> None:  # a thread that starts a process, then lives until told
        started.append(subprocess.Popen(SLEEP))
        release.wait(10)

    t = threading.Thread(target=starter)
    t.start()
    main_child = subprocess.Popen(SLEEP)
    try:
        while not started:
            threading.Event().wait(0.01)
        s._discover(files)
        assert {main_child.pid, started[0].pid} <= s._tree
        kept = _own_children_files(files)
        assert f"/proc/{os.getpid()}/task/{t.native_id}/children" in kept
        assert f"/proc/{os.getpid()}/task/{os.getpid()}/children" in kept
        release.set()
        t.join()
        for _ in range(500):  # join() returns before the OS thread is gone from /proc
            if not os.path.exists(f"/proc/{os.getpid()}/task/{t.native_id}"):
                break
            threading.Event().wait(0.01)
        s._discover(files)
        assert f"/proc/{os.getpid()}/task/{t.native_id}/children" not in _own_children_files(files)
        assert main_child.pid in s._tree
    finally:
        release.set()
        for p in (*started, main_child):
            p.kill()
            p.wait()
        files.close()


def test_at_most_max_open_files_are_kept_the_rest_read_the_plain_way(monkeypatch):
    monkeypatch.setattr(ProcFiles, "MAX_OPEN", 1)
    files = ProcFiles()
    try:
        assert files(f"/proc/{os.getpid()}/statm") and files("/proc/self/stat")
        assert list(files._fds) == [f"/proc/{os.getpid()}/statm"]
    finally:
        files.close()


def test_a_processs_own_files_are_read_through_one_descriptor_and_again_after_a_fork():
    """A span's start and end read /proc/self/io and statm on vLLM's thread: one kept descriptor; a forked child
    opens its own (the inherited one still reads the parent)."""
    own = OwnFile("stat")
    assert own().split()[0] == str(os.getpid()).encode()
    fd = own._fd
    assert own().split()[0] == str(os.getpid()).encode() and own._fd == fd
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its own pid in the file it reads
        os.write(w, own().split()[0])
        os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(r, 64) == str(pid).encode()
    os.close(r)
    os.close(w)


def test_storage_reads_and_writes_come_from_the_io_file_or_not_at_all(monkeypatch):
    with open("/proc/self/io", "rb") as f:
        vals = dict(line.split(b": ") for line in f.read().splitlines())
    assert procfs.io_bytes() == (int(vals[b"read_bytes"]), int(vals[b"write_bytes"]))
    monkeypatch.setattr(procfs, "_IO", lambda: b"rchar: 1\nwchar: 2\n")  # a kernel without storage accounting
    assert procfs.io_bytes() is None


def test_the_samplers_reads_keep_the_gil_and_read_what_os_pread_reads():
    """The sampler reads its /proc files through libc's pread with the GIL held: the same bytes as os.pread, an
    error as OSError (ProcFiles then forgets the file); where ctypes cannot do it, os.pread."""
    pread = procfs.held_pread()
    assert pread is not None
    fd = os.open("/proc/self/stat", os.O_RDONLY)
    try:
        head = pread(fd).split()[:2]  # pid, (name)
        assert head == os.pread(fd, 1 << 16, 0).split()[:2] and head[0] == str(os.getpid()).encode()
    finally:
        os.close(fd)
    with pytest.raises(OSError):
        pread(fd)  # closed
    files = ProcFiles()
    try:
        assert files(f"/proc/{os.getpid()}/stat").split()[0] == str(os.getpid()).encode()
        assert files("/proc/no-such-file") is None and "/proc/no-such-file" not in files._fds
        assert files("/proc/stat").startswith(b"cpu")  # system-wide (SYSTEM_WIDE): os.pread, the GIL released
    finally:
        files.close()


def test_another_processs_children_files_are_read_whole_with_the_gil_held_and_not_kept_open():
    """Issue 58: the API server discovers its tree from every thread's children file of every process in it (a GPU
    start's EngineCore: ~100 threads). Read through ``os`` each file hands the GIL over three times, and after the
    handshake, when the API server's main thread works again, each hand-over made it wait (python -m benchmarks
    discover: a median of 186-269 waits of a working main thread over 20 discoveries, 15-25 with the GIL held)."""
    reader = procfs.held_read_file()
    assert reader is not None
    stat = f"/proc/{os.getpid()}/stat"  # its counters move between two reads: pid and name
    assert reader(stat).split()[:2] == procfs.read_file(stat).split()[:2] == [str(os.getpid()).encode(),
                                                                            procfs.read_file(stat).split()[1]]
    children = f"/proc/{os.getpid()}/task/{os.getpid()}/children"
    assert reader(children) == procfs.read_file(children)
    assert reader("/proc/no-such-file") is None
    child = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time\n"
                              "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n"
                              "print(p.pid, flush=True); time.sleep(30)"], stdout=subprocess.PIPE, text=True)
    files, s, read = ProcFiles(), Sampler(host=True), []
    try:
        grandchild = int(child.stdout.readline())
        once = files.once
        files.once = lambda path: read.append(path) or once(path)
        s._discover(files)
        assert {child.pid, grandchild} <= s._tree  # found through the child's own children files
        assert f"/proc/{child.pid}/task/{child.pid}/children" in read  # read once, with the GIL held
        assert not [p for p in files._fds if p.startswith(f"/proc/{child.pid}/")]  # none kept open
    finally:
        child.kill()
        child.wait()
        if "grandchild" in locals():
            os.kill(grandchild, 9)
        files.close()


def test_a_span_boundarys_own_reads_keep_the_gil_each_thread_with_its_own_buffer():
    """/proc/self/statm and io, read at every span's start and end on vLLM's thread, go through that thread's own
    GIL-held pread: the same bytes as os.pread, and two threads never share a buffer."""
    import threading

    fd = os.open("/proc/self/stat", os.O_RDONLY)
    try:
        assert procfs.thread_pread(fd).split()[0] == os.pread(fd, 4096, 0).split()[0] == str(os.getpid()).encode()
        mine = procfs._READERS.pread
        assert mine is not procfs.os_pread  # libc's pread through ctypes.PyDLL on this host
        theirs = []
        t = threading.Thread(target=lambda: (procfs.thread_pread(fd), theirs.append(procfs._READERS.pread)))
        t.start()
        t.join()
        assert theirs and theirs[0] is not mine
    finally:
        os.close(fd)


def test_the_cpu_model_is_the_first_processors_from_one_read(monkeypatch):
    with open("/proc/cpuinfo", "rb") as f:
        first = next((line for line in f.read().splitlines() if line.startswith(b"model name")), None)
    calls = []
    real = os.pread

    def pread(fd, *rest):  # counted for /proc/cpuinfo only (another thread of this process may read other files)
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/self/fd/{fd}") == "/proc/cpuinfo":
                calls.append(rest)
        return real(fd, *rest)

    monkeypatch.setattr(os, "pread", pread)
    got = procfs.cpu_model()
    assert got == (first.split(b":", 1)[1].strip().decode() if first else None)
    assert len(calls) == 1


SPAWNER = """
import subprocess, sys, threading, time
go = threading.Event()
def spawner():  # a thread that starts a process later, as Inductor's compile-worker pool may
    go.wait()
    print(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]).pid, flush=True)
    time.sleep(30)
threading.Thread(target=spawner, daemon=True).start()
for _ in range(8):
    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
print("ready", flush=True)
if sys.stdin.readline().strip() == "thread":
    go.set()
else:  # the main thread, where vLLM starts its EngineCore and workers
    print(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]).pid, flush=True)
time.sleep(30)
"""


@pytest.mark.parametrize("where", ["main", "thread"])
def test_between_full_discoveries_only_the_threads_that_may_start_a_process_are_read(where):
    """Issue 58: an EngineCore of a GPU start has ~100 threads, each a children file read once a second while the API
    server waits on it. A full discovery every FULL_DISCOVERY_EVERY reads them all; between two, a thread found
    childless is skipped, its process's main thread never is: a process the main thread starts is found at the next
    discovery, one a childless thread starts at the next full one."""
    from vllm_otel_startup.agent.resources import sampler as sampler_mod

    child = subprocess.Popen([sys.executable, "-c", SPAWNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    files, s, read = ProcFiles(), Sampler(host=True), []
    grandchild = None
    try:
        assert child.stdout.readline().strip() == "ready"
        once = files.once
        files.once = lambda path: read.append(path) or once(path)
        s._discover(files)  # the first is full: every thread of the child
        mine = [p for p in read if p.startswith(f"/proc/{child.pid}/")]  # (pytest may have other children)
        assert len(mine) == len(os.listdir(f"/proc/{child.pid}/task")) >= 10
        child.stdin.write(where + "\n")
        child.stdin.flush()
        grandchild = int(child.stdout.readline())
        found_at = None
        for n in range(2, sampler_mod.FULL_DISCOVERY_EVERY + 2):
            read.clear()
            s._discover(files)
            if n <= sampler_mod.FULL_DISCOVERY_EVERY:  # between full ones: the child's main thread (and the spawner
                assert f"/proc/{child.pid}/task/{child.pid}/children" in read  # once it has a child) only
                assert len([p for p in read if p.startswith(f"/proc/{child.pid}/")]) <= 2
            if found_at is None and grandchild in s._tree:
                found_at = n
        assert found_at == (2 if where == "main" else sampler_mod.FULL_DISCOVERY_EVERY + 1)
    finally:
        child.kill()
        child.wait()
        if grandchild:
            os.kill(grandchild, 9)
        files.close()
