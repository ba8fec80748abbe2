"""Queues and preemption with real processes: the victim gets SIGTERM, checkpoints, and resumes."""

import json

import pytest

from tests.e2e.helpers import py_job, until

pytestmark = pytest.mark.slow

# Counts to 40, one step every 0.1 s, resuming from its checkpoint; on SIGTERM it saves and exits.
RESUMABLE = """
import json, os, signal, sys, time
ck = os.path.join(os.environ["TRAINYARD_CHECKPOINT_DIR"], "step.json")
step = json.load(open(ck))["step"] if os.path.exists(ck) else 0
def save(*_):
    json.dump({"step": step}, open(ck, "w"))
    print("checkpointed at", step, flush=True)
    sys.exit(143)
signal.signal(signal.SIGTERM, save)
print("resumed at", step, flush=True)  # after the handler
first, held_until = step == 0, time.time() + 60
while step < 40:
    time.sleep(0.1)
    # the first attempt holds at step 3 until the test stops it (a minute at most): on a loaded machine the test's
    # next command may take seconds, and the job must not have ended meanwhile
    if first and step == 3 and time.time() < held_until:
        continue
    step += 1
    if step == 3:  # the test stops it once it reads this line, so a checkpoint always holds progress
        print("past step 3", flush=True)
print("done at", step, flush=True)
"""


def test_preempted_work_checkpoints_requeues_and_resumes(server):
    sdk = server.client()
    low = sdk.submit(py_job(RESUMABLE, name="low", priority="low", resources={"cpu": 2}, grace_period=5))
    until(lambda: "past step 3" in low.logs(), timeout=30)
    high = sdk.submit(py_job("print('urgent work')", name="high", priority="urgent", resources={"cpu": 2}))
    assert high.wait(timeout=60).status.value == "succeeded"
    info = low.wait(timeout=60)
    assert info.status.value == "succeeded"
    first, second = info.attempts
    assert (first.reason, first.preempted_by) == ("Preempted", high.id)
    logs = low.logs()
    saved = int(logs.split("checkpointed at ")[1].split()[0])
    assert saved >= 3 and f"resumed at {saved}" in logs and "done at 40" in logs


def test_queue_commands_set_a_quota_the_scheduler_keeps(server, tmp_path):
    r = server.cli("queue", "create", "team-a", "--gpu", "A100=1", "--jobs", "3", "--no-borrowing")
    assert r.returncode == 0, r.stderr
    bad = server.cli("queue", "create", "team-b", "--gpu", "A100:1")
    assert bad.returncode == 2 and "--gpu: 'A100:1'" in bad.stderr
    sdk = server.client()
    a = sdk.submit(py_job("import time; time.sleep(30)", queue="team-a", resources={"gpu": 1, "cpu": 0.5}))
    b = sdk.submit(py_job("print(1)", queue="team-a", resources={"gpu": 1, "cpu": 0.5}))
    until(lambda: a.refresh().status.value == "running", timeout=30)
    until(lambda: "quota" in (b.refresh().reason or ""))
    shown = server.cli("show", b.id)
    assert "pending because" in shown.stdout and "0 jobs ahead in queue team-a" in shown.stdout
    listed = json.loads(server.cli("queue", "ls", "-o", "json").stdout)
    team_a = next(q for q in listed if q["queue"]["name"] == "team-a")
    assert (team_a["usage"]["running"], team_a["usage"]["gpu"], team_a["pending"]) == (1, {"A100": 1}, 1)
    assert "1/1 A100" in server.cli("queue", "show", "team-a").stdout
    a.cancel()
    assert b.wait(timeout=60).status.value == "succeeded"
