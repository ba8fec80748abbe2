"""Pipeline runs with users and teams (vision, nlp), in-process on SQLite and PostgreSQL: a step is taken from
the cache of its own team's runs only, an artifact is found among those of runs the caller sees, and a run
belongs to the one team whose queues its steps use."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import update

from tests.integration.test_pipelines_api import finish, step_job
from tests.support.inprocess import in_process
from tests.support.waiting import until
from trainyard.errors import ArtifactNotFound, Conflict, InvalidSpec, JobNotFound
from trainyard.sdk.client import Client
from trainyard.spec.records import NodeInfo
from trainyard.store import tables as t

pytestmark = pytest.mark.postgres

NODES = [NodeInfo(name="a", cpu=8, memory=16 * 2**30)]


@pytest.fixture
def yard(db_url, tmp_path):
    """The in-process server with alice (vision member), bob (nlp member) and a queue for each team."""
    with in_process(db_url, tmp_path / "home", NODES, auth=True) as e:
        users = {}
        for user, team in (("alice", "vision"), ("bob", "nlp")):
            e.sdk.create_queue({"name": f"{team}-q", "team": team})
            secret = e.sdk.identity.create_user(user, team=team, role="member").token.secret
            users[user] = Client("http://testserver", token=secret, transport=e.tc._transport)
        yield e, users


@pytest.fixture
def frank(yard):
    """A member of both teams: his first team by name, where the default queue puts him, is nlp."""
    e, _ = yard
    secret = e.sdk.identity.create_user("frank", team="vision", role="member").token.secret
    e.sdk.identity.set_membership("frank", "nlp", "member")
    return Client("http://testserver", token=secret, transport=e.tc._transport)


def train(queue: str, seed: int = 1) -> dict:
    return {"name": "p", "steps": {"train": {"command": f"train --seed {seed} --out {{{{outputs.model}}}}",
                                             "outputs": ["model"], "queue": queue}}}


def trained(e, client, queue: str, content: bytes, seed: int = 1):  # noqa: ANN001, ANN201
    """A run of :func:`train` on ``queue`` whose step ran (not cached) and wrote ``content``."""
    run = client.pipelines.run(train(queue, seed))
    state = until(lambda: run.step("train").state.value if run.step("train").state.value != "waiting" else None)
    assert state == "submitted", run.step("train")
    finish(e.tc, e.engine, run.step("train").job_id, {"model": content})
    info = run.wait(timeout=10)
    assert info.status.value == "succeeded" and info.step("train").status == "succeeded", info
    return info


def test_a_step_is_cached_only_from_its_own_teams_runs(yard):
    e, u = yard
    alice, bob = u["alice"], u["bob"]
    bobs = trained(e, bob, "nlp-q", b"bob's private model")
    # the same spec, code and inputs in another team: it runs, it does not read bob's outputs
    alices = trained(e, alice, "vision-q", b"alice's model")
    assert alices.step("train").cached_from is None
    # and bob's next run takes his own team's outputs, not alice's newer ones
    again = bob.pipelines.run(train("nlp-q")).wait(timeout=10)
    assert again.step("train").status == "cached" and again.step("train").cached_from == bobs.step("train").job_id
    # a run without a team (an admin's, on the default queue) reuses neither team's
    mine = e.sdk.pipelines.run(train("default"))
    assert step_job(mine, "train") not in {bobs.step("train").job_id, alices.step("train").job_id}


def test_a_run_held_back_by_a_run_the_caller_cannot_see_does_not_name_it(yard):
    e, u = yard
    alice, bob = u["alice"], u["bob"]
    bobs = trained(e, bob, "nlp-q", b"bob's")
    alices = trained(e, alice, "vision-q", b"alice's", seed=2)
    # as a run cached across teams before steps were cached per team left it: alice's step reuses bob's job
    steps = t.PipelineStep.__table__.c
    with e.platform.store.write() as w:
        w.execute(update(t.PipelineStep.__table__).where(steps.run_id == alices.id).values(
            status="cached", cached_from=bobs.step("train").job_id))
    with pytest.raises(Conflict) as refused:
        bob.pipelines.delete(bobs.id)
    assert alices.id not in refused.value.message
    assert "a pipeline run you cannot see reuses its outputs" in refused.value.message
    with pytest.raises(Conflict, match=f"pipeline run {alices.id} reuses its outputs"):
        e.sdk.pipelines.delete(bobs.id)  # an admin sees it


def test_an_artifact_is_found_only_among_those_of_runs_the_caller_sees(yard):
    e, u = yard
    alice, bob = u["alice"], u["bob"]
    bobs = trained(e, bob, "nlp-q", b"bob-model-v1")
    theirs = bob.pipelines.artifact(bobs.step("train").artifacts["model"])
    # alice, with no artifact of her own, is told the same for bob's id, its prefix, his output's digest and
    # anything that matches nothing
    for key in (theirs.id, "a-", theirs.id[:4], theirs.digest, theirs.digest.removeprefix("sha256:")[:8], "a-zz",
                "sha256:" + "0" * 64):
        with pytest.raises(ArtifactNotFound) as missed:
            alice.pipelines.artifact(key)
        assert missed.value.message == f"no artifact with id or digest {key!r}"
    # once she has one, a prefix both share is hers alone: bob's does not make it ambiguous
    alices = trained(e, alice, "vision-q", b"alice's", seed=2)
    mine = alices.step("train").artifacts["model"]
    assert alice.pipelines.artifact("a-").id == mine and bob.pipelines.artifact("a-").id == theirs.id
    # a run of bob's that reuses her job's outputs (cached across teams before that was refused) is not named
    steps = t.PipelineStep.__table__.c
    with e.platform.store.write() as w:
        w.execute(update(t.PipelineStep.__table__).where(steps.run_id == bobs.id).values(
            status="cached", cached_from=alices.step("train").job_id))
    assert alice.pipelines.artifact(mine).used_by == []
    assert e.sdk.pipelines.artifact(mine).used_by == [f"{bobs.id}/train"]


def steps_on(*queues: str) -> dict:
    return {"name": "p", "steps": {f"s{i}": {"command": f"x {i}", "queue": q} for i, q in enumerate(queues)}}


def test_a_run_and_its_steps_jobs_belong_to_the_team_of_its_steps_queues(yard, frank):
    e, u = yard
    run = frank.pipelines.run(steps_on("vision-q", "vision-q"))
    assert run.info.team == "vision"
    job = step_job(run, "s0")
    assert e.sdk.get(job).team == "vision"
    assert u["alice"].get(job).id == job  # his team's members see it, as any job on vision's queue
    with pytest.raises(JobNotFound):
        u["bob"].get(job)
    # a run without a team's queue is the team the default queue gives him
    assert frank.pipelines.run(steps_on("default")).info.team == "nlp"
    # an admin's step on the default queue goes with the team of the run's other steps
    mixed = e.sdk.pipelines.run(steps_on("default", "vision-q"))
    assert mixed.info.team == "vision" and e.sdk.get(step_job(mixed, "s0")).team == "vision"
    # an admin's run across two teams' queues (as any run without --auth, where queues are their own teams) is
    # no team's, as its steps' jobs
    across = e.sdk.pipelines.run(steps_on("nlp-q", "vision-q"))
    assert across.info.team is None and e.sdk.get(step_job(across, "s1")).team is None


@pytest.mark.parametrize("who, queues, field, message", [
    ("frank", ("vision-q", "nlp-q"), "steps.s1.queue", "queue 'nlp-q' is team nlp's, while step s0's queue "
                                                        "'vision-q' is team vision's"),
    ("frank", ("vision-q", "default"), "steps.s1.queue", "queue 'default' is team nlp's"),
])
def test_a_run_whose_steps_use_queues_of_two_teams_is_refused_naming_the_queue(yard, frank, who, queues, field,
                                                                               message):
    e, _ = yard
    client = frank if who == "frank" else e.sdk
    with pytest.raises(InvalidSpec) as refused:
        client.pipelines.run(steps_on(*queues))
    [err] = refused.value.errors
    assert err["field"] == field and "a run's steps use the queues of one team" in err["message"], err
    assert message in err["message"], err
    assert e.sdk.pipelines.list().items == [] and e.sdk.jobs().items == []


def test_a_pipelines_schedule_is_the_team_its_runs_will_be(yard, frank):
    spec = {"name": "nightly", "cron": "0 0 1 1 *", "pipeline": steps_on("vision-q")}
    made = json.loads(frank.http.json_call("POST", "/api/v1/schedules", body={"spec": spec}))
    assert made["team"] == "vision"
    with pytest.raises(InvalidSpec, match="a run's steps use the queues of one team"):
        frank.http.json_call("POST", "/api/v1/schedules", body={"spec": {
            **spec, "name": "mixed", "pipeline": steps_on("vision-q", "nlp-q")}})


def test_only_an_admin_may_name_a_path_on_the_servers_host_as_a_step_input(yard, tmp_path):
    # the server would look at it as its own account: whether a file their jobs may not read is there, and when
    # it changed
    e, users = yard
    data = tmp_path / "data.txt"
    data.write_text("x")
    for url in (str(data), f"file://{data}", str(tmp_path / "no-such-file")):
        spec = {"name": "p", "steps": {"s": {"command": "true", "inputs": {"d": url}, "queue": "vision-q"}}}
        with pytest.raises(InvalidSpec) as err:
            users["alice"].http.request("POST", "/api/v1/pipelines", json={"spec": spec})
        assert [x["field"] for x in err.value.errors] == ["steps.s.inputs.d"], err.value.errors
        assert "a path on the server's host, which only an admin's pipeline may name" in err.value.errors[0]["message"]
    spec = {"name": "p", "steps": {"s": {"command": "true", "inputs": {"d": str(data)}, "queue": "vision-q"}}}
    assert e.sdk.pipelines.run(spec).info.steps[0].inputs["d"]["url"] == str(data)
    # the outputs of her own job in the artifact store, by path, are hers to name (vetted as for a job)
    job = users["alice"].submit({"command": "x", "queue": "vision-q"})
    outputs = f"{e.platform.artifacts.url}/jobs/{job.id}/1/outputs"
    spec["steps"]["s"]["inputs"]["d"] = outputs
    assert users["alice"].pipelines.run(spec).info.steps[0].inputs["d"]["url"] == outputs
