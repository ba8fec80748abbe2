"""Monitoring through the API in-process (fake engine), on SQLite and PostgreSQL: status events,
resource samples and idle GPUs, /metrics series, and usage accounting."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from tests.support.waiting import until
from trainyard.api.app import create_app
from trainyard.config import Prices, ServerSettings
from trainyard.engines.fake import FakeEngine
from trainyard.launch.sampling import Sampler
from trainyard.sdk.client import Client
from trainyard.services.platform import Platform
from trainyard.spec.records import NodeInfo
from trainyard.store import tables as t

pytestmark = pytest.mark.postgres

NODES = [NodeInfo(name="a", cpu=8, memory=16 * 2**30, gpu=2, gpu_type="A100", gpu_ids=["0", "1"])]


@pytest.fixture
def env(db_url, tmp_path):
    engine = FakeEngine(NODES)
    settings = ServerSettings(home=tmp_path / "home", db=db_url, token="s3cret", idle_gpu_threshold=5,
                              idle_gpu_period=2, prices=Prices(gpu_hour={"A100": 2.0}, cpu_hour=0.5))
    platform = Platform(settings, engine=engine)
    with TestClient(create_app(platform, "http://testserver"), headers={"Authorization": "Bearer s3cret"}) as tc:
        sdk = Client("http://testserver", token="s3cret", transport=tc._transport)
        yield tc, sdk, engine, platform


def report(tc, engine, attempt_id, **body):
    r = tc.post(f"/internal/attempts/{attempt_id}/replicas/0/report", json=body,
                headers=engine.launcher_headers(attempt_id))
    assert r.status_code == 200, r.text
    return r.json()


def launched(engine, n=1):
    return until(lambda: list(engine.launched)[n - 1] if len(engine.launched) >= n else None)


def scrape(tc) -> dict[tuple[str, tuple], float]:
    r = tc.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(r.text) for s in fam.samples}


def series(samples, name, **labels):
    return {k: v for k, v in samples.items() if k[0] == name and all(dict(k[1]).get(a) == b for a, b in labels.items())}


class FakeNVML:
    """NVML's calls the sampler makes, with GPUs at a fixed utilisation."""

    def __init__(self, util: float, used: int = 2**30) -> None:
        self.util, self.used = util, used

    def nvmlInit(self): pass
    def nvmlShutdown(self): pass
    def nvmlDeviceGetHandleByIndex(self, i): return i

    def nvmlDeviceGetUtilizationRates(self, h):
        return type("U", (), {"gpu": self.util})()

    def nvmlDeviceGetMemoryInfo(self, h):
        return type("M", (), {"used": self.used})()


def sampled_lines(tmp_path, util: float, times: list[float]) -> list[str]:
    """Metric lines as the launcher's sampler writes them, one per time in ``times``."""
    import psutil

    path = tmp_path / f"metrics-{util}.jsonl"
    sampler = Sampler(str(path), ["0"], every=1, nvml=FakeNVML(util))
    sampler._open_gpus()
    child = subprocess.Popen(["sleep", "30"])  # a process tree to sample, as a job's
    try:
        for ts in times:
            values = sampler.sample(psutil)
            path.open("a").write(json.dumps({"step": None, "ts": ts, "values": values}) + "\n")
    finally:
        child.kill()
        child.wait()
    return path.read_text().splitlines()


def test_every_status_change_is_an_event_with_who_caused_it(env):
    tc, sdk, engine, _ = env
    job = sdk.submit({"name": "ev", "command": "true"})
    attempt_id = launched(engine)
    report(tc, engine, attempt_id, phase="running", pid=1)
    report(tc, engine, attempt_id, phase="exited", pid=1, result={"exit_code": 0, "reason": "Succeeded", "outputs": []})
    job.wait(timeout=5)
    events = tc.get(f"/api/v1/jobs/{job.id}/events").json()
    assert [(e["old_status"], e["new_status"], e["actor"]) for e in events] == [
        (None, "pending", "user"), ("pending", "starting", "scheduler"), ("starting", "running", "launcher"),
        ("running", "succeeded", "launcher")]
    assert all(b["ts"] >= a["ts"] for a, b in zip(events, events[1:]))
    # a job that waits for room (a holder has the whole node), cancelled: the cancel is the user's
    sdk.submit({"name": "holder", "command": "sleep", "resources": {"cpu": 8}})
    launched(engine, 2)
    later = sdk.submit({"name": "later", "command": "true", "resources": {"cpu": 8}})
    sdk.cancel(later.id)
    assert later.wait(timeout=10).status.value == "cancelled"
    changes = [(e["old_status"], e["new_status"], e["actor"]) for e in tc.get(f"/api/v1/jobs/{later.id}/events").json()]
    assert changes == [(None, "pending", "user"), ("pending", "cancelled", "user")]
    assert tc.get("/api/v1/jobs/j-nosuchjob/events").status_code == 404


def test_samples_give_resource_use_and_idle_gpus_flag_the_job(env, tmp_path):
    tc, sdk, engine, platform = env
    job = sdk.submit({"name": "gpu", "command": "train", "resources": {"gpu": 1}})
    attempt_id = launched(engine)
    now = time.time()
    lines = sampled_lines(tmp_path, util=0.0, times=[now, now + 1, now + 2.5])
    report(tc, engine, attempt_id, phase="running", pid=1, metrics={"offset": 0, "lines": lines})
    info = sdk.get(job.id)
    assert info.status.value == "running" and "GPUs idle" in info.reason
    usage = tc.get(f"/api/v1/jobs/{job.id}/usage").json()
    assert usage[0]["samples"] == 3 and usage[0]["gpu_util"] == 0 and usage[0]["mean_gpu_util"] == 0
    assert usage[0]["idle_flagged_at"] is not None and usage[0]["peak_memory_bytes"] >= usage[0]["memory_bytes"] > 0
    samples = scrape(tc)
    assert list(series(samples, "trainyard_job_gpu_idle", job_id=job.id).values()) == [1]
    assert list(series(samples, "trainyard_job_gpu_utilization_percent", job_id=job.id).values()) == [0]
    assert list(series(samples, "trainyard_job_gpu_memory_usage_bytes", job_id=job.id).values()) == [2**30]
    # the system metrics sit next to the job's own
    assert {"system/gpu_util", "system/memory_bytes", "system/cpu_percent"} <= {m.name for m in job.metrics(system=True)}
    report(tc, engine, attempt_id, phase="exited", pid=1, result={"exit_code": 0, "reason": "Succeeded", "outputs": []})
    job.wait(timeout=5)
    gone = scrape(tc)
    assert not [k for k in gone if dict(k[1]).get("job_id") == job.id]  # an ended job's series are gone


def test_busy_gpus_are_not_flagged_and_a_cancel_queue_cancels_idle_ones(env, tmp_path):
    tc, sdk, engine, platform = env
    busy = sdk.submit({"name": "busy", "command": "train", "resources": {"gpu": 1}})
    a1 = launched(engine)
    now = time.time()
    report(tc, engine, a1, phase="running", pid=1,
           metrics={"offset": 0, "lines": sampled_lines(tmp_path, util=80.0, times=[now, now + 5])})
    assert sdk.get(busy.id).reason is None
    sdk.create_queue({"name": "strict", "idle_gpus": "cancel"})
    idle = sdk.submit({"name": "idle", "command": "train", "queue": "strict", "resources": {"gpu": 1}})
    a2 = launched(engine, 2)
    report(tc, engine, a2, phase="running", pid=1,
           metrics={"offset": 0, "lines": sampled_lines(tmp_path, util=1.0, times=[now, now + 3])})
    assert sdk.get(idle.id).status.value in ("cancelling", "cancelled")
    assert until(lambda: a2 in engine.cancelled)  # the scheduler stops it
    idle.wait(timeout=10)
    events = tc.get(f"/api/v1/jobs/{idle.id}/events").json()
    assert events[-1]["new_status"] == "cancelled"
    asked = next(e for e in events if e["new_status"] == "cancelling")
    assert asked["actor"] == "system" and "GPUs idle" in asked["reason"]
    assert events[-1]["actor"] == "system"


def test_metrics_count_jobs_by_queue_and_reason_and_nodes(env):
    tc, sdk, engine, platform = env
    sdk.submit({"name": "run", "command": "x", "resources": {"gpu": 2}})
    report(tc, engine, launched(engine), phase="running", pid=1)
    waiting = [sdk.submit({"name": f"w{i}", "command": "x", "resources": {"gpu": 1}}) for i in range(3)]
    until(lambda: all(sdk.get(w.id).reason != "waiting for the scheduler" for w in waiting))

    def planned():
        s = scrape(tc)
        return s if not series(s, "trainyard_pending_jobs", reason="unplanned") else None

    samples = until(planned)
    assert sum(series(samples, "trainyard_pending_jobs").values()) == 3
    assert series(samples, "trainyard_running_jobs", queue="default") == {
        ("trainyard_running_jobs", (("queue", "default"),)): 1}
    why = {dict(k[1])["reason"]: v for k, v in series(samples, "trainyard_pending_jobs", queue="default").items()}
    assert why == {"reserved": 1, "no-room": 2}  # the first in line holds the node; the others wait for room
    assert series(samples, "trainyard_node_capacity", node="a", resource="gpu", gpu_type="A100").popitem()[1] == 2
    assert series(samples, "trainyard_node_used", node="a", resource="gpu").popitem()[1] == 2
    assert series(samples, "trainyard_admission_wait_time_seconds_count", queue="default").popitem()[1] == 1
    assert series(samples, "trainyard_scheduler_cycle_duration_seconds_count").popitem()[1] >= 1


def test_usage_sums_match_hand_computed_hours_including_preempted_time(env):
    tc, sdk, engine, platform = env
    sdk.create_queue({"name": "vision", "team": "cv"})
    # given three jobs that ran known lengths of time, one attempt of them preempted, one failed
    a = sdk.submit({"name": "a", "command": "x", "queue": "vision", "resources": {"gpu": 2, "cpu": 4}})
    report(tc, engine, launched(engine), phase="exited", pid=1, result={"exit_code": 0, "reason": "Succeeded",
                                                                            "outputs": []})
    b = sdk.submit({"name": "b", "command": "x", "queue": "vision", "resources": {"gpu": 1, "cpu": 2, "memory": "4Gi"},
                    "retry": {"max": 0}})
    report(tc, engine, launched(engine, 2), phase="exited", pid=1, result={"exit_code": 3, "reason": "Error(exit 3)",
                                                                               "outputs": []})
    c = sdk.submit({"name": "c", "command": "x", "resources": {"cpu": 1}})
    report(tc, engine, launched(engine, 3), phase="exited", pid=1, result={"exit_code": 0, "reason": "Succeeded",
                                                                               "outputs": []})
    for j in (a, b, c):
        j.wait(timeout=5)
    now = time.time()
    hours = {a.id: 2.0, b.id: 0.5, c.id: 3.0}
    store = platform.store
    with store.write() as s:
        for job_id, h in hours.items():
            s.execute(t.Attempt.__table__.update().where(t.Attempt.job_id == job_id)
                      .values(created_at=now - 10 * 3600, ended_at=now - 10 * 3600 + h * 3600))
        # and a's job had an earlier attempt, preempted after 1 h
        s.execute(t.Attempt.__table__.insert().values(
            id=f"{a.id}-0", job_id=a.id, number=0, status="cancelled", reason="Preempted", gpus=[], handle={},
            node="a", created_at=now - 20 * 3600, ended_at=now - 19 * 3600))
        # an attempt before the window counts for nothing
        s.execute(t.Attempt.__table__.update().where(t.Attempt.id == f"{c.id}-1")
                  .values(created_at=now - 40 * 86400, ended_at=now - 40 * 86400 + 3600))
    r = tc.get("/api/v1/usage", params={"by": "team", "since": "30d"}).json()
    rows = {row["key"]: row for row in r["rows"]}
    assert set(rows) == {"cv"}
    cv = rows["cv"]
    assert cv["gpu_hours"] == pytest.approx(2 * 2 + 1 * 2 + 1 * 0.5)  # a: 2 h + preempted 1 h on 2 GPUs; b: 0.5 h
    assert cv["gpu_hours_preempted"] == pytest.approx(2.0)
    assert cv["gpu_hours_failed"] == pytest.approx(0.5)
    assert cv["cpu_hours"] == pytest.approx(4 * 3 + 2 * 0.5)
    assert cv["memory_gib_hours"] == pytest.approx(4 * 0.5) and cv["memory_gib_hours_failed"] == pytest.approx(2.0)
    assert cv["cost"] == pytest.approx(6.5 * 2.0 + 13 * 0.5) and r["currency"] == "USD"
    by_type = {row["key"]: row for row in tc.get("/api/v1/usage?by=gpu_type&since=30d").json()["rows"]}
    assert by_type["A100"]["gpu_hours"] == pytest.approx(6.5) and "-" not in by_type  # c is outside the window
    r = tc.get("/api/v1/usage?by=planet")
    assert r.status_code == 422 and r.json()["details"]["errors"][0]["field"] == "by"
    r = tc.get("/api/v1/usage?since=yesterday")
    assert r.status_code == 422 and r.json()["details"]["errors"][0]["field"] == "since"


def test_a_pipeline_runs_status_changes_are_events_too(env):
    tc, sdk, engine, platform = env
    from trainyard.spec.pipeline_records import RunStatus
    from trainyard.store.pipelines import PipelineStore

    runs = PipelineStore(platform.store)
    run_id = runs.create_run(name="p", spec={"steps": {}}, params={}, workdirs={}, source=None, warnings=[],
                             instances=[])
    moved = runs.move_run(run_id, RunStatus.CANCELLING, by="user", reason="cancel requested")
    events = [(e.old_status, e.new_status, e.actor, e.reason) for e in sdk.monitoring.run_events(run_id)]
    assert events[0] == (None, "running", "user", None)
    if moved:  # unless the runner ended the empty run first, as "pipeline-runner"
        assert ("running", "cancelling", "user", "cancel requested") in events
    assert all(actor in ("user", "pipeline-runner") for _, _, actor, _ in events)
    assert tc.get("/api/v1/pipelines/p-nosuchrun/events").status_code == 404


def test_usage_shows_a_member_only_what_their_teams_ran_and_an_admin_everything(db_url, tmp_path):
    # given a server with users on: an admin (the server's token), and two teams with a member each
    engine = FakeEngine(NODES)
    settings = ServerSettings(home=tmp_path / "home", db=db_url, token="s3cret", auth=True)
    with TestClient(create_app(Platform(settings, engine=engine), "http://testserver")) as tc:
        admin = Client("http://testserver", token="s3cret", transport=tc._transport)
        members = {}
        for user, team in (("alice", "cv"), ("bob", "nlp")):
            admin.create_queue({"name": f"{team}-q", "team": team})
            secret = admin.identity.create_user(user, team=team, role="member").token.secret
            members[user] = Client("http://testserver", token=secret, transport=tc._transport)
        # and each of them ran a job on their team's queue (an attempt holds resources from admission on)
        members["alice"].submit({"name": "a", "command": "x", "queue": "cv-q", "resources": {"cpu": 2}})
        members["bob"].submit({"name": "b", "command": "x", "queue": "nlp-q", "resources": {"cpu": 1}})
        launched(engine, 2)

        # when each asks for usage per team
        def teams(client: Client) -> set[str]:
            return {row.key for row in client.monitoring.usage(by="team", since="1d").rows}

        # then a member sees their own team's hours and no other team's; the admin sees both
        assert teams(members["alice"]) == {"cv"} and teams(members["bob"]) == {"nlp"}
        assert teams(admin) == {"cv", "nlp"}
        # and a job on the default queue, which has no team, counts for its submitter's team, not for "default"
        members["alice"].submit({"name": "d", "command": "x", "resources": {"cpu": 1}})
        launched(engine, 3)
        assert teams(members["alice"]) == {"cv"} and teams(admin) == {"cv", "nlp"}
        assert {r.key: r.attempts for r in admin.monitoring.usage(by="team", since="1d").rows} == {"cv": 2, "nlp": 1}
        # and grouped otherwise too, only their own jobs count
        by_queue = members["alice"].monitoring.usage(by="queue", since="1d").rows
        assert sorted((r.key, r.attempts) for r in by_queue) == [("cv-q", 1), ("default", 1)]
        # and without a token, nothing
        assert tc.get("/api/v1/usage").status_code == 401


def test_usage_by_user_names_each_submitter_with_their_own_hours_and_only_whom_the_caller_sees(db_url, tmp_path):
    # given users on: alice and carol in team cv, bob in nlp, each with a job that ran a known time
    engine = FakeEngine(NODES)
    settings = ServerSettings(home=tmp_path / "home", db=db_url, token="s3cret", auth=True)
    platform = Platform(settings, engine=engine)
    with TestClient(create_app(platform, "http://testserver")) as tc:
        admin = Client("http://testserver", token="s3cret", transport=tc._transport)
        for team in ("cv", "nlp"):
            admin.create_queue({"name": f"{team}-q", "team": team})
        ran = {"alice": ("cv", 2, 2.0), "carol": ("cv", 1, 1.0), "bob": ("nlp", 4, 0.5)}  # team, cpus, hours
        users, jobs = {}, {}
        for user, (team, cpu, _) in ran.items():
            secret = admin.identity.create_user(user, team=team, role="member").token.secret
            users[user] = Client("http://testserver", token=secret, transport=tc._transport)
            jobs[user] = users[user].submit({"name": user, "command": "x", "queue": f"{team}-q",
                                             "resources": {"cpu": cpu}}).id
        launched(engine, 3)
        now = time.time()
        with platform.store.write() as s:
            for user, (_, _, hours) in ran.items():
                s.execute(t.Attempt.__table__.update().where(t.Attempt.job_id == jobs[user])
                          .values(created_at=now - 5 * 3600, ended_at=now - 5 * 3600 + hours * 3600))

        # when each asks for usage per user
        def cpu_hours(client: Client) -> dict[str, float]:
            return {row.key: round(row.cpu_hours, 6) for row in client.monitoring.usage(by="user", since="1d").rows}

        # then rows are named by who submitted, with their own hours; the admin sees all three
        assert cpu_hours(admin) == {"alice": 4.0, "carol": 1.0, "bob": 2.0}
        # and a member sees the users of their own team only
        assert cpu_hours(users["alice"]) == {"alice": 4.0, "carol": 1.0}
        assert cpu_hours(users["bob"]) == {"bob": 2.0}
