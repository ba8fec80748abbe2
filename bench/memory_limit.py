"""Does the memory limit hold against a fast burst, and what does a cgroup cost the launcher?

    PYTHONPATH=src .venv/bin/python bench/memory_limit.py [--runs 10] [--n 20] [--sampled]

Runs the launcher (``python -m trainyard.launch``, as the local engine does
without its zygote) against a tiny in-process report endpoint:

1. ``--runs`` times a job that bursts to ~500 MB in 10 MiB pieces under a
   100 MiB limit, holds it 0.2 s and exits 0; prints each outcome and the most
   the job ever held (it prints its progress, so a late kill shows).
2. ``--n`` times, interleaved, a ``python -c pass`` job with a 1 GiB limit, in
   a cgroup (where the host offers one) and sampled; prints the median and p90
   wall time of a whole launcher run.

``--sampled`` runs part 1 without cgroups. Run it against older code by putting
that code's ``src`` on PYTHONPATH: the launch.json it writes then omits
``cgroup_root``. A measurement: exits 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SPIKE = """
import time
held = []
for i in range(50):
    held.append(bytearray(10 << 20))
    print("held", len(held) * 10, flush=True)
time.sleep(0.2)
"""


class _Ack(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        body = b'{"cancel": false}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def launch(folder: Path, url: str, command: list[str], limit: int, cgroups: bool) -> tuple[dict, float]:
    """One launcher run to the end: its result and wall time."""
    folder.mkdir(parents=True)
    config = {"job_id": "bench", "attempt_id": folder.name, "attempt": 1, "server": url, "command": command,
              "memory_limit": limit, "exit_report_deadline": 10.0}
    if not cgroups:
        config["cgroup_root"] = None
    (folder / "launch.json").write_text(json.dumps(config))
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "trainyard.launch", str(folder)], check=True, capture_output=True)
    took = time.perf_counter() - start
    return json.loads((folder / "result.json").read_text()), took


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--sampled", action="store_true", help="part 1 without cgroups")
    args = parser.parse_args()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Ack)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "spike.py").write_text(SPIKE)
        print(f"1. a ~500 MB burst under a 100 MiB limit, {args.runs} runs ({'sampled' if args.sampled else 'default'})")
        outcomes: dict[str, int] = {}
        for i in range(args.runs):
            result, took = launch(root / f"spike-{i}", url, [sys.executable, str(root / "spike.py")], 100 << 20,
                                  not args.sampled)
            log = (root / f"spike-{i}" / "output.log").read_text()
            held = max((int(n) for n in re.findall(r"^held (\d+)$", log, re.M)), default=0)
            outcomes[result["reason"]] = outcomes.get(result["reason"], 0) + 1
            print(f"   {result['reason']:<10} exit {result['exit_code']}, held at most {held:3d} MiB, "
                  f"{took:.2f} s: {result['message']}")
        print(f"   outcomes: {outcomes}")
        print(f"2. launcher run of `python -c pass` with a 1 GiB limit, {args.n} each, interleaved")
        times: dict[str, list[float]] = {"cgroup": [], "sampled": []}
        for i in range(args.n):
            order = ["cgroup", "sampled"] if i % 2 == 0 else ["sampled", "cgroup"]
            for kind in order:
                _, took = launch(root / f"pass-{kind}-{i}", url, [sys.executable, "-c", "pass"], 1 << 30,
                                 kind == "cgroup")
                times[kind].append(took * 1000)
        for kind, ms in times.items():
            p90 = statistics.quantiles(ms, n=10)[-1] if len(ms) > 1 else ms[0]
            print(f"   {kind:<8} median {statistics.median(ms):6.1f} ms, p90 {p90:6.1f} ms")
    httpd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
