"""What a user's API token costs a request, against the server's own token, on one server with --auth.

One command: ``PYTHONPATH=src .venv/bin/python bench/auth.py [--n 400]``. Alternates the two
tokens over keep-alive connections on ``GET /api/v1/jobs?limit=1`` (the guard, the route and
one store read), and prints medians, p90 and the ratio user / server token. The server's own
token is compared in memory; a user's costs one indexed lookup by hash in a worker thread
(and a write of ``last_used_at`` at most once a minute). PASS when the ratio is at most 1.5.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from benchserver import BenchServer  # noqa: E402

TARGET = 1.5


def p90(xs: list[float]) -> float:
    return sorted(xs)[int(0.9 * (len(xs) - 1))]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--db", default=None, help="database URL (default SQLite in the bench home)")
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="trainyard-bench-auth-"))
    argv = [sys.executable, "-m", "trainyard", "server", "--auth", *(["--db", args.db] if args.db else [])]
    srv = BenchServer(home, argv)
    try:
        made = srv.client.identity.create_user("alice", team="vision", role="member")
        tokens = {"server token": (home / "token").read_text().strip(), "user token": made.token.secret}
        clients = {k: httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {v}"}) for k, v in tokens.items()}
        times: dict[str, list[float]] = {k: [] for k in tokens}
        for i in range(args.n + 20):
            for name, c in clients.items():
                t = time.perf_counter()
                assert c.get("/api/v1/jobs", params={"limit": 1}).status_code == 200
                if i >= 20:  # warm-up: connections, imports, the first last_used_at write
                    times[name].append((time.perf_counter() - t) * 1000)
        med = {k: statistics.median(v) for k, v in times.items()}
        for k, v in times.items():
            print(f"{k:>12}: median {med[k]:.2f} ms, p90 {p90(v):.2f} ms over {len(v)} requests")
        ratio = med["user token"] / med["server token"]
        print(f"user / server token: {ratio:.2f}x (target <= {TARGET}) {'PASS' if ratio <= TARGET else 'MISS'}")
        return 0
    finally:
        srv.close()


if __name__ == "__main__":
    raise SystemExit(main())
