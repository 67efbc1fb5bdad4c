#!/usr/bin/env python3
"""test_http_idle.py — checks the client of the idle keep-alive connections
section (http_bench.open_idle, not_idle) against a small server of its own on
127.0.0.1: a server that answers every connection is held idle and a
connection it then closes is seen; one that stops answering after K
connections makes the client report exactly K answered (IdleStop); a wrong
body fails the run. Loopback only, a few hundred connections, bounded by
socket timeouts. Run by ctest (bench_http_idle) and by hand:

    python3 bench/test_http_idle.py
"""

from __future__ import annotations

import socket
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import http_bench  # noqa: E402

CONNS = 200
BODY = http_bench.index_html()


def response(body: bytes) -> bytes:
    return (b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body)


class Server:
    """Accepts connections on 127.0.0.1; the first `answer` get the file for their
    request (connection number `bad` a wrong body), later ones are closed unanswered.
    Every connection has a thread; close(i) closes the i-th answered one."""

    def __init__(self, answer: int, bad: int = -1) -> None:
        self.lsock = socket.create_server(("127.0.0.1", 0), backlog=1024)
        self.port = self.lsock.getsockname()[1]
        self.answer, self.bad = answer, bad
        self.conns: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self) -> None:
        while True:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            with self.lock:
                self.conns.append(c)
                n = len(self.conns) - 1
            threading.Thread(target=self.serve, args=(c, n), daemon=True).start()

    def serve(self, c: socket.socket, n: int) -> None:
        c.settimeout(30)
        try:
            buf = b""
            while b"\r\n\r\n" not in buf:
                chunk = c.recv(4096)
                if not chunk:
                    return
                buf += chunk
            if n >= self.answer:
                c.close()
                return
            c.sendall(response(BODY[::-1] if n == self.bad else BODY))
        except OSError:
            pass

    def close(self, i: int) -> None:
        self.conns[i].close()

    def stop(self) -> None:
        self.lsock.close()
        for c in self.conns:
            c.close()


def check(cond: bool, what: str) -> None:
    if not cond:
        print(f"FAIL {what}", file=sys.stderr)
        sys.exit(1)


def main() -> int:
    size = len(response(BODY))
    srv = Server(answer=CONNS)
    try:
        socks = http_bench.open_idle(srv.port, CONNS, BODY, size)
        check(len(socks) == CONNS, f"{len(socks)} connections held, not {CONNS}")
        check(http_bench.not_idle(socks) == 0, "idle connections reported as closed")
        for i in range(5):
            srv.close(i)
        gone = 0
        for _ in range(50):                    # the FINs arrive within moments
            gone = http_bench.not_idle(socks)
            if gone == 5:
                break
            threading.Event().wait(0.02)
        check(gone == 5, f"5 connections closed by the server, {gone} seen")
        for s in socks:
            http_bench.close_abortive(s)
    finally:
        srv.stop()

    srv = Server(answer=150)
    try:
        http_bench.open_idle(srv.port, CONNS, BODY, size)
        check(False, "a server that answers 150 connections was held at 200")
    except http_bench.IdleStop as e:
        check(e.answered == 150, f"stopped at {e.answered} answered, not 150: {e}")
        check("closed by the server before the response" in str(e), f"why: {e}")
    finally:
        srv.stop()

    srv = Server(answer=CONNS, bad=17)
    try:
        http_bench.open_idle(srv.port, CONNS, BODY, size)
        check(False, "a wrong body went unnoticed")
    except RuntimeError as e:
        check(f"not the {len(BODY)}-byte file" in str(e), f"wrong body: {e}")
    finally:
        srv.stop()
    print("test_http_idle: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
