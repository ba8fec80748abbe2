"""The retention sweeps in-process (fake engine, two nodes), on SQLite and PostgreSQL: which folders go when,
each once, a running job's checkpoints never, a gang's on each of its nodes, and batches that share an end."""

from __future__ import annotations

import pytest

from tests.support.inprocess import in_process
from tests.support.waiting import until
from trainyard.config import RetentionSettings
from trainyard.services import retention
from trainyard.spec.job import JobSpec
from trainyard.spec.records import NodeInfo

pytestmark = pytest.mark.postgres

NODES = [NodeInfo(name=n, cpu=4, memory=8 * 2**30) for n in "ab"]
KEEP_FOLDERS, KEEP_CHECKPOINTS = 100.0, 200.0


@pytest.fixture
def env(db_url, tmp_path):
    retention = RetentionSettings(work_dirs=KEEP_FOLDERS, checkpoints=KEEP_CHECKPOINTS)
    with in_process(db_url, tmp_path / "home", NODES, retention=retention) as e:  # started, as a server's
        yield e.platform, e.engine


def run(platform, engine, spec: dict, exit_code: int = 0) -> tuple[str, str]:
    """Submit ``spec`` and end its first attempt with ``exit_code``; (job id, attempt id)."""
    job = platform.jobs.submit(JobSpec.model_validate(spec))
    attempt = until(lambda: (a := platform.store.get_job(job.id).attempts) and a[0].id)
    for r in range(spec.get("replicas", 1)):
        engine.finish(attempt, exit_code, replica=r)
    engine.join(attempt)
    return job.id, attempt


def ended_at(platform, job_id: str, number: int = 1) -> float:
    return platform.store.get_job(job_id).attempts[number - 1].ended_at


def test_folders_go_after_their_keep_and_checkpoints_only_once_the_job_has_ended(env):
    platform, engine = env
    sweep = platform.retention
    done, done_attempt = run(platform, engine, {"name": "done", "command": "x"})
    retried, first = run(platform, engine, {"name": "retried", "command": "x", "retry": {"max": 1, "backoff": 0}},
                         exit_code=3)
    second = until(lambda: len(a := platform.store.get_job(retried).attempts) == 2 and a[1].id)
    gang, gang_attempt = run(platform, engine, {"name": "gang", "command": "x", "replicas": 2, "distributed": "torch",
                                                "placement": "spread"})
    ends = [ended_at(platform, j) for j in (done, retried, gang)]
    t = max(ends)

    sweep.cycle(now=min(ends) + KEEP_FOLDERS - 0.001)
    assert engine.removed == []
    sweep.cycle(now=t + KEEP_FOLDERS + 1)
    assert {(i.kind, i.name) for i in engine.removed} == {("attempt", done_attempt), ("attempt", first),
                                                         ("attempt", gang_attempt)}
    assert {i.node for i in engine.removed if i.name == gang_attempt} == {"a", "b"}  # each node a replica ran on
    assert second not in {i.name for i in engine.removed}  # still running
    assert sweep.removed["attempt"] == len(engine.removed)
    engine.removed.clear()
    sweep.cycle(now=t + KEEP_FOLDERS + 1)
    assert engine.removed == [] and sweep.removed["attempt"] == 4  # each once

    sweep.cycle(now=t + KEEP_CHECKPOINTS + 1)
    assert {(i.kind, i.name) for i in engine.removed} == {("checkpoints", done), ("checkpoints", gang)}
    engine.removed.clear()

    engine.finish(second, 0)  # the retried job ends now: its own keep starts over
    engine.join(second)
    end = ended_at(platform, retried, 2)
    sweep.cycle(now=end + KEEP_CHECKPOINTS - 1)
    assert {(i.kind, i.name) for i in engine.removed} == {("attempt", second)}
    engine.removed.clear()
    sweep.cycle(now=end + KEEP_CHECKPOINTS + 1)
    assert {(i.kind, i.name) for i in engine.removed} == {("checkpoints", retried)}


def test_a_backlog_is_swept_in_batches_and_attempts_that_share_an_end_are_each_removed_once(env, monkeypatch):
    platform, engine = env
    monkeypatch.setattr(retention, "BATCH", 2)
    attempts = [run(platform, engine, {"name": f"j{i}", "command": "x"})[1] for i in range(5)]
    # three of them ended at the same instant, across a batch's edge
    same = ended_at(platform, platform.store.get_attempt(attempts[1]).job_id)
    from sqlalchemy import update

    from trainyard.store import tables as t

    with platform.store.write() as s:
        s.execute(update(t.Attempt).where(t.Attempt.id.in_(attempts[1:4])).values(ended_at=same))
    platform.retention.cycle(now=same + KEEP_FOLDERS + 10)
    assert sorted(i.name for i in engine.removed) == sorted(attempts)
    assert platform.retention.rows.cursor("work_dirs") == same + 10 - retention.SLACK


def test_a_snapshot_nothing_names_goes_a_week_after_its_upload_and_one_still_named_stays(env, monkeypatch):
    import hashlib
    import io
    import time

    from trainyard.auth.permissions import LOCAL_ADMIN
    from trainyard.spec.schedule import ScheduleSpec

    platform, engine = env
    monkeypatch.setattr(retention, "BATCH", 1)  # a page at a time: named ones in a page must not end the sweep
    digests = {}
    for name in ("unused", "job", "schedule", "scheduled pipeline", "scheduled pipeline too", "another unused"):
        data = f"code of {name}".encode()
        digests[name] = "sha256:" + hashlib.sha256(data).hexdigest()
        platform.snapshots.put(digests[name], io.BytesIO(data), LOCAL_ADMIN)
    run(platform, engine, {"name": "ran", "command": "x"})
    platform.jobs.submit(JobSpec.model_validate({"name": "coded", "command": "x"}), digests["job"])
    sched = platform.schedules
    sched.create(ScheduleSpec.model_validate({"name": "s", "cron": "@daily", "suspend": True,
                                              "job": {"command": "x", "workdir": "."}}), snapshot=digests["schedule"])
    sched.create(ScheduleSpec.model_validate({"name": "p", "cron": "@daily", "suspend": True, "pipeline": {
        "name": "p", "steps": {"a": {"command": "x", "workdir": "src"}, "b": {"command": "y", "workdir": "lib"}}}}),
        workdirs={"src": digests["scheduled pipeline"], "lib": digests["scheduled pipeline too"]})
    week = RetentionSettings().snapshots
    platform.retention.cycle(now=time.time() + week - 60)  # not a week yet: all stay
    assert all(platform.artifacts.has_snapshot(d) for d in digests.values())
    platform.retention.cycle(now=time.time() + week + 60)
    assert {n for n, d in digests.items() if platform.artifacts.has_snapshot(d)} == {
        "job", "schedule", "scheduled pipeline", "scheduled pipeline too"}
    assert platform.retention.removed["snapshot"] == 2
    assert not platform.snapshots.owners.owns(digests["unused"], LOCAL_ADMIN.user)  # its use is refused now
