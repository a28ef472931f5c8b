"""Slow shared storage, simulated honestly: a read-only FUSE passthrough of a local directory whose reads are paced by
one token bucket (the bandwidth a network file system would give). Run as its own process:

    python -m support.slow_fs SOURCE MOUNTPOINT BYTES_PER_S      (foreground; unmounted on SIGTERM)

Every byte a reader gets passes through ``read`` here, at the limit. The page cache is not bypassed with
``direct_io``: safetensors maps the file MAP_SHARED, which FUSE refuses on a direct_io file (libfuse 2 cannot
negotiate FUSE_DIRECT_IO_ALLOW_MMAP); instead the kernel's cache of a file is dropped at every open (no
``kernel_cache``/keep-cache) and the mount is fresh, so nothing read before the start can be served from memory.
Needs libfuse2 and fusepy (tests/e2e/bootstrap_remote.sh) and /dev/fuse with CAP_SYS_ADMIN (root).
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from support.hub_server import TokenBucket

E2E_HOME = Path(os.environ.get("VOS_E2E_HOME", Path.home() / ".cache/vllm-otel-startup/e2e"))


def libfuse() -> str | None:
    """libfuse.so.2 as bootstrap_remote.sh unpacked it (or the system's)."""
    for root in (E2E_HOME / "fuse", Path("/")):
        for sub in ("lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu",
                    "usr/lib/aarch64-linux-gnu"):
            p = root / sub / "libfuse.so.2"
            if p.exists():
                return str(p)
    return None


def unusable() -> str | None:
    """Why a throttled FUSE mount cannot be made on this machine, or None."""
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse does not exist"
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "/dev/fuse is not readable and writable by this user"
    if libfuse() is None:
        return "libfuse.so.2 not found"
    return None


def serve(source: str, mountpoint: str, rate: float) -> None:
    os.environ.setdefault("FUSE_LIBRARY_PATH", libfuse() or "")
    from fuse import FUSE, FuseOSError, Operations  # fusepy: imported here, after FUSE_LIBRARY_PATH is set

    bucket = TokenBucket(rate)
    served = [0]

    class Throttled(Operations):
        def __init__(self, root: str) -> None:
            self.root = root

        def _full(self, path: str) -> str:
            return os.path.join(self.root, path.lstrip("/"))

        def getattr(self, path, fh=None):
            try:
                st = os.lstat(self._full(path))
            except OSError as e:
                raise FuseOSError(e.errno) from e
            return {k: getattr(st, k) for k in ("st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime", "st_nlink",
                                                "st_size", "st_uid")}

        def readdir(self, path, fh):
            return [".", "..", *os.listdir(self._full(path))]

        def readlink(self, path):
            return os.readlink(self._full(path))

        def statfs(self, path):
            st = os.statvfs(self._full(path))
            return {k: getattr(st, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree",
                                                "f_files", "f_flag", "f_frsize", "f_namemax")}

        def open(self, path, flags):
            if flags & (os.O_WRONLY | os.O_RDWR):
                raise FuseOSError(errno.EROFS)
            return os.open(self._full(path), os.O_RDONLY)

        def read(self, path, size, offset, fh):
            data = os.pread(fh, size, offset)
            bucket.take(len(data))  # the link's pace: every byte a reader gets waits here
            served[0] += len(data)
            if served[0] // (50 << 20) != (served[0] - len(data)) // (50 << 20):
                print(f"served {served[0]} bytes", flush=True)
            return data

        def release(self, path, fh):
            os.close(fh)
            return 0

    FUSE(Throttled(source), mountpoint, foreground=True, ro=True, nothreads=False, fsname="slowfs",
         subtype="slowfs", max_read=131072)


class SlowMount:
    """The mount as a context manager: ``with SlowMount(src, mnt, rate) as m: ... m.path``."""

    def __init__(self, source: Path, mountpoint: Path, rate: float, log: Path) -> None:
        self.source, self.path, self.rate, self.log = source, mountpoint, rate, log
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> SlowMount:
        self.path.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                                           os.environ.get("PYTHONPATH", "")]))
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "support.slow_fs", str(self.source), str(self.path),
                                          str(self.rate)], env=env, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.monotonic() + 30
        while not os.path.ismount(self.path):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.__exit__()
                raise RuntimeError(f"FUSE mount at {self.path} failed: {self.log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.1)
        return self

    def __exit__(self, *exc) -> None:
        if os.path.ismount(self.path):
            subprocess.run(["umount", str(self.path)], check=False, capture_output=True)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2], float(sys.argv[3]))
