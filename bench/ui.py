"""The web UI's three targets (issue 12) in one command: the jobs page with 100,000 jobs in the store
(server time, SQL queries per request), a log line reaching an open browser, and a chart of 100,000
points drawn.

    PYTHONPATH=src:bench .venv/bin/python bench/ui.py [--db postgresql://…]

Runs ``ui_jobs_page.py`` (the server side, in-process) and then ``ui_browser.py`` (a real server and
Debian's Chromium), each in its own process so that neither's memory or threads colour the other's
figures; each prints its own table, baselines and PASS/MISS. Exits 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", help="an empty database for the jobs page (default: SQLite in a temporary folder)")
    ap.add_argument("--jobs", type=int, default=100_000)
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))}
    page = [sys.executable, str(HERE / "ui_jobs_page.py"), "--jobs", str(args.jobs), *(["--db", args.db] if args.db else [])]
    for cmd in (page, [sys.executable, str(HERE / "ui_browser.py")]):
        print(f"\n$ {' '.join(cmd[1:])}", flush=True)
        subprocess.run(cmd, env=env, check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
