"""/proc readers of the sampler and of each span's readings, fail-soft (None where a file is missing or not the layout
we know). Each syscall of ``os`` releases the GIL, and a thread of ours that releases it must then wait for vLLM's busy
main thread to hand it back (a forced switch of that thread, after the 5 ms switch interval): files read often are
kept open and re-read with one pread, the sampler's with the GIL held."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def read_file(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


READ_SIZE = 1 << 16  # bytes a reading takes: the files read here are a few KiB (/proc/stat ~100 bytes a core)


def os_pread(fd: int) -> bytes:
    """The file's start through ``os.pread`` (the GIL released for the syscall)."""
    return os.pread(fd, READ_SIZE, 0)


# generated from every core's and interrupt's counters: on a host of many cores, longer to read than a hand-over
SYSTEM_WIDE = frozenset({"/proc/stat"})


def held_pread(size: int = READ_SIZE) -> Callable[[int], bytes] | None:
    """A reader of an open file from its start, through libc's pread with the GIL held (ctypes.PyDLL); None where
    that is not available. A process's /proc file is generated in microseconds and never blocks: holding the GIL that
    long costs vLLM's main thread less than handing it over and back (each hand-over is a forced switch of the API
    server's main thread; docs/lab/overhead.md). Its buffer is its own: one reader per
    thread. Not for SYSTEM_WIDE files."""
    try:
        import ctypes

        libc = ctypes.PyDLL(None, use_errno=True)
        fn = getattr(libc, "pread64", None) or libc.pread
        fn.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int64)
        fn.restype = ctypes.c_ssize_t
        buf = ctypes.create_string_buffer(size)
        string_at, get_errno = ctypes.string_at, ctypes.get_errno
    except Exception:  # noqa: BLE001 - no ctypes, no libc symbol: os.pread
        return None

    def pread(fd: int) -> bytes:
        n = fn(fd, buf, size, 0)
        if n < 0:
            err = get_errno()
            raise OSError(err, os.strerror(err))
        return string_at(buf, n)

    return pread


def held_read_file(size: int = READ_SIZE) -> Callable[[str], bytes | None] | None:
    """A reader of a small /proc file by its path (libc's open, pread and close with the GIL held, ctypes.PyDLL): a
    file read once a tick, not worth a descriptor kept open, with no hand-over of the GIL (three with ``read_file``);
    None where that is not available. Like ``held_pread``: never for SYSTEM_WIDE files, one reader per thread."""
    pread = held_pread(size)
    if pread is None:
        return None
    try:
        import ctypes

        libc = ctypes.PyDLL(None, use_errno=True)
        c_open, c_close = libc.open, libc.close
        c_open.argtypes, c_open.restype = (ctypes.c_char_p, ctypes.c_int), ctypes.c_int
        c_close.argtypes, c_close.restype = (ctypes.c_int,), ctypes.c_int
    except Exception:  # noqa: BLE001 - no libc symbol: read_file
        return None
    flags = os.O_RDONLY | os.O_CLOEXEC  # as ProcFiles opens its files

    def read(path: str) -> bytes | None:
        fd = c_open(os.fsencode(path), flags)
        if fd < 0:
            return None
        try:
            return pread(fd)
        except OSError:
            return None
        finally:
            c_close(fd)

    return read


_READERS = threading.local()  # per thread: a GIL-held pread of its own (its buffer is its own), made at first use


def thread_pread(fd: int) -> bytes:
    """``fd`` read from its start by this thread's own GIL-held pread (held_pread; os.pread where unavailable): the
    sampler's kept files (ProcFiles), and a span's start and end reading /proc/self/statm and io on vLLM's main
    thread, where a GIL released for the syscall is taken by any thread waiting for it and vLLM's thread must then
    wait to get it back (the EngineCore of a GPU start has a hundred threads)."""
    pread = getattr(_READERS, "pread", None)
    if pread is None:
        pread = _READERS.pread = held_pread() or os_pread
    return pread(fd)


class ProcFiles:
    """/proc files kept open and re-read with pread (procfs regenerates them): one syscall per reading
    instead of three, which is most of the sampler's cost. Each syscall releases the GIL, and taking it back from
    a busy main thread is a forced switch of that thread. Only the sampler thread uses them; at most
    ``MAX_OPEN`` are kept (the host's file limit is vLLM's), the rest are read the plain way."""

    MAX_OPEN = 128

    def __init__(self) -> None:
        self._fds: dict[str, int] = {}
        self._once: Callable[[str], bytes | None] | None = None  # held_read_file, for files not kept open

    def __call__(self, path: str) -> bytes | None:
        fd = self._fds.get(path)
        if fd is None and len(self._fds) >= self.MAX_OPEN:
            return read_file(path)
        try:
            if fd is None:
                fd = self._fds[path] = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            return os_pread(fd) if path in SYSTEM_WIDE else thread_pread(fd)
        except OSError:
            self.forget(path)
            return None

    def once(self, path: str) -> bytes | None:
        """``path`` read whole without keeping it open (another process's threads' children files: a hundred in a
        GPU start's EngineCore), with the GIL held where libc allows it."""
        if self._once is None:
            self._once = held_read_file() or read_file
        return self._once(path)

    def forget_unused(self, prefix: str, used: set[str]) -> None:
        """Close the files under ``prefix`` not in ``used`` (threads that ended)."""
        for path in [x for x in self._fds if x.startswith(prefix) and x not in used]:
            self.forget(path)

    def forget(self, path: str) -> None:
        fd = self._fds.pop(path, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def close(self) -> None:
        for path in list(self._fds):
            self.forget(path)


class OwnFile:
    """One /proc file of this process kept open for readings from any thread (pread has no file position), e.g.
    a span's start and end on vLLM's main thread: one syscall with the GIL held (``thread_pread``) instead of three
    that each release it. Opened again in a forked child, whose inherited descriptor still reads its parent. No lock
    (one held by another thread at a fork would never be released in the child) and nothing closed (a descriptor
    closed under a reader could be another file by its read): two threads opening it at once leave one descriptor
    unused, a fork one more."""

    def __init__(self, name: str) -> None:
        self.name, self._pid, self._fd = name, 0, -1

    def __call__(self, path: str = "") -> bytes | None:
        pid = os.getpid()
        if self._pid != pid:
            try:
                fd = os.open(f"/proc/{pid}/{self.name}", os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                return None
            self._fd = fd  # the descriptor before the pid: a reader that sees this pid reads this descriptor
            self._pid = pid
        try:
            return thread_pread(self._fd)
        except OSError:
            return None


_STATM, _IO = OwnFile("statm"), OwnFile("io")


def rss_bytes(read=_STATM) -> int | None:
    raw = read("/proc/self/statm")
    try:
        return int(raw.split()[1]) * _PAGE if raw else None
    except (ValueError, IndexError):
        return None


def io_bytes() -> tuple[int, int] | None:
    """(read_bytes, write_bytes) this process caused to storage (page-cache hits are not reads)."""
    raw = _IO()
    try:
        return (_field(raw, b"\nread_bytes: "), _field(raw, b"\nwrite_bytes: ")) if raw else None
    except ValueError:  # not the layout we know
        return None


def _field(raw: bytes, key: bytes) -> int:
    """The number after ``key`` in a /proc file of ``key value`` lines (two finds, no dict of every line: a span's
    start and end read /proc/self/io on vLLM's thread)."""
    i = raw.index(key) + len(key)
    return int(raw[i:raw.index(b"\n", i)])


def proc_cpu_s(pid: int, read=read_file) -> float | None:
    """utime + stime + cutime + cstime of ``pid`` (its reaped children included), in seconds."""
    raw = read(f"/proc/{pid}/stat")
    if not raw:
        return None
    try:
        f = raw[raw.rindex(b")") + 2:].split()
        return sum(int(x) for x in f[11:15]) / _TICK
    except (ValueError, IndexError):
        return None


def children(pid: int, read=read_file, used: set[str] | None = None, skip: set[str] | None = None,
             empty: set[str] | None = None) -> list[int]:
    """The children of every thread of ``pid`` (a thread's children file lists those it started); ``used``
    collects the files of its live threads, ``skip`` names files not to read this time, ``empty`` collects those read
    that listed no child, but the main thread's (where vLLM starts its processes)."""
    out: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        path = f"/proc/{pid}/task/{tid}/children"
        if used is not None:
            used.add(path)
        if skip and path in skip:
            continue
        raw = read(path)
        if raw:
            out.extend(int(x) for x in raw.split())
        elif empty is not None and tid != str(pid):  # a process's main thread is never taken for childless
            empty.add(path)
    return out


def system_cores(read=read_file) -> list[tuple[int, int]] | None:
    """(busy, total) jiffies per logical core, from /proc/stat."""
    raw = read("/proc/stat")
    if not raw:
        return None
    out = []
    for line in raw.splitlines():
        if line.startswith(b"cpu") and not line.startswith(b"cpu "):
            v = [int(x) for x in line.split()[1:]]
            idle = v[3] + (v[4] if len(v) > 4 else 0)
            total = sum(v[:8])
            out.append((total - idle, total))
    return out


def cgroup_throttled_s() -> float | None:
    """CPU time this container's cgroup was throttled (cgroup v2 throttled_usec, v1 throttled_time ns)."""
    for path, key, scale in (("/sys/fs/cgroup/cpu.stat", b"throttled_usec", 1e-6),
                             ("/sys/fs/cgroup/cpu,cpuacct/cpu.stat", b"throttled_time", 1e-9),
                             ("/sys/fs/cgroup/cpu/cpu.stat", b"throttled_time", 1e-9)):
        raw = read_file(path)
        if raw:
            for line in raw.splitlines():
                k, _, v = line.partition(b" ")
                if k == key:
                    return int(v) * scale
    return None


CPUINFO_HEAD = 4096  # the first processor's record


def cpu_model() -> str | None:
    """The first processor's model name, from the file's first 4 KiB in one read: the kernel makes /proc/cpuinfo a
    processor at a time as it is read (milliseconds each on some hosts), and reading it whole took a read, and a
    hand-over of the GIL, per 4 KiB (dozens on a GPU host), in every process of a start. The GIL is released for the
    one read (the first processor's record may itself take milliseconds to make)."""
    try:
        fd = os.open("/proc/cpuinfo", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        raw = os.pread(fd, CPUINFO_HEAD, 0)
    except OSError:
        raw = None
    finally:
        os.close(fd)
    for line in (raw or b"").splitlines():
        if line.startswith(b"model name"):
            return line.split(b":", 1)[1].strip().decode(errors="replace")
    return None
