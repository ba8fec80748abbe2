"""Node maintenance with real processes: cordon keeps new work off, drain checkpoints and requeues, uncordon resumes."""

import json

import pytest

from tests.e2e import test_identity as identity
from tests.e2e.helpers import py_job, until
from tests.e2e.test_preemption import RESUMABLE

pytestmark = pytest.mark.slow


def test_drain_checkpoints_and_requeues_its_work_and_uncordon_lets_it_resume(server):
    sdk = server.client()
    node = sdk.nodes()[0].name
    low = sdk.submit(py_job(RESUMABLE, name="long", resources={"cpu": 1}, grace_period=5))
    until(lambda: "past step 3" in low.logs(), timeout=30)
    drained = server.cli("nodes", "drain", node, "--reason", "swap a DIMM", "--timeout", "60")
    assert drained.returncode == 0, drained.stderr
    assert f"node {node} drained: nothing runs there" in drained.stdout and low.id not in drained.stderr
    job = low.refresh()
    assert job.status.value == "pending" and job.attempts[0].reason == "NodeDrained"
    assert job.attempts[0].status.value == "cancelled" and job.attempts[0].preempted_by is None
    until(lambda: f"waits for cordoned node {node}" in (low.refresh().reason or ""))
    # a new job waits too, naming the node; the table says why and who
    other = sdk.submit(py_job("print('fresh')", name="fresh"))
    until(lambda: f"cordoned node {node}" in (other.refresh().reason or ""))
    table = server.cli("nodes", env={"COLUMNS": "200"})
    assert "drained" in table.stdout and "swap a DIMM (local)" in table.stdout, table.stdout
    listed = json.loads(server.cli("nodes", "-o", "json").stdout)
    assert listed[0]["cordon"]["reason"] == "swap a DIMM" and listed[0]["cordon"]["drained_at"]
    # back in service: the drained job resumes from its checkpoint and is not charged a retry
    assert server.cli("nodes", "uncordon", node).returncode == 0
    info = low.wait(timeout=60)
    assert info.status.value == "succeeded" and [a.reason for a in info.attempts] == ["NodeDrained", "Succeeded"]
    logs = low.logs()
    saved = int(logs.split("checkpointed at ")[1].split()[0])
    assert saved >= 3 and f"resumed at {saved}" in logs and "done at 40" in logs
    assert other.wait(timeout=30).status.value == "succeeded"
    assert sdk.node(node).cordon is None
    audited = {e.action: e for e in sdk.identity.audit()}
    assert audited["node.drain"].target == node and audited["node.drain"].detail["attempts"] == [info.attempts[0].id]
    assert "node.uncordon" in audited


def test_cordon_leaves_running_work_alone_and_survives_a_restart(server, tmp_path):
    sdk = server.client()
    node = sdk.nodes()[0].name
    gate = tmp_path / "go"  # the job runs until the test has cordoned the node, however slow the machine
    running = sdk.submit(py_job(f"import os, time; print('up', flush=True)\nwhile not os.path.exists({str(gate)!r}): "
                                "time.sleep(0.05)\nprint('finished')", name="running"))
    until(lambda: "up" in running.logs(), timeout=30)
    cordoned = server.cli("nodes", "cordon", node, "-r", "kernel update")
    assert cordoned.returncode == 0 and "1 attempt there go on" in cordoned.stdout, cordoned.stdout
    waiting = sdk.submit(py_job("print('later')", name="waiting"))
    gate.touch()
    assert running.wait(timeout=30).status.value == "succeeded"  # not stopped
    until(lambda: f"waits for cordoned node {node}" in (waiting.refresh().reason or ""))
    server.stop()
    server.start()  # the cordon is the database's, not the process's
    sdk = server.client()
    assert sdk.node(node).cordon.reason == "kernel update"
    assert sdk.get(waiting.id).status.value == "pending"
    assert server.cli("nodes", "uncordon", node).returncode == 0
    assert sdk.job(waiting.id).wait(timeout=30).status.value == "succeeded"


def test_unknown_nodes_and_bad_reasons_are_refused_by_name(server):
    bad = server.cli("nodes", "cordon", "no-such-node")
    assert bad.returncode == 1 and "no such node: no-such-node" in bad.stderr
    node = server.client().nodes()[0].name
    long = server.cli("nodes", "cordon", node, "--reason", "x" * 501)
    assert long.returncode == 2 and "reason: String should have at most 500 characters" in long.stderr, long.stderr
    two_lines = server.cli("nodes", "drain", node, "--reason", "one\ntwo")
    assert two_lines.returncode == 2 and "reason: a reason is one line" in two_lines.stderr, two_lines.stderr
    assert server.client().node(node).cordon is None


def test_only_an_admin_cordons_and_everyone_sees_it(auth_server):
    srv = auth_server
    admin = identity.As(srv, (srv.home / "first-admin-token").read_text().strip())
    made = admin.post("/api/v1/users", json={"name": "mia", "team": "vision", "role": "maintainer"})
    assert made.status_code == 201, made.text
    mia = identity.As(srv, made.json()["token"]["secret"])
    node = admin.get("/api/v1/nodes").json()[0]["name"]
    for action in ("cordon", "drain", "uncordon"):
        refused = mia.post(f"/api/v1/nodes/{node}/{action}", json={"reason": "mine now"})
        assert refused.status_code == 403 and "only an admin" in refused.json()["message"], refused.text
    assert admin.post(f"/api/v1/nodes/{node}/cordon", json={"reason": "rack move"}).status_code == 200
    seen = mia.get(f"/api/v1/nodes/{node}").json()
    assert (seen["cordon"]["reason"], seen["cordon"]["by"]) == ("rack move", "admin")
    entries = [e for e in admin.get("/api/v1/audit").json() if e["action"] == "node.cordon"]
    assert entries and entries[0]["target"] == node and entries[0]["user"] == "admin"
