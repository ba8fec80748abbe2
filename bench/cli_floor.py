"""The floor that typer and rich set under a CLI command: each part alone, one whole process each.

    .venv/bin/python bench/cli_floor.py [--n 12]

Runs a bare ``python -c pass``, ``import typer``, a one-command typer app invoked with one ``str`` option
(typer 0.29 coerces it through a pydantic TypeAdapter), the same app printing one rich table, and a rich
table alone, interleaved and with the order reversed every round. Each ends with ``os._exit`` so no
interpreter teardown is counted (as `ls`, `show` and `logs` leave). Prints each median, minimum and
median over bare, and the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

EXIT = "\nimport os, sys; sys.stdout.flush(); os._exit(0)"
APP = "import typer\napp = typer.Typer()\n@app.command()\ndef ls(name: str = 'x') -> None:\n    {body}\n" \
      "app(['--name', 'y'], standalone_mode=False)"
TABLE = "from rich.console import Console; from rich.table import Table; t = Table(); t.add_column('A'); " \
        "t.add_row('y'); Console().print(t)"
PARTS = {
    "bare": "pass",
    "import typer": "import typer",
    "typer app, one str option": APP.format(body="pass"),
    "  + one rich table printed": APP.format(body=TABLE),
    "a rich table alone": TABLE,
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=12, help="runs of each part (default 12)")
    n = ap.parse_args().n
    walls: dict[str, list[float]] = {k: [] for k in PARTS}
    load0 = os.getloadavg()[0]
    for i in range(n):
        for name in (list(PARTS) if i % 2 == 0 else list(PARTS)[::-1]):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", PARTS[name] + EXIT], stdout=subprocess.DEVNULL, check=True)
            walls[name].append(time.perf_counter() - t0)
    bare = statistics.median(walls["bare"])
    print(f"python {sys.version.split()[0]}; n={n}; load average {load0:.2f} → {os.getloadavg()[0]:.2f}")
    for name, w in walls.items():
        med = statistics.median(w)
        print(f"  {name:28s} {med * 1e3:7.1f} ms  min {min(w) * 1e3:6.1f}  over bare {(med - bare) * 1e3:6.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
