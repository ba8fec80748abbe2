"""Pipeline runs with users and teams (vision, nlp), in-process on SQLite and PostgreSQL: a step is taken from
the cache of its own team's runs only, an artifact is found among those of runs the caller sees, and a run
belongs to the one team whose queues its steps use."""

from __future__ import annotations

import pytest
from sqlalchemy import update

from tests.integration.test_pipelines_api import finish, step_job
from tests.support.inprocess import in_process
from tests.support.waiting import until
from trainyard.errors import ArtifactNotFound, Conflict
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
