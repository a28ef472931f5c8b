"""Collectors that misbehave, on 127.0.0.1, for the fault matrix. These are stand-ins: a real collector cannot be
told to blackhole, stall or fail on purpose, so each is a tiny server that does exactly that one thing."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from support.harness import free_port


class Blackhole:
    """Accepts connections and never answers (a collector behind a dead proxy)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop:
            with contextlib.suppress(OSError):
                conn, _ = self.sock.accept()
                self.held.append(conn)  # read nothing, answer nothing, close nothing

    def close(self) -> None:
        self._stop = True
        for c in self.held:
            c.close()
        self.sock.close()


class HTTPCollector:
    """Answers every OTLP/HTTP request with ``status`` after ``delay`` seconds (slow, or failing with 500)."""

    def __init__(self, status: int = 200, delay: float = 0.0) -> None:
        self.requests = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.requests += 1
                time.sleep(delay)
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class GrpcUnavailable:
    """An OTLP/gRPC endpoint whose every call fails with UNAVAILABLE (a collector shedding load)."""

    def __init__(self) -> None:
        import grpc

        self.requests = 0
        outer = self

        class Handler(grpc.GenericRpcHandler):
            def service(self, call_details):
                def fail(request, context):
                    outer.requests += 1
                    context.abort(grpc.StatusCode.UNAVAILABLE, "collector overloaded (test)")

                return grpc.unary_unary_rpc_method_handler(fail)

        from concurrent.futures import ThreadPoolExecutor

        self.server = grpc.server(ThreadPoolExecutor(max_workers=4), handlers=[Handler()])
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def close(self) -> None:
        self.server.stop(0)


def closed_port() -> int:
    """A port nothing listens on (a collector that is down)."""
    return free_port()
