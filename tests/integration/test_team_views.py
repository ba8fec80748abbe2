"""Views over the whole cluster, seen by users of two teams: what another team runs is not shown beyond what
the caller may see. In-process with the fake engine and users on, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

import httpx
import pytest

from tests.support.inprocess import InProcess, in_process
from tests.support.waiting import until
from trainyard.spec.records import NodeInfo

pytestmark = pytest.mark.postgres

NODES = [NodeInfo(name="a", cpu=8, memory=16 * 2**30, gpu=2, gpu_type="A100", gpu_ids=["0", "1"])]
USERS = (("alice", "vision", "member"), ("carol", "vision", "viewer"), ("bob", "nlp", "member"),
         ("root", None, "admin"))


class Yard(NamedTuple):
    e: InProcess
    tokens: dict[str, str]

    def call(self, user: str, method: str, path: str, **kw: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.tokens[user]}"} if user != "server" else {}
        return self.e.tc.request(method, path, headers=headers, **kw)

    def get(self, user: str, path: str) -> httpx.Response:
        return self.call(user, "GET", path)

    def submit(self, user: str, **spec: Any) -> httpx.Response:
        return self.call(user, "POST", "/api/v1/jobs", json={"spec": {"name": "j", "command": "x", **spec}})

    def running(self, user: str, **spec: Any) -> str:
        """The id of a job of ``user`` once the engine has launched it."""
        r = self.submit(user, **spec)
        assert r.status_code == 201, r.text
        job = r.json()["id"]
        until(lambda: any(c[0].job_id == job for c in self.e.engine.launched.values()))
        return job


@pytest.fixture
def yard(db_url, tmp_path) -> Iterator[Yard]:
    # alice (member) and carol (viewer) of vision, bob (member) of nlp, root an admin; a queue per team
    with in_process(db_url, tmp_path / "home", NODES, auth=True) as e:
        for team in ("vision", "nlp"):
            e.sdk.create_queue({"name": f"{team}-q", "team": team})
        tokens = {user: e.sdk.identity.create_user(user, team=team, role=role).token.secret
                  for user, team, role in USERS}
        yield Yard(e, tokens)


def test_metrics_answer_only_an_admin_or_the_servers_own_token(yard):
    # given bob's job running on nlp's queue, named for what his team works on
    yard.running("bob", name="bob-secret-project", queue="nlp-q")
    # then a member or viewer of either team is refused the scrape, which would name it
    for user in ("alice", "carol", "bob"):
        r = yard.get(user, "/metrics")
        assert r.status_code == 403 and r.json()["code"] == "forbidden", (user, r.text)
        assert "bob-secret-project" not in r.text
    # and an admin user, or the server's own token (what a Prometheus scrape config holds), reads it all
    for user in ("root", "server"):
        r = yard.get(user, "/metrics")
        assert r.status_code == 200 and 'queue="nlp-q"' in r.text, user


def test_nodes_show_every_gpu_in_use_but_name_only_the_jobs_the_caller_may_see(yard):
    # given bob's job holding one GPU and alice's the other
    bobs = yard.running("bob", queue="nlp-q", resources={"cpu": 1, "gpu": 1})
    alices = yard.running("alice", queue="vision-q", resources={"cpu": 2, "gpu": 1})

    def node(user: str) -> dict:
        [listed] = yard.get(user, "/api/v1/nodes").json()
        assert yard.get(user, "/api/v1/nodes/a").json() == listed
        return listed

    # then each team reads its own job on its GPU and "hidden" on the other team's; a viewer as its team
    holders = {user: sorted(node(user)["gpu_holders"].values()) for user in ("alice", "carol", "bob", "root")}
    assert holders["alice"] == holders["carol"] == sorted([alices, "hidden"])
    assert holders["bob"] == sorted([bobs, "hidden"])
    assert holders["root"] == sorted([alices, bobs])
    # and capacity and use are the cluster's, whoever asks
    use = {user: {k: node(user)[k] for k in ("cpu_used", "gpus_used", "memory_used", "attempts")}
           for user in ("alice", "bob", "root")}
    assert use["alice"] == use["bob"] == use["root"] and use["root"]["cpu_used"] == 3


def test_another_teams_queue_is_answered_as_one_never_defined(yard):
    def answer(r: httpx.Response, name: str) -> tuple[int, str]:
        return r.status_code, r.text.replace(name, "NAME")

    # when alice reads, or submits to, nlp's queue and a queue that does not exist
    for user in ("alice", "carol"):
        got = {name: answer(yard.get(user, f"/api/v1/queues/{name}"), name) for name in ("nlp-q", "no-such-q")}
        # then both are not found, in the same words
        assert got["nlp-q"] == got["no-such-q"] and got["nlp-q"][0] == 404, got
    sent = {name: answer(yard.submit("alice", queue=name), name) for name in ("nlp-q", "no-such-q")}
    assert sent["nlp-q"] == sent["no-such-q"] and sent["nlp-q"][0] == 422, sent
    assert "unknown queue 'NAME' (defined: default, vision-q)" in sent["nlp-q"][1]
    # while a viewer of vision is told its role is what stops it on its own team's queue
    r = yard.submit("carol", queue="vision-q")
    assert r.status_code == 403 and "your role in team vision does not allow submitting" in r.json()["message"]
    assert yard.get("bob", "/api/v1/queues/nlp-q").json()["queue"]["team"] == "nlp"


def test_the_default_queues_row_counts_only_the_jobs_the_caller_may_see(yard):
    # given on the default queue (every team's): bob's job holding a GPU and another waiting, alice's running
    yard.running("bob", resources={"cpu": 1, "gpu": 1})
    assert yard.submit("bob", resources={"cpu": 1, "gpu": 2}).status_code == 201  # one GPU is free: it waits
    yard.running("alice", resources={"cpu": 2})

    def row(user: str) -> tuple[dict, int]:
        [found] = [q for q in yard.get(user, "/api/v1/queues").json() if q["queue"]["name"] == "default"]
        assert yard.get(user, "/api/v1/queues/default").json() == found
        return {k: found["usage"][k] for k in ("running", "cpu", "gpu")}, found["pending"]

    # then each team's users read their team's jobs on it; an admin, every job
    assert row("alice") == row("carol") == ({"running": 1, "cpu": 2.0, "gpu": {}}, 0)
    assert row("bob") == ({"running": 1, "cpu": 1.0, "gpu": {"A100": 1}}, 1)
    assert row("root") == row("server") == ({"running": 2, "cpu": 3.0, "gpu": {"A100": 1}}, 1)
