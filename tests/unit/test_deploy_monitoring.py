"""The shipped Prometheus alerts and Grafana dashboard: promtool checks and tests the rules, and every
metric either of them names is one the server's collector exposes."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import need
from trainyard.scheduler.stats import CycleStats
from trainyard.services.metrics import TrainyardCollector, registry
from trainyard.spec.records import NodeInfo
from trainyard.store import Store

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
ALERTS = DEPLOY / "prometheus" / "alerts.yml"
DASHBOARD = DEPLOY / "grafana" / "trainyard.json"
NAME = re.compile(r"\btrainyard_[a-z_]+")
SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_created")


def promtool(*args: str) -> subprocess.CompletedProcess:
    tool = shutil.which("promtool")
    need(tool is not None, "promtool is not installed (apt-get install prometheus)")
    return subprocess.run([tool, *args], cwd=ALERTS.parent, capture_output=True, text=True, timeout=60)


def test_promtool_checks_the_alert_rules():
    r = promtool("check", "rules", ALERTS.name)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "6 rules found" in r.stdout


def test_promtool_runs_the_alert_test_cases():
    r = promtool("test", "rules", "alerts_test.yml")
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr


def exposed(tmp_path) -> set[str]:
    """Every family name the collector writes, over a store with one of everything to show."""
    store = Store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    node = NodeInfo(name="n", cpu=4, memory=2**30, gpu=1, gpu_type="A100", gpu_ids=["0"])
    stats = CycleStats()
    stats.cycle(0.01)
    text = generate_latest(registry(TrainyardCollector(store, lambda: [node], stats))).decode()
    store.close()
    return {family.name for family in text_string_to_metric_families(text)}


def used_names(text: str) -> set[str]:
    names = set()
    for name in NAME.findall(text):
        for suffix in SUFFIXES:
            if name.endswith(suffix):
                name = name.removesuffix(suffix)
                break
        names.add(name)
    return names


def test_the_dashboard_and_alerts_name_only_metrics_the_server_exposes(tmp_path):
    have = exposed(tmp_path)
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = " ".join(t["expr"] for p in dashboard["panels"] for t in p.get("targets", []))
    for where, text in (("dashboard", exprs), ("alerts", ALERTS.read_text())):
        unknown = used_names(text) - have
        assert not unknown, f"{where} names metrics the server does not expose: {sorted(unknown)}"
    # the four views the issue asks for
    assert {p["title"] for p in dashboard["panels"] if p["type"] == "row"} == {"Cluster", "Queues", "Jobs", "GPUs"}
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])


@pytest.mark.parametrize("name", ["trainyard_pending_jobs", "trainyard_running_jobs",
                                  "trainyard_admission_wait_time_seconds", "trainyard_attempts_ended",
                                  "trainyard_preemptions", "trainyard_scheduler_cycle_duration_seconds",
                                  "trainyard_node_capacity", "trainyard_node_used", "trainyard_job_cpu_usage_percent",
                                  "trainyard_job_memory_usage_bytes", "trainyard_job_gpu_utilization_percent",
                                  "trainyard_job_gpu_memory_usage_bytes", "trainyard_job_gpu_idle"])
def test_the_collector_exposes_each_family_the_issue_names(tmp_path, name):
    assert name in exposed(tmp_path)
