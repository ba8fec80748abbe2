"""An input in trainyard's own artifact store is fetched with the store's credentials, which no job holds: it must
be the outputs of a job the caller may see. Another team's outputs and any snapshot are refused naming the field,
in a job, a sweep's job and a pipeline step; as written any other way (s3a://, doubled slashes, ..) too."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.inprocess import in_process
from trainyard.errors import InvalidSpec
from trainyard.sdk.client import Client
from trainyard.spec.records import NodeInfo

pytestmark = pytest.mark.postgres

NODES = [NodeInfo(name="a", cpu=8, memory=16 * 2**30)]


def two_teams(e):  # noqa: ANN001, ANN201
    """alice (team cv, queue cv-q) and bob (team nlp, queue nlp-q), members, as clients of ``e``'s server."""
    users = []
    for user, team in (("alice", "cv"), ("bob", "nlp")):
        e.sdk.create_queue({"name": f"{team}-q", "team": team})
        secret = e.sdk.identity.create_user(user, team=team, role="member").token.secret
        users.append(Client("http://testserver", token=secret, transport=e.tc._transport))
    return users


def test_only_outputs_of_jobs_the_caller_sees_are_taken_from_the_store(db_url, tmp_path):
    with in_process(db_url, tmp_path / "home", NODES, auth=True) as e:
        alice, bob = two_teams(e)
        store = e.platform.artifacts.url
        outputs = f"{store}/jobs/{alice.submit({'command': 'x', 'queue': 'cv-q'}).id}/1/outputs"

        mine = alice.submit({"command": "x", "queue": "cv-q", "inputs": {"model": f"{outputs}/model.pkl"}})
        assert mine.info.spec.inputs == {"model": f"{outputs}/model.pkl"}

        snapshot = f"{store}/snapshots/sha256-{'0' * 64}.tar.gz"
        plain = outputs.replace("file://", "")  # as a path, climbing in from beside it, with a doubled slash
        Path(plain).mkdir(parents=True)  # the SDK looks for a local path before it sends the job
        for url in (outputs, f"{outputs}/model.pkl", plain.replace("/jobs/", "/snapshots/../jobs/"),
                    outputs.replace("/jobs/", "//jobs/"), snapshot):
            with pytest.raises(InvalidSpec) as err:
                bob.submit({"command": "x", "queue": "nlp-q", "inputs": {"data": url}})
            [one] = err.value.errors
            assert one["field"] == "inputs.data" and "in trainyard's artifact store" in one["message"], (url, one)
        with pytest.raises(InvalidSpec, match="inputs.data"):
            alice.submit({"command": "x", "queue": "cv-q", "inputs": {"data": snapshot}})
        sweep = {"name": "s", "job": {"command": "x {{params.a}}", "queue": "nlp-q", "inputs": {"data": outputs}},
                 "parameters": {"a": {"values": [1]}}, "metric": {"name": "acc"}}
        with pytest.raises(InvalidSpec, match="artifact store"):
            bob.sweep(sweep)
        with pytest.raises(InvalidSpec) as err:
            bob.pipelines.run({"steps": {"a": {"command": "x", "queue": "nlp-q", "inputs": {"data": outputs}}}})
        assert any(x["field"] == "steps.a.inputs.data" for x in err.value.errors), err.value.errors
        with pytest.raises(InvalidSpec, match="artifact store"):  # a service's model too (trainyard serve URL)
            bob.services.apply({"name": "web", "command": "app", "queue": "nlp-q", "inputs": {"model": outputs}})
        assert bob.jobs().items == [] and bob.sweeps.list() == [] and bob.services.list() == []


def test_a_store_url_is_read_decoded_as_the_launcher_reads_it(db_url, tmp_path):
    # the default store of a home with a space or an accent is percent-encoded (Path.as_uri()): the same outputs
    # named as a plain path, or with an encoded "..", are the store's too, where the launcher will read them
    with in_process(db_url, tmp_path / "home x é", NODES, auth=True) as e:
        alice, bob = two_teams(e)
        store = e.platform.artifacts.url
        assert "%20" in store
        theirs = alice.submit({"command": "x", "queue": "cv-q"}).id
        mine = bob.submit({"command": "x", "queue": "nlp-q"}).id
        plain = Path(tmp_path / "home x é" / "artifacts" / "jobs" / theirs / "1" / "outputs")
        plain.mkdir(parents=True)
        climbing = f"{store}/jobs/{mine}/1/outputs/%2e%2e/%2E%2E/%2e%2e/{theirs}/1/outputs"
        for url in (str(plain), f"file://{plain}", climbing, f"{store}/jobs/{theirs}/1/outputs".replace("%20", " ")):
            with pytest.raises(InvalidSpec) as err:
                bob.submit({"command": "x", "queue": "nlp-q", "inputs": {"data": url}})
            [one] = err.value.errors
            assert one["field"] == "inputs.data" and "in trainyard's artifact store" in one["message"], (url, one)
        ok = bob.submit({"command": "x", "queue": "nlp-q", "inputs": {"data": f"{store}/jobs/{mine}/1/outputs"}})
        assert ok.info.spec.inputs["data"].endswith(f"/jobs/{mine}/1/outputs")


def test_a_jobs_input_names_a_job_it_may_see_as_job_url_and_gets_its_outputs(db_url, tmp_path):
    from tests.integration.test_api import report
    from tests.support.waiting import until

    with in_process(db_url, tmp_path / "home", NODES, auth=True) as e:
        alice, bob = two_teams(e)
        # given alice's job that succeeded, and one that has not
        trained = alice.submit({"command": "train", "queue": "cv-q"})
        attempt = until(lambda: next(iter(e.engine.launched), None))
        report(e.tc, e.engine, attempt, phase="exited", pid=1, result={"exit_code": 0, "reason": "Succeeded"})
        trained.wait(timeout=10)
        waiting = alice.submit({"command": "x", "queue": "cv-q"}).id
        # when alice's next job names its outputs as job://ID/PATH
        used = alice.submit({"command": "x", "queue": "cv-q", "inputs": {"model": f"job://{trained.id}/model.pt"}})
        # then it reads them from the store, where the launcher fetches them (job:// is no protocol it knows)
        assert used.info.spec.inputs == {"model": e.platform.artifacts.outputs_url(trained.id, 1) + "/model.pt"}
        # and bob (another team), a job that has not succeeded, artifact:// and a path out of the outputs are refused
        # at submit, naming the input, not at the attempt's setup
        for who, url, says in ((bob, f"job://{trained.id}", f"no such job: {trained.id}"),
                               (alice, f"job://{waiting}", "only a succeeded job's outputs"),
                               (alice, "artifact://a-1", "artifact://"),
                               (alice, f"job://{trained.id}/../x", "path")):
            with pytest.raises(InvalidSpec) as err:
                who.submit({"command": "x", "queue": "cv-q" if who is alice else "nlp-q", "inputs": {"model": url}})
            [one] = err.value.errors
            assert one["field"] == "inputs.model" and says in one["message"], (url, one)
