"""Queues, quotas and preemption through the API, with the fake engine, on SQLite and PostgreSQL."""

import pytest
from fastapi.testclient import TestClient

from trainyard import errors
from trainyard.api.app import create_app
from trainyard.config import ServerSettings
from trainyard.engines.fake import FakeEngine
from trainyard.sdk.client import Client
from trainyard.sdk.clusters import Clusters, cluster_spec
from trainyard.services.platform import Platform
from trainyard.spec.records import NodeInfo
from tests.support.waiting import until

pytestmark = pytest.mark.postgres

TOP = 2**31 - 1
NODE = NodeInfo(name="a", cpu=4, memory=16 * 2**30, gpu=2, gpu_type="A100", gpu_ids=["0", "1"])


@pytest.fixture
def make_env(db_url, tmp_path):
    made = []

    def make(**settings):
        engine = FakeEngine([NODE])
        platform = Platform(ServerSettings(home=tmp_path / "home", db=db_url, **settings), engine=engine)
        tc = TestClient(create_app(platform, "http://testserver")).__enter__()
        made.append(tc)
        return Client("http://testserver", transport=tc._transport), engine

    yield make
    for tc in made:
        tc.__exit__(None, None, None)


def test_queues_are_created_listed_replaced_and_deleted(make_env):
    sdk, _ = make_env()
    info = sdk.create_queue({"name": "team-a", "priority": "high", "quota": {"cpu": 8, "memory": "32Gi", "gpu": {"A100": 1}}})
    assert (info.queue.team, info.queue.priority, info.queue.quota.gpu) == ("team-a", 200, {"A100": 1})
    with pytest.raises(errors.AlreadyExists):
        sdk.create_queue({"name": "team-a"})
    sdk.create_queue({"name": "team-a", "quota": {"gpu": 2}}, replace=True)
    assert sdk.queue("team-a").queue.quota.gpu == {"*": 2}
    with pytest.raises(errors.InvalidSpec) as exc:
        sdk.create_queue({"name": "x", "quota": {"memory": "lots"}})
    assert exc.value.errors[0]["field"] == "quota.memory"
    sdk.delete_queue("team-a")
    with pytest.raises(errors.QueueNotFound):
        sdk.queue("team-a")


def test_once_queues_exist_a_job_naming_an_unknown_one_is_refused_and_nothing_is_stored(make_env):
    sdk, _ = make_env()
    sdk.submit({"command": "x", "queue": "anything"})  # no queues defined: any name is its own line
    sdk.create_queue({"name": "team-a"})
    with pytest.raises(errors.InvalidSpec) as exc:
        sdk.submit({"command": "x", "queue": "team-b"})
    assert exc.value.errors[0]["field"] == "queue" and "team-a" in exc.value.errors[0]["message"]
    assert len(sdk.jobs().items) == 1
    sdk.submit({"command": "x", "queue": "default"})  # jobs that name no queue are always accepted


def test_a_queue_at_its_gpu_quota_holds_jobs_back_and_says_so(make_env):
    sdk, engine = make_env()
    sdk.create_queue({"name": "team-a", "quota": {"gpu": {"A100": 1}}, "borrowing": False})
    first = sdk.submit({"command": "x", "queue": "team-a", "resources": {"gpu": 1}})
    second = sdk.submit({"command": "x", "queue": "team-a", "resources": {"gpu": 1}})
    third = sdk.submit({"command": "x", "queue": "team-a", "resources": {"gpu": 1}})
    until(lambda: len(engine.launched) == 1 and third.refresh().position == 1)
    assert first.refresh().status.value == "starting"
    reason = second.refresh().reason
    assert "quota" in reason and "1/1" in reason and "first in queue team-a" in reason, reason
    assert "1 job ahead in queue team-a" in third.refresh().reason
    usage = sdk.queue("team-a")
    assert (usage.usage.running, usage.usage.gpu, usage.pending) == (1, {"A100": 1}, 2)
    first_attempt = next(iter(engine.launched))
    engine.finish(first_attempt)
    engine.join(first_attempt)  # the platform saw it end, and gave its room to the next in line
    assert len(engine.launched) == 2
    assert second.refresh().status.value == "starting" and third.refresh().position == 0


def test_a_high_priority_job_preempts_low_priority_work_which_is_requeued_and_not_preempted_back(make_env):
    sdk, engine = make_env()
    low = sdk.submit({"name": "low", "command": "x", "priority": "low", "resources": {"cpu": 4}})
    low_attempt = until(lambda: next(iter(engine.launched), None))
    high = sdk.submit({"name": "high", "command": "x", "priority": "high", "resources": {"cpu": 4}})
    engine.join(low_attempt)  # stopped by the platform, and its end recorded
    assert low_attempt in engine.cancelled
    assert low.refresh().attempts[0].preempted_by == high.id
    high_attempt = next(a for a in engine.launched if a.startswith(high.id))
    info = low.refresh()
    assert info.status.value == "pending"
    assert (info.attempts[0].reason, info.attempts[0].status.value) == ("Preempted", "cancelled")
    assert not high.refresh().attempts[0].stop_reason  # the requeued job does not preempt it back
    engine.finish(high_attempt)
    engine.join(high_attempt)
    assert len([a for a in engine.launched if a.startswith(low.id)]) == 2


def test_work_that_is_not_preemptible_keeps_running(make_env):
    sdk, engine = make_env()
    sdk.submit({"command": "x", "priority": "low", "preemptible": False, "resources": {"cpu": 4}})
    until(lambda: engine.launched)
    high = sdk.submit({"command": "x", "priority": "urgent", "resources": {"cpu": 4}})
    until(lambda: (high.refresh().reason or "").startswith("needs 4 cores"))
    assert engine.cancelled == []


def test_the_server_loads_its_queue_file_and_a_bad_one_names_the_line(make_env, tmp_path):
    good = tmp_path / "queues.yaml"
    good.write_text("queues:\n  - name: research\n    quota: {gpu: {A100: 2}, jobs: 5}\n  - name: prod\n    priority: 10\n")
    sdk, _ = make_env(queues_file=good)
    assert [q.queue.name for q in sdk.queues()] == ["prod", "research"]
    assert sdk.queue("research").queue.quota.jobs == 5
    bad = tmp_path / "bad.yaml"
    bad.write_text("queues:\n  - name: research\n    quota:\n      gpu: {A100: -1}\n")
    with pytest.raises(errors.InvalidSpec) as exc:
        make_env(queues_file=bad)
    assert "bad.yaml:4" in str(exc.value) and "quota.gpu" in str(exc.value)


def test_a_queue_with_a_memory_or_cpu_quota_refuses_jobs_it_could_not_count_and_stores_nothing(make_env):
    """A job naming no memory held none by the quota's count while its processes took what they liked."""
    sdk, _ = make_env()
    sdk.create_queue({"name": "capped", "quota": {"cpu": 2, "memory": "1Gi"}})
    sdk.create_queue({"name": "gpus-only", "quota": {"gpu": 1}})
    for spec, field in (({"command": "x", "queue": "capped"}, "resources.memory"),
                        ({"command": "x", "queue": "capped", "resources": {"cpu": 0, "memory": "1Mi"}},
                         "resources.cpu")):
        with pytest.raises(errors.TrainyardError) as exc:
            sdk.submit(spec)
        assert exc.value.details.get("field") == field and "capped" in str(exc.value), exc.value
    with pytest.raises(errors.TrainyardError) as exc:  # a sweep's trials are jobs on the queue too
        sdk.sweep({"name": "s", "job": {"command": "x", "queue": "capped"}, "metric": {"name": "loss"},
                   "parameters": {"lr": {"values": [1, 2]}}})
    assert "resources.memory" in str(exc.value)
    with pytest.raises(errors.TrainyardError) as exc:  # a Dask cluster's scheduler is a job on the queue too
        Clusters(sdk.http).create(cluster_spec(queue="capped", worker_memory="256Mi"))
    assert exc.value.details.get("field") == "scheduler_memory", exc.value
    assert sdk.jobs().items == []
    sdk.submit({"command": "x", "queue": "capped", "resources": {"cpu": 0.5, "memory": "256Mi"}})
    sdk.submit({"command": "x", "queue": "gpus-only", "resources": {"cpu": 0}})  # what its quota counts, it says
    sdk.submit({"command": "x"})  # the default queue has no quota
    assert len(sdk.jobs().items) == 3


def test_a_maintainer_defines_its_teams_queues_but_quota_priority_and_borrowing_are_an_admins(db_url, tmp_path):
    from tests.support.inprocess import in_process

    with in_process(db_url, tmp_path / "home", [NODE], auth=True) as e:
        # given an admin's queue for vision (what divides the cluster between teams) and carol, vision's maintainer
        e.sdk.create_queue({"name": "vision-q", "team": "vision", "priority": "high", "quota": {"cpu": 1, "jobs": 2},
                            "max_priority": "high"})
        made = e.sdk.identity.create_user("carol", team="vision", role="maintainer")
        carol = {"Authorization": f"Bearer {made.token.secret}"}

        def define(queue: dict, replace: bool = False):  # noqa: ANN202
            return e.tc.post("/api/v1/queues", json={"queue": {"team": "vision", **queue}, "replace": replace},
                             headers=carol)

        # when carol changes the quota, priority, max_priority or borrowing the admin set, or gives a new queue its own
        for queue, replace, field in (({"name": "vision-q", "quota": {"jobs": 100}}, True, "quota"),
                                      ({"name": "vision-q", "quota": {"cpu": 1, "jobs": 2}}, True, "priority"),
                                      ({"name": "vision-q", "priority": 200, "quota": {"cpu": 1, "jobs": 2},
                                        "max_priority": "high", "borrowing": False}, True, "borrowing"),
                                      ({"name": "vision-q", "priority": 200, "quota": {"cpu": 1, "jobs": 2},
                                        "max_priority": TOP}, True, "max_priority"),
                                      ({"name": "vision-q", "priority": 200, "quota": {"cpu": 1, "jobs": 2}}, True,
                                       "max_priority"),
                                      ({"name": "vision-max", "max_priority": "urgent"}, False, "max_priority"),
                                      ({"name": "vision-big", "quota": {"cpu": 4}}, False, "quota"),
                                      ({"name": "vision-top", "priority": TOP}, False, "priority")):
            r = define(queue, replace)
            # then it is refused naming the field, and the admin's queue is as it was
            assert r.status_code == 403 and r.json()["details"]["field"] == field, (queue, r.text)
            assert "admin" in r.json()["message"]
        kept = e.sdk.queue("vision-q").queue
        assert (kept.priority, kept.quota.cpu, kept.quota.jobs, kept.borrowing, kept.max_priority) == \
            (200, 1, 2, True, 200)
        # while a queue of its own with none of them, or the admin's queue with its idle-GPU action changed, is hers
        assert define({"name": "vision-scratch"}).status_code == 201
        same = {"name": "vision-q", "priority": 200, "quota": {"cpu": 1, "jobs": 2}, "idle_gpus": "cancel",
                "max_priority": 200}
        assert define(same, replace=True).status_code == 201
        assert e.sdk.queue("vision-q").queue.max_priority == 200  # her replacement keeps the admin's ceiling


def test_with_auth_off_a_jobs_priority_is_not_held_to_its_queues_max_priority(make_env):
    # given one user, the laptop's default (every caller is the local admin), and a queue with a ceiling
    sdk, _ = make_env()
    assert sdk.create_queue({"name": "team-a", "max_priority": "low"}).queue.max_priority == 0
    # then any priority is taken, on it as on the default queue (which a member's job may not pass normal on)
    high = sdk.submit({"command": "x", "queue": "team-a", "priority": TOP})
    urgent = sdk.submit({"command": "x", "priority": "urgent"})
    assert (sdk.get(high.id).spec.priority, sdk.get(urgent.id).spec.priority) == (TOP, 300)
