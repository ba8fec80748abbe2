"""The scheduler preload that keeps a cluster's Dask dashboard to holders of its certificate
(``services/dask_dashboard_tls.py``), in a real ``distributed.Scheduler`` of its own process."""

import subprocess
import sys
from pathlib import Path

from tests.conftest import need_module

need_module("distributed", "pip install 'trainyard[dask]'")

PRELOAD = Path(__file__).parents[2] / "src" / "trainyard" / "services" / "dask_dashboard_tls.py"
SCHEDULER = """
import asyncio, socket, sys
from distributed import Scheduler

async def main():
    async with Scheduler(host="127.0.0.1", port=0, dashboard_address="127.0.0.1:0", preload=[sys.argv[1]]) as s:
        port = s.http_server.port
        try:
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
            print("dashboard answers")
        except OSError:
            print("dashboard closed")

asyncio.run(main())
"""


def test_a_dask_whose_dashboard_would_take_anyone_gets_no_dashboard():
    # given a scheduler whose dashboard Dask serves without TLS (no certificate configured: the context the
    # preload makes mutual is never made, as with a Dask that made it some other way)
    out = subprocess.run([sys.executable, "-c", SCHEDULER, PRELOAD.read_text()], capture_output=True, text=True,
                         timeout=120)
    # then the preload stops the dashboard, and says why
    assert "dashboard closed" in out.stdout, out.stdout + out.stderr
    assert "would take clients without the cluster's certificate: stopped" in out.stderr, out.stderr
