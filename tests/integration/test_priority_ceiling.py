"""A queue's priority ceiling (``max_priority``, an admin's to set): with ``--auth`` a job of anyone but an admin
may have no higher priority than its queue's ceiling, normal (100) where the queue has none. Jobs are ordered by
priority before fair share, and priority preempts: any member gave a job 2^31-1 and went ahead of every team's
work. Every way a job is made is held to it (submit, dry run, rerun, pipeline steps, sweeps' trials, schedules at
create and at fire, services). In-process with the fake engine, on SQLite and PostgreSQL."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.integration.test_owner_rights import alices_jobs, end, launched
from tests.support.inprocess import InProcess, in_process
from tests.support.waiting import until
from trainyard import errors
from trainyard.sdk.client import Client
from trainyard.spec.records import NodeInfo

pytestmark = pytest.mark.postgres

NODES = [NodeInfo(name="a", cpu=8, memory=16 * 2**30)]
JOB = {"queue": "vision-q", "resources": {"cpu": 1}}
TOP = 2**31 - 1


@contextmanager
def vision(db_url: str, home: Path, **queue) -> Iterator[tuple[InProcess, dict[str, str], Client]]:
    """A server with users, an admin's queue of team vision and alice, its member: (server, her headers, her SDK)."""
    with in_process(db_url, home, NODES, auth=True) as e:
        e.sdk.create_queue({"name": "vision-q", "team": "vision", **queue})
        secret = e.sdk.identity.create_user("alice", team="vision", role="member").token.secret
        yield e, {"Authorization": f"Bearer {secret}"}, Client("http://testserver", token=secret,
                                                                transport=e.tc._transport)


def ceiling(e: InProcess, value: str | int | None) -> None:
    """The admin gives vision-q a ceiling (None: takes it away)."""
    e.sdk.create_queue({"name": "vision-q", "team": "vision", "max_priority": value}, replace=True)


def refused(r, status: int = 403) -> str:  # noqa: ANN001
    assert r.status_code == status and r.json()["details"]["field"] == "priority", r.text
    return r.json()["message"]


def test_a_members_job_above_its_queues_ceiling_is_refused_naming_priority(db_url, tmp_path):
    with vision(db_url, tmp_path / "home") as (e, alice, _):
        # when alice gives a job more than normal on a queue without a ceiling: the old code took 2^31-1
        for priority in (TOP, "high", 101):
            message = refused(e.tc.post("/api/v1/jobs", json={"spec": {**JOB, "command": "x", "priority": priority}},
                                        headers=alice))
            assert "is above normal (100), the most a job of anyone but an admin may have on queue 'vision-q'" \
                in message and "an admin raises it" in message, message
        dry = e.tc.post("/api/v1/jobs", params={"dry_run": "true"}, headers=alice,
                        json={"spec": {**JOB, "command": "x", "priority": "urgent"}})
        assert "urgent (300) is above normal (100)" in refused(dry)
        # the job's YAML: the refusal names the line that says it
        text = "command: x\nqueue: vision-q\nresources: {cpu: 1}\npriority: high\n"
        r = e.tc.post("/api/v1/jobs", content=text, headers={**alice, "Content-Type": "application/yaml"})
        refused(r)
        assert r.json()["details"]["line"] == 4, r.text
        # the default queue has the same ceiling; so does a service's replica
        refused(e.tc.post("/api/v1/jobs", json={"spec": {"command": "x", "priority": "high"}}, headers=alice))
        service = {**JOB, "name": "web", "command": ["python", "app.py"], "priority": "high"}
        refused(e.tc.post("/api/v1/services", json={"spec": service}, headers=alice))
        assert alices_jobs(e) == []
        # while at or below the ceiling it is taken, and an admin's job is not held to it
        for priority in ("normal", "low", 100):
            r = e.tc.post("/api/v1/jobs", json={"spec": {**JOB, "command": "x", "priority": priority}}, headers=alice)
            assert r.status_code == 201, r.text
        assert e.sdk.get(e.sdk.submit({**JOB, "command": "x", "priority": TOP}).id).spec.priority == TOP


def test_an_admins_max_priority_lets_members_go_up_to_it_and_a_rerun_is_held_to_it_now(db_url, tmp_path):
    with vision(db_url, tmp_path / "home", max_priority="high") as (e, alice, sdk):
        # given vision-q's ceiling high
        assert e.sdk.queue("vision-q").queue.max_priority == 200
        job = sdk.submit({**JOB, "command": "x", "priority": "high"})
        r = e.tc.post("/api/v1/jobs", json={"spec": {**JOB, "command": "x", "priority": 201}}, headers=alice)
        assert "201 is above high (200), queue 'vision-q''s max_priority" in refused(r)
        # when the admin takes the ceiling away, alice's rerun of her high job is refused
        ceiling(e, None)
        with pytest.raises(errors.Forbidden, match="priority: high \\(200\\) is above normal \\(100\\)") as caught:
            sdk.rerun(job.id)
        assert caught.value.details["field"] == "priority"
        assert len(alices_jobs(e)) == 1
        # and an admin reruns it
        assert e.sdk.get(e.sdk.rerun(job.id).id).spec.priority == 200


def test_a_pipeline_step_above_its_queues_ceiling_is_refused_naming_the_step(db_url, tmp_path):
    with vision(db_url, tmp_path / "home") as (e, alice, _):
        text = ("name: chain\nsteps:\n  a:\n    command: prep\n    queue: vision-q\n"
                "  b:\n    command: train\n    queue: vision-q\n    priority: urgent\n    needs: [a]\n")
        r = e.tc.post("/api/v1/pipelines", content=text, headers={**alice, "Content-Type": "application/yaml"})
        assert r.status_code == 422, r.text
        [err] = r.json()["details"]["errors"]
        assert (err["field"], err["line"]) == ("steps.b.priority", 9), err
        assert err["message"].startswith("urgent (300) is above normal (100)"), err
        assert alices_jobs(e) == []
        ok = e.tc.post("/api/v1/pipelines", content=text.replace("urgent", "normal"),
                       headers={**alice, "Content-Type": "application/yaml"})
        assert ok.status_code == 201, ok.text


def test_a_sweep_above_its_queues_ceiling_is_refused_and_its_trials_are_held_to_it_later(db_url, tmp_path):
    with vision(db_url, tmp_path / "home", max_priority="high") as (e, alice, _):
        spec = {"name": "s", "job": {**JOB, "command": "train --x {{params.x}}", "priority": "urgent"},
                "metric": {"name": "acc"}, "parameters": {"x": {"values": [1, 2, 3]}}, "method": "grid",
                "parallel": 1}
        r = e.tc.post("/api/v1/sweeps", json={"spec": spec}, headers=alice)
        assert r.status_code == 403 and "urgent (300) is above high (200)" in r.json()["message"], r.text
        spec["job"]["priority"] = "high"
        r = e.tc.post("/api/v1/sweeps", json={"spec": spec}, headers=alice)
        assert r.status_code == 201, r.text
        [first] = launched(e, 1)
        # when the admin lowers the ceiling, the next trial is not made, and the sweep says why
        ceiling(e, "normal")
        end(e, first, metrics={"offset": 0, "lines": ['{"step": 0, "ts": 1, "values": {"acc": 0.5}}']})
        until(lambda: e.sdk.sweeps.get(r.json()["id"]).status.value != "running" or len(alices_jobs(e)) > 1)
        done = e.sdk.sweeps.get(r.json()["id"])
        assert done.status.value == "failed", done
        assert done.reason.startswith("trial 1 could not be submitted: priority: its owner alice may no longer give "
                                      "it that: high (200) is above normal (100)"), done.reason
        assert len(alices_jobs(e)) == 1


def test_a_schedule_above_its_queues_ceiling_is_refused_and_a_fire_after_it_came_down_says_why(db_url, tmp_path):
    with vision(db_url, tmp_path / "home", max_priority="high") as (e, alice, _):
        spec = {"name": "nightly", "cron": "@daily", "job": {**JOB, "command": "x", "priority": "urgent"}}
        refused(e.tc.post("/api/v1/schedules", json={"spec": spec}, headers=alice))
        spec["job"]["priority"] = "high"
        made = e.tc.post("/api/v1/schedules", json={"spec": spec}, headers=alice)
        assert made.status_code == 201, made.text
        # when the admin takes the ceiling away and the schedule fires
        ceiling(e, None)
        run = e.tc.post(f"/api/v1/schedules/{made.json()['id']}/trigger", headers=alice).json()
        # then no job is made, and the fire says why
        assert run["outcome"] == "failed" and run["job_id"] is None, run
        assert run["message"].startswith("priority: high (200) is above normal (100)"), run
        shown = e.tc.get(f"/api/v1/schedules/{made.json()['id']}", headers=alice).json()
        assert shown["runs"][0]["message"] == run["message"]
        assert alices_jobs(e) == []


def test_a_rerun_at_another_priority_is_held_to_its_queues_ceiling_as_a_submit_is(db_url, tmp_path):
    with vision(db_url, tmp_path / "home", max_priority="high") as (e, alice, sdk):
        # given alice's normal job on vision-q, whose ceiling is high
        job = sdk.submit({**JOB, "command": "x"})
        # when she runs it again above the ceiling (the old SDK had no priority to give)
        for priority, said in ((201, "201 is above high (200)"), ("urgent", "urgent (300) is above high (200)")):
            with pytest.raises(errors.Forbidden, match=f"priority: {re.escape(said)}, queue 'vision-q''s") as caught:
                sdk.rerun(job.id, priority=priority)
            assert caught.value.details["field"] == "priority"
        assert len(alices_jobs(e)) == 1
        # then at the ceiling it is taken, and an admin's is not held to it
        high = sdk.rerun(job.id, priority="high").id
        assert e.sdk.get(high).spec.priority == 200
        assert e.sdk.get(e.sdk.rerun(job.id, priority=TOP).id).spec.priority == TOP
        # and once the ceiling comes down, her high job runs again at normal: the way to rerun it
        ceiling(e, None)
        assert e.sdk.get(sdk.rerun(high, priority="normal").id).spec.priority == 100
        # a priority no spec may have is refused naming it, before anything is sent
        with pytest.raises(errors.InvalidSpec) as bad:
            sdk.rerun(job.id, priority="highest")
        assert bad.value.errors[0]["field"] == "priority" and "unknown priority class" in str(bad.value)


def test_trainyard_rerun_priority_says_a_refusal_above_the_ceiling_naming_priority(db_url, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from trainyard.cli.main import app

    with vision(db_url, tmp_path / "home") as (e, _, sdk):
        monkeypatch.setattr("trainyard.cli.jobs.client", lambda: sdk)
        job = sdk.submit({**JOB, "command": "x", "priority": "low"})
        # when alice reruns her low job at 150 on a queue without a ceiling (the old CLI had no --priority)
        out = CliRunner().invoke(app, ["rerun", job.id, "--priority", "150"])
        # then it is refused, saying why and who raises it
        assert out.exit_code == 1, out.output
        assert "priority: 150 is above normal (100)" in out.output and "an admin raises it" in out.output
        # while --priority normal (or an integer at or below it) makes the new job at it
        for flag, value in (("normal", 100), ("50", 50)):
            out = CliRunner().invoke(app, ["rerun", job.id, "--priority", flag])
            assert out.exit_code == 0, out.output
            assert e.sdk.get(out.stdout.strip()).spec.priority == value
        out = CliRunner().invoke(app, ["rerun", job.id, "--priority", "1e3"])
        assert out.exit_code == 2 and "priority: unknown priority class '1e3'" in out.output, out.output
