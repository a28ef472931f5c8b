"""A hub-protocol server on 127.0.0.1 for the end-to-end tests: serves locally built model repositories the way
huggingface_hub (and through it vLLM and transformers) reads them, at a bandwidth limit the test sets.

Why not a mirror package: olah 0.5.4 (PyPI) was tried first with its local git mirror (``mirrors-path``) and
``offline = true``: it answers ``GET /api/models/ORG/NAME`` with 401, because it asks the upstream hub for a repo's
latest commit even when the repo is a local mirror (server_upstream.get_latest_commit), and no hub is reachable
here; it has no bandwidth limit either. So this is a minimal standard-library server for exactly the endpoints
huggingface_hub 2.x calls for a model:
  GET  /api/models/ORG/NAME[/revision/REV]         model info: sha, siblings
  GET  /api/models/ORG/NAME/tree/REV[/PATH]        file listing (recursive or one level), with oid / lfs / size
  POST /api/models/ORG/NAME/paths-info/REV         entries for the given paths
  HEAD|GET /ORG/NAME/resolve/REV/PATH              the file, with ETag, X-Repo-Commit, Content-Length,
                                                   X-Linked-Etag / X-Linked-Size and Range
Everything else is 404 with the hub's X-Error-Code. The commit is a hash of the repository's file hashes.

Bandwidth: one token bucket shared by all connections paces every file body (the limit a slow link would set);
``bytes_sent`` counts the file bytes that left the server; ``sends`` holds, per file, its bytes sent and the
seconds from the first body request's arrival to the last byte written: the rate the link delivered, the yardstick
of the download span (on a starved host the delivery falls below the limit, and the span must follow it, not the
limit). The tests run it in a process of its own
(:class:`HubProcess`, ``python -m support.hub_server``): its pacing sleeps and sends would otherwise share the test
process's interpreter lock with whatever the tests run meanwhile (measured: 20 % under its rate).
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

CHUNK = 64 * 1024


class TokenBucket:
    """``rate`` bytes/s with a burst of ``burst`` bytes, shared by every thread that takes from it. The burst
    (1 MiB) absorbs the sender's own latency (a burst of one chunk lost ~13 % of the rate to sleep overshoot)."""

    def __init__(self, rate: float, burst: int = 16 * CHUNK) -> None:
        self.rate, self.burst = float(rate), burst
        self.tokens, self.last = float(burst), time.monotonic()
        self.lock = threading.Lock()

    def take(self, n: int) -> None:
        with self.lock:  # one sender at a time: the limit holds across connections
            while True:
                now = time.monotonic()
                self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
                self.last = now
                if self.tokens >= n:
                    self.tokens -= n
                    return
                time.sleep((n - self.tokens) / self.rate)


@dataclass(frozen=True)
class RepoFile:
    path: str  # relative, '/'-separated
    local: Path
    size: int
    sha256: str
    git_oid: str  # git blob sha1


@dataclass
class Repo:
    repo_id: str
    root: Path
    files: dict[str, RepoFile] = field(default_factory=dict)
    sha: str = ""

    @classmethod
    def scan(cls, repo_id: str, root: Path) -> Repo:
        repo = cls(repo_id, root)
        for p in sorted(q for q in root.rglob("*") if q.is_file() and ".git" not in q.parts):
            rel = p.relative_to(root).as_posix()
            h256, h1 = hashlib.sha256(), hashlib.sha1()  # noqa: S324 - git's blob id is sha1
            size = p.stat().st_size
            h1.update(f"blob {size}\0".encode())
            with p.open("rb") as f:
                while block := f.read(1 << 20):
                    h256.update(block)
                    h1.update(block)
            repo.files[rel] = RepoFile(rel, p, size, h256.hexdigest(), h1.hexdigest())
        repo.sha = hashlib.sha1("".join(f.sha256 for f in repo.files.values()).encode()).hexdigest()  # noqa: S324
        return repo

    def is_lfs(self, f: RepoFile) -> bool:
        return f.path.endswith((".safetensors", ".bin", ".pt"))

    def entry(self, f: RepoFile) -> dict:
        e = {"type": "file", "oid": f.git_oid, "size": f.size, "path": f.path}
        if self.is_lfs(f):
            e["lfs"] = {"oid": f.sha256, "size": f.size, "pointerSize": 134}
        return e

    def folders(self) -> set[str]:
        return {"/".join(p.split("/")[:i]) for p in self.files for i in range(1, p.count("/") + 1)}

    def info(self) -> dict:
        return {"_id": self.sha[:24], "id": self.repo_id, "modelId": self.repo_id, "author": self.repo_id.split("/")[0],
                "sha": self.sha, "lastModified": "2026-01-01T00:00:00.000Z", "createdAt": "2026-01-01T00:00:00.000Z",
                "private": False, "gated": False, "disabled": False, "downloads": 0, "likes": 0, "tags": [],
                "library_name": "transformers", "pipeline_tag": "text-generation",
                "siblings": [{"rfilename": p} for p in self.files]}


class HubServer:
    """``HubServer({"org/name": dir}, rate=bytes_per_s).start()``; ``url`` goes into HF_ENDPOINT."""

    def __init__(self, repos: dict[str, Path], rate: float) -> None:
        self.repos = {rid: Repo.scan(rid, Path(d)) for rid, d in repos.items()}
        self.bucket = TokenBucket(rate)
        self.rate = rate
        self.bytes_sent = 0
        self.sends: dict[str, list[float]] = {}  # path -> [first body's start, last byte's end, bytes] (monotonic s)
        self.requests: list[str] = []  # "METHOD path status": what the clients asked for
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> HubServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True, name="hub-server").start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def count_sent(self, n: int) -> None:
        with self._lock:
            self.bytes_sent += n

    def note_send(self, path: str, t0: float, t1: float, n: int) -> None:
        with self._lock:
            w = self.sends.setdefault(path, [t0, t1, 0])
            w[0], w[1], w[2] = min(w[0], t0), max(w[1], t1), w[2] + n

    def stats(self) -> dict:
        with self._lock:
            return {"bytes_sent": self.bytes_sent,
                    "sends": {p: {"bytes": int(n), "seconds": t1 - t0} for p, (t0, t1, n) in self.sends.items()}}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        return type("Handler", (HubHandler,), {"hub": self})


class HubHandler(BaseHTTPRequestHandler):
    """The Hub's HTTP API over one :class:`HubServer`'s repositories (``hub``: set per server)."""

    hub: HubServer
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        return None

    def _reply(self, status: int, body: bytes = b"", ctype: str = "application/json",
               headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.hub.requests.append(f"{self.command} {self.path} {status}")

    def _json(self, doc, headers: dict[str, str] | None = None) -> None:
        self._reply(200, json.dumps(doc).encode(), headers=headers)

    def _missing(self, code: str, msg: str) -> None:
        self._reply(404, json.dumps({"error": msg}).encode(), headers={"X-Error-Code": code,
                                                                        "X-Error-Message": msg})

    def _repo(self, rid: str) -> Repo | None:
        repo = self.hub.repos.get(rid)
        if repo is None:
            self._missing("RepoNotFound", f"Repository {rid} not found")
        return repo

    def _rev_ok(self, repo: Repo, rev: str) -> bool:
        if urllib.parse.unquote(rev) in ("main", repo.sha):
            return True
        self._missing("RevisionNotFound", f"Invalid rev id: {rev}")
        return False

    def do_HEAD(self) -> None:  # noqa: N802
        self.do_GET()

    def do_GET(self) -> None:  # noqa: N802
        url = urllib.parse.urlsplit(self.path)
        path, query = urllib.parse.unquote(url.path), urllib.parse.parse_qs(url.query)
        if path == "/_vos/stats":  # the test's view of what left the server (HubProcess)
            self._json(self.hub.stats())
        elif m := re.fullmatch(r"/api/models/([^/]+/[^/]+)(?:/revision/([^/]+))?", path):
            repo = self._repo(m[1])
            if repo and self._rev_ok(repo, m[2] or "main"):
                self._json(repo.info())
        elif m := re.fullmatch(r"/api/models/([^/]+/[^/]+)/tree/([^/]+)(?:/(.*))?", path):
            repo = self._repo(m[1])
            if repo and self._rev_ok(repo, m[2]):
                self._tree(repo, (m[3] or "").strip("/"), query.get("recursive", ["false"])[0] == "true")
        elif m := re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path):
            repo = self._repo(m[1])
            if repo and self._rev_ok(repo, m[2]):
                self._file(repo, m[3])
        else:
            self._missing("EntryNotFound", f"no route {path}")

    def do_POST(self) -> None:  # noqa: N802
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n).decode() if n else ""
        path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        m = re.fullmatch(r"/api/models/([^/]+/[^/]+)/paths-info/([^/]+)", path)
        if not m:
            self._missing("EntryNotFound", f"no route {path}")
            return
        repo = self._repo(m[1])
        if not repo or not self._rev_ok(repo, m[2]):
            return
        if self.headers.get("Content-Type", "").startswith("application/json"):
            paths = json.loads(raw or "{}").get("paths", [])
        else:
            paths = urllib.parse.parse_qs(raw).get("paths", [])
        folders = repo.folders()
        out = [repo.entry(repo.files[p]) if p in repo.files else {"type": "directory", "oid": repo.sha,
                                                                      "size": 0, "path": p}
               for p in (q.strip("/") for q in paths) if p in repo.files or p in folders]
        self._json(out)

    def _tree(self, repo: Repo, under: str, recursive: bool) -> None:
        prefix = f"{under}/" if under else ""
        if under and under not in repo.folders():
            self._missing("EntryNotFound", f"{under} does not exist")
            return
        out, dirs = [], set()
        for p, f in repo.files.items():
            if not p.startswith(prefix):
                continue
            rest = p[len(prefix):]
            if "/" in rest and not recursive:
                dirs.add(prefix + rest.split("/")[0])
                continue
            out.append(repo.entry(f))
        if recursive:
            dirs = {d for d in repo.folders() if d.startswith(prefix)}
        out += [{"type": "directory", "oid": repo.sha, "size": 0, "path": d} for d in sorted(dirs)]
        self._json(out)

    def _file(self, repo: Repo, rel: str) -> None:
        f = repo.files.get(rel)
        if f is None:
            self._missing("EntryNotFound", f"{rel} does not exist on main")
            return
        etag = f.sha256 if repo.is_lfs(f) else f.git_oid
        start, end = 0, f.size - 1
        rng = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if rng:
            start, end = int(rng[1]), min(int(rng[2]) if rng[2] else f.size - 1, f.size - 1)
        length = max(0, end - start + 1)
        self.send_response(206 if rng else 200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(length))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", f'"{etag}"')
        self.send_header("X-Repo-Commit", repo.sha)
        if repo.is_lfs(f):
            self.send_header("X-Linked-Etag", f'"{etag}"')
            self.send_header("X-Linked-Size", str(f.size))
        if rng:
            self.send_header("Content-Range", f"bytes {start}-{end}/{f.size}")
        self.end_headers()
        self.hub.requests.append(f"{self.command} {self.path} {206 if rng else 200}")
        if self.command == "HEAD":
            return
        t0 = time.monotonic()
        with f.local.open("rb") as src:
            src.seek(start)
            left = length
            while left > 0:
                block = src.read(min(CHUNK, left))
                if not block:
                    break
                self.hub.bucket.take(len(block))
                self.wfile.write(block)
                self.hub.count_sent(len(block))
                left -= len(block)
        self.hub.note_send(rel, t0, time.monotonic(), length - left)


class HubProcess:
    """A :class:`HubServer` in a process of its own, with the same ``url``, ``bytes_sent``, ``stats()`` and
    ``stop()``."""

    def __init__(self, repos: dict[str, Path], rate: float) -> None:
        self.repos, self.rate = repos, rate
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def start(self) -> HubProcess:
        argv = [sys.executable, str(Path(__file__).resolve()), str(self.rate),
                *(f"{rid}={d}" for rid, d in self.repos.items())]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, start_new_session=True)
        line = self.proc.stdout.readline().strip()  # "port N" once it listens
        if not line.startswith("port "):
            self.stop()
            raise RuntimeError(f"the hub server did not start: {line!r}")
        self.url = f"http://127.0.0.1:{line.split()[1]}"
        return self

    def stats(self) -> dict:
        import urllib.request

        with urllib.request.urlopen(f"{self.url}/_vos/stats", timeout=10) as r:  # noqa: S310 - loopback
            return json.loads(r.read())

    @property
    def bytes_sent(self) -> int:
        return int(self.stats()["bytes_sent"])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


def main(argv: list[str]) -> int:
    """``hub_server.py RATE ORG/NAME=DIR ...``: serve until terminated; prints ``port N`` when it listens."""
    rate, repos = float(argv[1]), dict(a.split("=", 1) for a in argv[2:])
    hub = HubServer({rid: Path(d) for rid, d in repos.items()}, rate=rate)
    print(f"port {hub.port}", flush=True)
    hub.httpd.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
