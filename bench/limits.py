"""What one hostile connection can make a trainyard server hold: its memory and its connections.

    PYTHONPATH=src:bench .venv/bin/python bench/limits.py [--mib 64] [--wait 40]

Starts its own server in a temporary home and, one connection at a time, sends what no client needs:

- a header that never ends (``--mib`` MiB of it, unauthenticated);
- a JSON body of ``--mib`` MiB to a launcher's report with a made-up credential (reports are not behind the
  users' token: the attempt's credential is checked with the report), and to ``POST /api/v1/jobs`` with the
  server's own token;
- 20 connections that each pipeline 6,000 requests (250 KB) and read none of the answers;
- a connection that sends nothing, and one that sends half a head, then waits ``--wait`` seconds.

Prints what the server answered, its RSS growth over the idle server measured first (the baseline, in the same
run), and whether the silent connections were closed. Targets (api/bounded_http.py, api/guard.py): no case
grows the server by more than 16 MiB, and both silent connections are closed within ``--wait`` seconds. It exits
0 whatever the numbers: it is a measurement.
"""

from __future__ import annotations

import argparse
import socket
import sys
import tempfile
import time
from pathlib import Path

import psutil

from benchserver import BenchServer

GROWTH = 16  # MiB a case may grow the server by


def _send(port: int, head: bytes, mib: int, rss: psutil.Process) -> tuple[bytes, int]:
    """Send ``head``, then ``mib`` MiB; what the server answered, and its peak RSS meanwhile."""
    peak, answer = rss.memory_info().rss, b""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as conn:
        try:
            conn.sendall(head)
            for i in range(mib):
                conn.sendall(b"a" * (1 << 20))
                if i % 8 == 0:
                    peak = max(peak, rss.memory_info().rss)
            answer = conn.recv(200)
        except OSError as e:
            answer = f"{type(e).__name__} while sending".encode()
    time.sleep(0.5)
    return answer.split(b"\r\n", 1)[0], max(peak, rss.memory_info().rss)


def _pipelined(port: int, rss: psutil.Process, connections: int = 20, requests: int = 6000) -> int:
    """The server's RSS once ``connections`` connections each sent ``requests`` pipelined requests, answers unread."""
    opened = []
    try:
        for _ in range(connections):
            conn = socket.create_connection(("127.0.0.1", port), timeout=10)
            conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * requests)
            opened.append(conn)
        time.sleep(3)
        return rss.memory_info().rss
    finally:
        for conn in opened:
            conn.close()


def _closed_within(port: int, data: bytes, wait: float) -> float | None:
    """Seconds until the server closed a connection that sent ``data`` and nothing more; None: still open."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as conn:
        conn.sendall(data)
        began = time.monotonic()
        try:
            while conn.recv(65536):
                pass
        except socket.timeout:
            return None
        return time.monotonic() - began


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mib", type=int, default=64, help="MiB sent in each case (default 64)")
    ap.add_argument("--wait", type=float, default=40.0, help="seconds a silent connection is watched (default 40)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="trainyard-bench-limits-") as tmp:
        srv = BenchServer(Path(tmp) / "home", [sys.executable, "-m", "trainyard", "server", "--container-runtime", "none"])
        try:
            port, token = int(srv.url.rsplit(":", 1)[1]), (Path(tmp) / "home" / "token").read_text().strip()
            proc = psutil.Process(srv.proc.pid)
            time.sleep(2)
            base = proc.memory_info().rss
            print(f"server {srv.url}; idle RSS {base >> 20} MiB (the baseline); {args.mib} MiB sent per case")
            json_head = "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n" \
                        "Content-Type: application/json\r\nContent-Length: {n}\r\n\r\n"
            cases = [
                ("a header that never ends, no token", b"GET /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: "),
                ("a report's body, made-up credential", json_head.format(
                    path="/internal/attempts/a-1/replicas/0/report", token="made-up", n=args.mib << 20).encode()),
                ("a job's body, the server's token", json_head.format(
                    path="/api/v1/jobs", token=token, n=args.mib << 20).encode()),
            ]
            worst = 0
            for name, head in cases:
                answer, peak = _send(port, head, args.mib, proc)
                worst = max(worst, peak - base)
                print(f"  {name:<40} answered {answer.decode(errors='replace')[:60]!r:<50} "
                      f"RSS +{(peak - base) / (1 << 20):.0f} MiB ({peak / base:.2f} × idle)")
            peak = _pipelined(port, proc)
            worst = max(worst, peak - base)
            print(f"  {'20 connections × 6,000 pipelined, unread':<40} {'':<59} RSS +{(peak - base) / (1 << 20):.0f} MiB "
                  f"({peak / base:.2f} × idle)")
            closed = [_closed_within(port, data, args.wait) for data in
                      (b"", b"GET /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")]
            for name, after in zip(("a connection that sends nothing", "a connection that sends half a head"), closed):
                print(f"  {name:<40} " + (f"closed after {after:.1f} s" if after is not None
                                          else f"still open after {args.wait:g} s"))
            print("targets:")
            print(f"  {'PASS' if worst <= GROWTH << 20 else 'MISS'}  worst RSS growth {worst / (1 << 20):.0f} MiB "
                  f"(target ≤ {GROWTH} MiB over idle)")
            print(f"  {'PASS' if all(c is not None for c in closed) else 'MISS'}  silent connections closed within "
                  f"{args.wait:g} s")
        finally:
            srv.close()


if __name__ == "__main__":
    main()
