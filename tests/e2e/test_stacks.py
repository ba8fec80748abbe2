"""`trainyard stack JOB` (``Client.stacks``, ``POST/GET /api/v1/jobs/{id}/stacks``) against a real server: each
running replica's launcher dumps its command's Python stacks with py-spy; who may ask, and what is refused."""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.helpers import PY, until
from tests.e2e.test_identity import As, cli_as, last_line

pytestmark = pytest.mark.slow

STUCK = """
import threading, time
def prefetch_batches():
    while True:
        time.sleep(0.05)
def wait_for_allreduce():
    print("waiting", flush=True)
    time.sleep(600)
threading.Thread(target=prefetch_batches, name="prefetcher", daemon=True).start()
wait_for_allreduce()
"""
# bash stays the replica's first process (not exec'd: a command follows), so one process is not Python
GANG = {"name": "stuck", "command": ["bash", "-c", f"{PY} -c '{STUCK}'; true"], "replicas": 2, "distributed": "torch",
        "resources": {"cpu": 0.5}}


def replicas_running(c, job_id: str) -> bool:  # noqa: ANN001
    attempts = c.get(job_id).attempts
    return bool(attempts) and [r.status.value for r in attempts[-1].replicas] == ["running"] * 2


def test_stack_dumps_every_replica_and_refuses_what_it_cannot(server):
    c = server.client()
    job = c.submit(GANG)
    until(lambda: replicas_running(c, job.id), timeout=60)
    until(lambda: "".join(ch.data for ch in c.logs(job.id)).count("waiting") == 2, timeout=60)

    out = server.cli("stack", job.id)

    assert out.returncode == 0, out.stderr
    assert "replica 0 on " in out.stdout and "replica 1 on " in out.stdout
    assert out.stdout.count("wait_for_allreduce (") == 2 and out.stdout.count('): "prefetcher"') == 2
    assert out.stdout.count("not Python: ") == 2 and "(bash)" in out.stdout
    [one] = job.stacks(replica=1)  # the handle asks through Client.stacks
    assert (one.replica, one.status, one.error) == (1, "done", None) and "prefetch_batches (" in one.text
    deep = server.cli("stack", job.id, "-r", "0", "--native", "--locals")
    assert deep.returncode == 0, deep.stderr
    assert "(libc" in deep.stdout  # a C frame under time.sleep, in glibc
    kept = httpx.get(f"{server.url}/api/v1/jobs/{job.id}/stacks", headers=server.headers).json()
    assert [d["replica"] for d in kept] == [0, 1, 1, 0] and [d["status"] for d in kept] == ["done"] * 4
    assert [(d["native"], d["locals"]) for d in kept] == [(True, True)] + [(False, False)] * 3
    assert kept[0]["requested_by"] == "local" and kept[0]["answered_at"] >= kept[0]["requested_at"]

    # what is refused, and why
    gone = server.cli("stack", job.id, "-r", "5")
    assert gone.returncode == 1 and f"replica 5 of job {job.id} is not running" in gone.stderr
    for body, field in (({"replica": -1}, "replica"), ({"replica": "1"}, "replica"), ({"replicas": 1}, "replicas")):
        r = httpx.post(f"{server.url}/api/v1/jobs/{job.id}/stacks", json=body, headers=server.headers)
        assert r.status_code == 422 and field in r.text, (body, r.text)
    assert server.cli("stack", "j-0000000000").stderr.count("no such job: j-0000000000") == 1
    c.cancel(job.id)
    c.wait(job.id, timeout=60)
    ended = server.cli("stack", job.id)
    assert ended.returncode == 1 and f"job {job.id} has no running command (cancelled)" in ended.stderr
    # the dumps go with the job
    c.delete(job.id)
    assert httpx.get(f"{server.url}/api/v1/jobs/{job.id}/stacks", headers=server.headers).status_code == 404


def test_who_may_ask_for_stacks(auth_server):
    admin = (auth_server.home / "first-admin-token").read_text().strip()
    tokens = {n: last_line(cli_as(auth_server, admin, "admin", "user", "create", n, "--team", "vision", "--role", r))
              for n, r in (("alice", "member"), ("carol", "viewer"), ("erin", "member"))}
    assert cli_as(auth_server, admin, "queue", "create", "vision-q", "--team", "vision").returncode == 0
    alice, carol, erin = (As(auth_server, tokens[n]) for n in ("alice", "carol", "erin"))
    job = alice.submit({"name": "s", "command": [PY, "-c", STUCK], "queue": "vision-q",
                        "resources": {"cpu": 0.5}}).json()["id"]
    until(lambda: "waiting" in alice.get(f"/api/v1/jobs/{job}/logs").text, timeout=60)

    # a viewer and another member of the team read the job, but may not pause its processes
    for who in (carol, erin):
        refused = who.post(f"/api/v1/jobs/{job}/stacks")
        assert refused.status_code == 403 and "dump the stacks of your own jobs only" in refused.json()["message"]
        assert who.get(f"/api/v1/jobs/{job}/stacks").json() == []
    out = cli_as(auth_server, tokens["alice"], "stack", job, "-o", "json")
    assert out.returncode == 0, out.stderr
    assert "wait_for_allreduce (" in out.stdout
    assert carol.get(f"/api/v1/jobs/{job}/stacks").json()[0]["status"] == "done"
    audit = As(auth_server, admin).get("/api/v1/audit").json()
    assert [(e["user"], e["target"]) for e in audit if e["action"] == "job.stack"] == [("alice", job)]
    alice.post(f"/api/v1/jobs/{job}/cancel")
