"""What one ``/serve/`` hop costs, without an HTTP client's own cost in the way: a raw-socket client.

    PYTHONPATH=src:bench .venv/bin/python bench/serve_hop.py [--rounds 3] [--n 2000] [--gap 0] [--no-lane]

Starts its own trainyard server and the trivial replica of ``bench/serve.py`` (``serve_app.py``), a byte
relay to it (``serve_relay.py``, the least a user-space hop costs) and a lean HTTP hop (``serve_lean.py``: parses,
checks the token and routes, nothing more). Each round sends ``--n`` kept-alive GETs on one socket straight to the
replica, through ``/serve/bench/``, through the relay and through the lean hop, in turn, alternating the order,
and reads the CPU time (psutil) of the server around the proxied ones and of each hop around its own. Prints the
medians over rounds of: each way's p50, the hop above direct (proxy, relay, lean), and the CPU per request of the
server, the relay and the lean hop. ``--gap MICROSECONDS`` sleeps that long before each request,
as an HTTP client's own work does between requests (httpx spends ~0.7 ms a request here): with any gap the
processes go idle between requests and wake with colder caches (bench/RESULTS.md, session 20).
``bench/serve.py`` judges the issue's targets with an HTTP client on both sides; this shows where the hop stands
against a relay (bench/RESULTS.md, sessions 16 and 17). A measurement: exits 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from benchserver import BenchServer
from serve import APP, LEAN, RELAY, free_port, parse_with_lane, wait_answer


def _connect(address: str) -> socket.socket:
    host, port = address.rsplit(":", 1)
    s = socket.create_connection((host, int(port)))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def _one(s: socket.socket, request: bytes) -> None:
    """Send ``request`` and read its answer, whole (a content-length answer)."""
    s.sendall(request)
    data = b""
    while True:
        data += s.recv(65536)
        head, sep, rest = data.partition(b"\r\n\r\n")
        if sep:
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            if len(rest) >= length:
                if not head.startswith(b"HTTP/1.1 200"):
                    raise RuntimeError(head.split(b"\r\n")[0].decode())
                return


def p50_us(address: str, path: str, token: str, n: int, gap: float = 0.0) -> float:
    request = f"GET {path} HTTP/1.1\r\nhost: {address}\r\nauthorization: Bearer {token}\r\n\r\n".encode()
    with _connect(address) as s:
        for _ in range(20):  # warm the connection, and the server's route and pool
            _one(s, request)
        times = []
        for _ in range(n):
            if gap:
                time.sleep(gap)
            t = time.perf_counter()
            _one(s, request)
            times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=2000, help="requests per way and round")
    ap.add_argument("--gap", type=float, default=0.0, help="microseconds of sleep before each request")
    args = parse_with_lane(ap)
    with tempfile.TemporaryDirectory(prefix="trainyard-bench-hop-") as tmp:
        srv = BenchServer(Path(tmp) / "home", [sys.executable, "-m", "trainyard", "server", "--container-runtime", "none"])
        relay = lean = None
        try:
            token = (Path(tmp) / "home" / "token").read_text().strip()
            srv.client.services.apply({"name": "bench", "command": [sys.executable, APP], "resources": {"cpu": 0.1},
                                       "service": {"replicas": 1, "readiness": {"path": "/healthz", "period": "1s"}}})
            direct = srv.client.services.wait_ready("bench", 1, timeout=120).replicas[0].address
            server = srv.url.removeprefix("http://")
            relay_at = f"127.0.0.1:{free_port()}"
            relay = subprocess.Popen([sys.executable, RELAY, relay_at.rsplit(":", 1)[1], direct],
                                     stdout=subprocess.DEVNULL)
            lean_at = f"127.0.0.1:{free_port()}"
            lean = subprocess.Popen([sys.executable, LEAN, lean_at.rsplit(":", 1)[1], f"bench={direct}"],
                                    env={**os.environ, "BENCH_TOKEN": token}, stdout=subprocess.DEVNULL)
            wait_answer(f"http://{relay_at}/healthz")
            wait_answer(f"http://{lean_at}/serve/bench/healthz", headers={"Authorization": f"Bearer {token}"})
            proc, relay_proc, lean_proc = (psutil.Process(p.pid) for p in (srv.proc, relay, lean))
            ways = {"direct": (direct, "/predict"), "proxy": (server, "/serve/bench/predict"),
                    "relay": (relay_at, "/predict"), "lean": (lean_at, "/serve/bench/predict")}
            got: dict[str, list[float]] = {k: [] for k in (*ways, "cpu", "relay_cpu", "lean_cpu")}
            for i in range(args.rounds):
                for name in list(ways)[:: 1 if i % 2 == 0 else -1]:
                    watched = {"proxy": (proc, "cpu"), "relay": (relay_proc, "relay_cpu"),
                               "lean": (lean_proc, "lean_cpu")}.get(name)
                    before = sum(watched[0].cpu_times()[:2]) if watched else 0.0
                    got[name].append(p50_us(*ways[name], token, args.n, args.gap / 1e6))
                    if watched:
                        got[watched[1]].append((sum(watched[0].cpu_times()[:2]) - before) / (args.n + 20) * 1e6)
                print(f"round {i + 1}: p50 direct {got['direct'][-1]:.0f} µs, proxy {got['proxy'][-1]:.0f} µs, relay "
                      f"{got['relay'][-1]:.0f} µs, lean {got['lean'][-1]:.0f} µs; CPU per request: the server "
                      f"{got['cpu'][-1]:.0f} µs, the relay {got['relay_cpu'][-1]:.0f} µs, the lean hop "
                      f"{got['lean_cpu'][-1]:.0f} µs", flush=True)
        finally:
            for hop in (relay, lean):
                if hop is not None:
                    hop.terminate()
                    hop.wait()
            srv.client.services.delete("bench")
            while any(s.replicas for s in srv.client.services.list()):
                time.sleep(0.2)
            srv.close()
    m = {k: statistics.median(v) for k, v in got.items()}
    hop, floor, lean_hop = m["proxy"] - m["direct"], m["relay"] - m["direct"], m["lean"] - m["direct"]
    print(f"\nthe /serve/ lane: {'off (--no-lane)' if args.no_lane else 'on'}; gap before each request "
          f"{args.gap:g} µs; load average {os.getloadavg()[0]:.1f}")
    print(f"p50 (median of {args.rounds} rounds): direct {m['direct']:.0f} µs, through /serve/ {m['proxy']:.0f} µs "
          f"(× {m['proxy'] / m['direct']:.2f}), through a byte relay {m['relay']:.0f} µs (× {m['relay'] / m['direct']:.2f}), "
          f"through the lean hop {m['lean']:.0f} µs (× {m['lean'] / m['direct']:.2f})")
    print(f"the hop above direct: /serve/ +{hop:.0f} µs, a byte relay +{floor:.0f} µs, the lean hop +{lean_hop:.0f} µs"
          + (f" (/serve/ × {hop / floor:.1f} the relay's)" if floor > 0 else ""))
    print(f"CPU per request: the server (proxied) {m['cpu']:.0f} µs, the byte relay {m['relay_cpu']:.0f} µs, "
          f"the lean hop {m['lean_cpu']:.0f} µs")


if __name__ == "__main__":
    main()
