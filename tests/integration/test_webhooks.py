"""Webhooks through the API with a fake engine, on SQLite and PostgreSQL, POSTing to a real HTTP server on
loopback: a subscription is told of the job ends it asked for and no others, once each; a receiver that fails
is tried again until it answers, and given up after the last try, saying why; a webhook is named, never given."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from tests.integration.test_api import NODES, report
from tests.support.at_once import at_once
from tests.support.stub_http import JsonServer, Unanswering
from tests.support.waiting import until
from trainyard.api.app import create_app
from trainyard.config import ServerSettings
from trainyard.engines.fake import FakeEngine
from trainyard.sdk.client import Client
from trainyard.services import webhook_loop
from trainyard.services.platform import Platform


class Receiver:
    """A webhook's far end: records each POST's JSON, answers with ``status`` (changeable)."""

    def __init__(self) -> None:
        self.status = 200
        self.server = JsonServer(lambda method, path: (self.status, {}), lambda r: json.loads(r.body))

    @property
    def got(self) -> list[dict]:
        return self.server.got


@pytest.fixture
def hooks():
    ok, chat = Receiver(), Receiver()
    yield ok, chat
    ok.server.close()
    chat.server.close()


@pytest.fixture
def slow():
    held = Unanswering(hold=True)  # reads the request, never answers
    yield held
    held.sock.close()


@pytest.fixture
def env(db_url, tmp_path, hooks, slow):
    ok, chat = hooks
    engine = FakeEngine(NODES)
    settings = ServerSettings(home=tmp_path / "home", db=db_url, token="s3cret", webhooks={
        "ops": {"url": ok.server.url + "/hook", "timeout": 2},
        "chat": {"url": chat.server.url + "/services/T0/B0/XXXX", "format": "slack"},
        "vision-only": {"url": ok.server.url + "/vision", "teams": ["vision"]},
        "slow": {"url": slow.url + "/hook", "timeout": 4}})
    platform = Platform(settings, engine=engine)
    with TestClient(create_app(platform, "http://testserver"), headers={"Authorization": "Bearer s3cret"}) as tc:
        sdk = Client("http://testserver", token="s3cret", transport=tc._transport)
        yield tc, sdk, engine, platform


def end(tc, engine, job, code):
    attempt = until(lambda: next((a for a in engine.launched if a.startswith(job.id)), None))
    report(tc, engine, attempt, phase="exited", pid=1,
           result={"exit_code": code, "reason": "Succeeded" if code == 0 else f"Error(exit {code})", "outputs": []})
    until(lambda: job.status in ("succeeded", "failed"))


def test_a_subscription_is_told_of_the_ends_it_asked_for_once_each(env, hooks):
    tc, sdk, engine, platform = env
    ok, chat = hooks
    assert [h["name"] for h in tc.get("/api/v1/webhooks").json()] == ["chat", "ops", "slow", "vision-only"]
    assert "url" not in tc.get("/api/v1/webhooks").json()[0]  # the address stays with the server
    failed = tc.post("/api/v1/subscriptions", json={"webhook": "ops", "on": ["failed"], "name": "nightly-*"})
    assert failed.status_code == 201, failed.text
    both = tc.post("/api/v1/subscriptions", json={"webhook": "chat", "on": ["succeeded", "failed"]}).json()
    # when three jobs end: one fails and matches the glob, one fails and does not, one succeeds
    jobs = [sdk.submit({"name": n, "command": "x", "labels": {"n": n}}) for n in ("nightly-etl", "adhoc", "nightly-ok")]
    for job, code in zip(jobs, (3, 1, 0)):
        end(tc, engine, job, code)
    # then ops heard of the one failure it watches, chat of all three, in the format each speaks
    until(lambda: len(ok.got) == 1 and len(chat.got) == 3, timeout=15)
    [told] = ok.got
    assert told["event"] == "job.failed" and told["subscription"] == failed.json()["id"]
    assert {k: told["job"][k] for k in ("id", "name", "status", "reason", "owner")} == {
        "id": jobs[0].id, "name": "nightly-etl", "status": "failed", "reason": "Error(exit 3) after 1 attempt", "owner": "local"}
    assert told["job"]["url"].endswith(f"/jobs/{jobs[0].id}")
    assert told["job"]["labels"] == {"n": "nightly-etl"}  # a receiver may route on them
    texts = sorted(m["text"] for m in chat.got)
    assert any(t.startswith(f"Job *adhoc* ({jobs[1].id}) failed: Error(exit 1) after 1 attempt <") for t in texts), texts
    assert any(f"({jobs[2].id}) succeeded <" in t for t in texts), texts
    # and nothing is sent twice, however often the loop looks
    for _ in range(3):
        platform.webhook_loop.cycle()
    assert len(ok.got) == 1 and len(chat.got) == 3
    subs = {s["id"]: s for s in tc.get("/api/v1/subscriptions").json()["items"]}
    assert (subs[both["id"]]["delivered"], subs[both["id"]]["pending"]) == (3, 0)


def test_a_failing_receiver_is_tried_again_then_given_up_saying_why(env, hooks, monkeypatch):
    tc, sdk, engine, platform = env
    ok, _ = hooks
    monkeypatch.setattr(webhook_loop, "BACKOFF", (0.2, 0.2))
    sub = tc.post("/api/v1/subscriptions", json={"webhook": "ops", "on": ["failed"]}).json()
    ok.status = 503
    end(tc, engine, sdk.submit({"name": "a", "command": "x"}), 1)
    [first] = until(lambda: tc.get(f"/api/v1/subscriptions/{sub['id']}/deliveries").json() or None)
    until(lambda: len(ok.got) >= 2, timeout=15)  # tried again after its backoff
    ok.status = 200
    delivered = until(lambda: (d := tc.get(f"/api/v1/subscriptions/{sub['id']}/deliveries").json()[0])["status"]
                      == "sent" and d, timeout=15)
    assert delivered["attempts"] >= 2 and delivered["object_id"] == first["object_id"]
    # a receiver that never answers well is given up after the last try, with its last answer
    ok.status = 500
    end(tc, engine, sdk.submit({"name": "b", "command": "x"}), 1)
    given_up = until(lambda: (d := tc.get(f"/api/v1/subscriptions/{sub['id']}/deliveries").json()[0])["status"]
                     == "failed" and d, timeout=15)
    assert given_up["attempts"] == 3 and given_up["last_error"].startswith("HTTP 500")


def test_a_subscription_narrowed_by_labels_hears_of_the_jobs_its_selector_picks(env, hooks):
    tc, sdk, engine, platform = env
    ok, _ = hooks
    sub = sdk.notify.subscribe("ops", on=["succeeded", "failed"], labels="stage in (prod, canary) , !scratch")
    assert sub.labels == "stage in (prod,canary),!scratch"  # one spelling, as read back
    assert tc.get(f"/api/v1/subscriptions/{sub.id}").json()["labels"] == sub.labels
    jobs = {name: sdk.submit({"name": name, "command": "x", "labels": labels}) for name, labels in [
        ("prod", {"stage": "prod"}), ("canary", {"stage": "canary"}), ("dev", {"stage": "dev"}),
        ("bare", {}), ("scratch", {"stage": "prod", "scratch": ""})]}
    for job in jobs.values():
        end(tc, engine, job, 0)
    until(lambda: len(ok.got) == 2, timeout=15)
    platform.webhook_loop.cycle()
    assert sorted(m["job"]["name"] for m in ok.got) == ["canary", "prod"]


def test_bad_subscriptions_are_refused_naming_the_field(env):
    tc, sdk, engine, platform = env
    for body, field in [({"webhook": "nope"}, "webhook"), ({"webhook": "ops", "on": ["exploded"]}, "on"),
                        ({"webhook": "ops", "on": []}, "on"), ({"webhook": "ops", "url": "http://evil"}, "url"),
                        ({"webhook": "ops", "team": "nlp"}, ""), ({"webhook": "ops", "name": "a\nb"}, "name"),
                        ({"webhook": "ops", "labels": "k in (a"}, "labels"), ({"webhook": "ops", "labels": "x" * 2001},
                                                                                 "labels"),
                        ({"webhook": "ops", "labels": "k", "kind": "pipeline_run"}, "")]:
        r = tc.post("/api/v1/subscriptions", json=body)
        assert r.status_code == 422, (body, r.text)
        assert any(e["field"].startswith(field) for e in r.json()["details"]["errors"]), (body, r.json())
    assert tc.get("/api/v1/subscriptions").json()["items"] == []
    assert tc.get("/api/v1/subscriptions/ws-0123456789").status_code == 404


def test_unsubscribed_a_webhook_hears_no_more(env, hooks):
    tc, sdk, engine, platform = env
    ok, _ = hooks
    sub = tc.post("/api/v1/subscriptions", json={"webhook": "ops", "on": ["succeeded"]}).json()
    end(tc, engine, sdk.submit({"name": "a", "command": "x"}), 0)
    until(lambda: len(ok.got) == 1, timeout=15)
    assert tc.delete(f"/api/v1/subscriptions/{sub['id']}").status_code == 204
    end(tc, engine, sdk.submit({"name": "b", "command": "x"}), 0)
    platform.webhook_loop.cycle()
    assert len(ok.got) == 1 and tc.get("/api/v1/subscriptions").json()["items"] == []


def test_a_pipeline_runs_end_is_told_to_a_subscription_of_pipeline_runs_only(env, hooks):
    tc, sdk, engine, platform = env
    ok, chat = hooks
    runs = tc.post("/api/v1/subscriptions", json={"webhook": "ops", "kind": "pipeline_run", "on": ["failed"]})
    assert runs.status_code == 201, runs.text
    jobs = tc.post("/api/v1/subscriptions", json={"webhook": "chat", "on": ["failed"]}).json()
    assert tc.post("/api/v1/subscriptions", json={"webhook": "ops", "kind": "pipeline_run",
                                                  "queue": "default"}).status_code == 422  # a run has no queue
    run = tc.post("/api/v1/pipelines", json={"spec": {"name": "etl", "steps": {"a": {"command": "x"}}}}).json()
    step = until(lambda: tc.get(f"/api/v1/pipelines/{run['id']}").json()["steps"][0].get("job_id"))
    end(tc, engine, sdk.job(step), 2)
    until(lambda: tc.get(f"/api/v1/pipelines/{run['id']}").json()["status"] == "failed")
    # the run's failure went to the runs' subscription, its step's to the jobs' one
    until(lambda: ok.got and chat.got, timeout=15)
    [told] = ok.got
    assert told["event"] == "pipeline_run.failed" and told["pipeline_run"]["id"] == run["id"]
    assert told["pipeline_run"]["url"].endswith(f"/pipelines/{run['id']}") and "job" not in told
    [said] = chat.got
    assert said["text"].startswith(f"Job *") and f"({step})" in said["text"]
    [d] = tc.get(f"/api/v1/subscriptions/{runs.json()['id']}/deliveries").json()
    assert (d["kind"], d["object_id"], d["status"]) == ("pipeline_run", run["id"], "sent")
    assert jobs["kind"] == "job"


def test_a_receiver_slow_to_answer_holds_up_no_other(env, hooks, slow):
    tc, sdk, engine, platform = env
    ok, _ = hooks
    held = tc.post("/api/v1/subscriptions", json={"webhook": "slow"}).json()  # made first: its delivery is first
    tc.post("/api/v1/subscriptions", json={"webhook": "ops"})
    end(tc, engine, sdk.submit({"name": "a", "command": "x"}), 1)
    until(lambda: ok.got, timeout=15)
    # ops was told while the slow receiver still holds its request (4 s): the POSTs went out side by side (its
    # head may be read a moment after ops answered, on a loaded machine)
    until(lambda: slow.requests == 1, timeout=3)
    [pending] = tc.get(f"/api/v1/subscriptions/{held['id']}/deliveries").json()
    assert (pending["status"], pending["attempts"]) == ("pending", 0)
    # and once its timeout passed, the slow one is set to be tried again, saying why
    again = until(lambda: (d := tc.get(f"/api/v1/subscriptions/{held['id']}/deliveries").json()[0])["attempts"]
                  == 1 and d, timeout=15)
    assert again["status"] == "pending" and again["last_error"] == "TimeoutError: no whole answer within 4 s"


def test_a_job_or_run_is_not_deleted_before_the_webhooks_have_read_its_end(env, hooks, monkeypatch):
    tc, sdk, engine, platform = env
    ok, chat = hooks
    for kind in ("job", "pipeline_run"):
        assert tc.post("/api/v1/subscriptions", json={"webhook": "ops", "kind": kind, "on": ["succeeded"]}).status_code == 201
    monkeypatch.setattr(platform.webhook_loop, "cycle", lambda *a, **k: None)  # the loop reads no event
    job = sdk.submit({"name": "told", "command": "x"})
    end(tc, engine, job, 0)
    run = tc.post("/api/v1/pipelines", json={"spec": {"name": "etl", "steps": {"a": {"command": "x"}}}}).json()
    step = until(lambda: tc.get(f"/api/v1/pipelines/{run['id']}").json()["steps"][0].get("job_id"))
    end(tc, engine, sdk.job(step), 0)
    until(lambda: tc.get(f"/api/v1/pipelines/{run['id']}").json()["status"] == "succeeded")
    # while the ends are unread, deleting would lose their deliveries: refused, saying why
    for path in (f"/api/v1/jobs/{job.id}", f"/api/v1/pipelines/{run['id']}"):
        r = tc.delete(path)
        assert r.status_code == 409 and "not sent to the webhooks yet" in r.json()["message"], r.text
    # once read, both go, and the webhook heard of each (and of the step's job)
    monkeypatch.undo()
    platform.webhook_loop.cycle()
    assert tc.delete(f"/api/v1/jobs/{job.id}").status_code == 204
    assert tc.delete(f"/api/v1/pipelines/{run['id']}").status_code == 204
    until(lambda: len(ok.got) == 3, timeout=15)
    assert sorted(m["event"] for m in ok.got) == ["job.succeeded", "job.succeeded", "pipeline_run.succeeded"]
    assert {m["job"]["id"] for m in ok.got if "job" in m} == {job.id, step}


def test_a_job_that_ends_after_the_newest_events_job_was_deleted_is_told(env, hooks):
    tc, sdk, engine, platform = env
    ok, _ = hooks
    assert tc.post("/api/v1/subscriptions", json={"webhook": "ops", "on": ["succeeded"]}).status_code == 201
    first = sdk.submit({"name": "first", "command": "x"})
    end(tc, engine, first, 0)
    until(lambda: len(ok.got) == 1, timeout=15)
    # its events, the newest ones and read by the webhooks, go with it: on SQLite without AUTOINCREMENT the
    # next job's events took their ids again, all at or below the webhooks' cursor, and its end was never told
    assert tc.delete(f"/api/v1/jobs/{first.id}").status_code == 204
    second = sdk.submit({"name": "second", "command": "x"})
    end(tc, engine, second, 0)
    until(lambda: len(ok.got) == 2, timeout=15)
    assert [m["job"]["id"] for m in ok.got] == [first.id, second.id]


def test_a_delivery_taken_to_be_sent_is_due_to_no_other_sender_until_its_claim_lapses(env, hooks, db_url):
    from trainyard.store import Store
    from trainyard.store.webhooks import CLAIM, WebhookStore

    tc, sdk, engine, platform = env
    loop = platform.webhook_loop
    loop.stop()  # this test is the only sender
    sdk.notify.subscribe("ops", on=["succeeded"], name="claimed-*")
    for i in range(6):
        end(tc, engine, sdk.submit({"name": f"claimed-{i}", "command": "x"}), 0)
    loop.enqueue(loop.store.subscriptions(counts=False))
    now = 1e12  # all of them due
    # four servers' loops take at once: each delivery goes to one of them
    stores = [Store(db_url, run_migrations=False) for _ in range(4)]
    taken: list[list[int]] = [[] for _ in stores]

    def take(i: int) -> None:
        taken[i] = [d["id"] for d in WebhookStore(stores[i]).due(now, 50)]

    try:
        at_once(take, len(stores))
    finally:
        for s in stores:
            s.close()
    every = [i for ids in taken for i in ids]
    assert len(every) == len(set(every)) == 6, taken
    assert loop.store.due(now, 50) == [] and loop.store.due(now + CLAIM - 1, 50) == []  # taken: none due
    again = loop.store.due(now + CLAIM, 3)  # never marked sent (their sender died): due again, as many as asked
    assert len(again) == 3 and set(d["id"] for d in again) <= set(every)
