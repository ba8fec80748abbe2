"""A real Prometheus scrapes a real server running real jobs: PromQL through Prometheus's HTTP API sees
the pending and running counts, a job's own memory use through the launcher's samples, and an ended
job's series go away."""

from __future__ import annotations

import csv
import io
import json
import shutil
import socket
import subprocess
import sys

import httpx
import pytest

from tests.conftest import need
from tests.e2e.helpers import py_job, until
from tests.support.servers import ServerProcess

pytestmark = pytest.mark.slow

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
ALLOCATE = "x = bytearray(300 << 20); x[::4096] = b'1' * len(x[::4096]); import time; time.sleep(60)"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(tmp_path):
    config = tmp_path / "server.yaml"
    config.write_text("sample_every: 0.5\n")
    srv = ServerProcess(tmp_path / "home", ["--cpus", "2", "--memory", "4Gi", "--config", str(config)])
    srv.start()
    yield srv
    srv.stop_all()


@pytest.fixture
def prometheus(tmp_path, server):
    need(shutil.which(PROMETHEUS) is not None, "Prometheus is not installed (apt-get install prometheus)")
    target = server.url.removeprefix("http://")
    (tmp_path / "prometheus.yml").write_text(f"""
global: {{scrape_interval: 1s, evaluation_interval: 1s}}
scrape_configs:
  - job_name: trainyard
    authorization: {{credentials: {server.token}}}
    static_configs: [{{targets: ["{target}"]}}]
""")
    port = free_port()
    log = open(tmp_path / "prometheus.log", "wb")
    proc = subprocess.Popen([PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}",
                             f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    until(lambda: _ready(url), timeout=60, every=0.2)
    yield url
    proc.terminate()
    proc.wait(timeout=20)


def _ready(url: str) -> bool:
    try:
        return httpx.get(url + "/-/ready", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def query(prom: str, promql: str) -> list[dict]:
    r = httpx.get(prom + "/api/v1/query", params={"query": promql}, timeout=5)
    assert r.status_code == 200, r.text
    return r.json()["data"]["result"]


def value(prom: str, promql: str) -> float | None:
    result = query(prom, promql)
    return float(result[0]["value"][1]) if result else None


def test_prometheus_sees_pending_and_running_jobs_and_a_jobs_memory(server, prometheus):
    c = server.client()
    hog = c.submit(py_job(ALLOCATE, name="hog", resources={"cpu": 2}))
    until(lambda: hog.status == "running", timeout=60)
    waiting = [c.submit(py_job("pass", name=f"wait{i}", resources={"cpu": 1})) for i in range(3)]

    until(lambda: value(prometheus, "sum(trainyard_running_jobs)") == 1
          and value(prometheus, "sum(trainyard_pending_jobs)") == 3, timeout=60, every=0.5)
    assert value(prometheus, 'sum(trainyard_pending_jobs{reason="unplanned"})') in (None, 0)
    # the launcher's samples show the 300 MiB the job holds, in Prometheus and in the job's own metrics
    until(lambda: (value(prometheus, f'trainyard_job_memory_usage_bytes{{job_id="{hog.id}"}}') or 0) > 250 << 20,
          timeout=60, every=0.5)
    assert not [m for m in hog.metrics() if m.name.startswith("system/")]  # the job's own, unless asked
    memory = [m.value for m in hog.metrics(system=True) if m.name == "system/memory_bytes"]
    assert memory and max(memory) > 250 << 20
    assert c.monitoring.job_usage(hog.id)[0].peak_memory_bytes > 250 << 20

    hog.cancel()
    hog.wait(timeout=60)
    # gone from the server's next scrape, and so stale in Prometheus
    text = httpx.get(server.url + "/metrics", headers=server.headers, timeout=5).text
    assert hog.id not in text
    until(lambda: not query(prometheus, f'trainyard_job_memory_usage_bytes{{job_id="{hog.id}"}}'),
          timeout=30, every=0.5)
    for w in waiting:
        assert w.wait(timeout=60).status.value == "succeeded"
    until(lambda: value(prometheus, "sum(trainyard_pending_jobs)") in (None, 0), timeout=30, every=0.5)
    until(lambda: value(prometheus, 'sum(trainyard_attempts_ended_total{reason="Succeeded"})') == 3,
          timeout=30, every=0.5)
    assert value(prometheus, 'sum(trainyard_attempts_ended_total{reason="Cancelled"})') == 1

    # and the CLI says the same: events, resource use in `show`, usage
    events = json.loads(server.cli("events", hog.id, "-o", "json").stdout)
    assert [e["new_status"] for e in events][:3] == ["pending", "starting", "running"]
    assert events[-1]["new_status"] == "cancelled" and events[-1]["actor"] == "user"
    shown = server.cli("show", hog.id).stdout
    assert "resource use" in shown and "system/memory_bytes" not in shown
    assert "resource use" not in hog.logs()  # the peak is in `show`, not in the job's own log
    rows = list(csv.DictReader(io.StringIO(server.cli("usage", "--by", "queue", "-o", "csv").stdout)))
    assert [(r["queue"], r["attempts"]) for r in rows] == [("default", "4")] and float(rows[0]["cpu_hours"]) > 0
    bad = server.cli("usage", "--since", "lately")
    assert bad.returncode == 2 and "since" in bad.stderr


def test_a_bad_server_config_names_the_setting(tmp_path):
    config = tmp_path / "server.yaml"
    config.write_text("prices: {gpu_hour: {A100: -1}}\n")
    r = subprocess.run([sys.executable, "-m", "trainyard", "server", "--home", str(tmp_path / "h"), "--config",
                        str(config)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "prices" in r.stderr and "A100" in r.stderr
    config.write_text("idle_gpu_treshold: 5\n")
    r = subprocess.run([sys.executable, "-m", "trainyard", "server", "--home", str(tmp_path / "h"), "--config",
                        str(config)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "idle_gpu_treshold" in r.stderr
