"""Alembic upgrades from every earlier revision, with data in the database, on SQLite and PostgreSQL.

A database is brought to revision R, filled with rows as the schema then had
them (jobs, attempts, replicas, logs, metrics, outputs, and from 0002 queues,
from 0003 pipeline runs), then opened with ``Store``, which upgrades it to head;
everything must read back through the store.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory

from trainyard.spec import parse_job
from trainyard.status import JobStatus
from trainyard.store import Store
from trainyard.store.db import MIGRATIONS, normalize_url

pytestmark = pytest.mark.postgres
NOW = 1_700_000_000.0


def alembic_config(url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", normalize_url(url).replace("%", "%%"))
    return cfg


def upgrade_to(url: str, revision: str) -> None:
    cfg = alembic_config(url)
    engine = sa.create_engine(normalize_url(url))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
    engine.dispose()


def revisions() -> list[str]:
    script = ScriptDirectory.from_config(alembic_config("sqlite://"))
    return [r.revision for r in reversed(list(script.walk_revisions()))]


EARLIER = revisions()[:-1]


def rows() -> dict[str, list[dict]]:
    """One of everything, with every column any revision had; each revision takes the columns it has."""
    spec = parse_job("name: old\ncommand: echo hi\nresources: {cpu: 1}\nparams: {lr: 0.1}\n").model_dump(mode="json")
    return {
        "jobs": [
            {"id": "j-old1", "seq": 1, "name": "old", "status": "running", "queue": "team-a", "priority": 50,
             "spec": spec, "snapshot": None, "created_at": NOW, "updated_at": NOW, "not_before": None,
             "reason": None, "position": None},
            {"id": "j-old2", "seq": 2, "name": "old", "status": "succeeded", "queue": "default", "priority": 50,
             "spec": {**spec, "labels": {"exp": "old", "team.example.com/owner": "ann"}},
             "snapshot": None, "created_at": NOW + 1, "updated_at": NOW + 2, "not_before": None,
             "reason": None, "position": None},
        ],
        # from 0022 the app writes a job's labels beside its spec (before, 0022's upgrade fills them)
        "job_labels": [{"job_id": "j-old2", "key": "exp", "value": "old"},
                       {"job_id": "j-old2", "key": "team.example.com/owner", "value": "ann"}],
        "attempts": [
            {"id": "j-old1-1", "job_id": "j-old1", "number": 1, "status": "running", "node": "node-a", "gpus": [],
             "handle": {"replicas": []}, "exit_code": None, "reason": None, "message": None, "created_at": NOW,
             "started_at": NOW, "ended_at": None, "last_contact_at": NOW, "stop_reason": None,
             "preempted_by": None, "borrowed": False, "token_hash": None},
            {"id": "j-old2-1", "job_id": "j-old2", "number": 1, "status": "succeeded", "node": "node-a",
             "gpus": ["0"], "handle": {}, "exit_code": 0, "reason": "Succeeded", "message": "", "created_at": NOW,
             "started_at": NOW, "ended_at": NOW + 2, "last_contact_at": NOW + 2, "stop_reason": None,
             "preempted_by": None, "borrowed": False, "token_hash": None},
        ],
        "replicas": [
            {"attempt_id": "j-old1-1", "index": 0, "node": "node-a", "gpus": [], "status": "running",
             "exit_code": None, "reason": None, "message": None, "started_at": NOW, "ended_at": None,
             "last_contact_at": NOW, "log_size": 6, "metrics_offset": 0},
            {"attempt_id": "j-old2-1", "index": 0, "node": "node-a", "gpus": ["0"], "status": "succeeded",
             "exit_code": 0, "reason": "Succeeded", "message": "", "started_at": NOW, "ended_at": NOW + 2,
             "last_contact_at": NOW + 2, "log_size": 6, "metrics_offset": 40},
        ],
        "log_chunks": [{"job_id": "j-old2", "attempt_id": "j-old2-1", "attempt": 1, "replica": 0, "offset": 0,
                        "data": "hello\n"}],
        "metrics": [{"job_id": "j-old2", "attempt": 1, "replica": 0, "step": 3, "name": "loss", "value": 0.25,
                     "ts": NOW + 1}],
        "artifacts": [{"job_id": "j-old2", "attempt": 1, "path": "model.bin", "size": 7,
                       "digest": "sha256:" + "0" * 64, "url": "file:///tmp/model.bin"}],
        "queues": [{"name": "team-a", "team": "vision", "priority": 10, "cpu": 4.0, "memory": 2**30,
                    "gpus": {"A100": 2}, "max_running": 5, "borrowing": False, "source": "api",
                    "created_at": NOW}],
        "pipeline_runs": [{"id": "p-old1", "seq": 1, "name": "oldpipe", "status": "succeeded", "spec": {"steps": {}},
                           "params": {"workers": 1}, "workdirs": {}, "source": None, "warnings": [], "retries": 0,
                           "reason": None, "created_at": NOW, "updated_at": NOW + 2, "ended_at": NOW + 2}],
        "pipeline_steps": [{"run_id": "p-old1", "name": "train", "step": "train", "position": 0, "index": None,
                            "item": None, "status": "succeeded", "job": {"command": "echo hi"}, "needs": [],
                            "inputs": {}, "outputs": ["model"], "cache": True, "workdir": ".", "job_id": "j-old2",
                            "jobs": ["j-old2"], "cache_key": "k" * 64, "cached_from": None,
                            "artifacts": {"model": "a-old1"}, "reason": None, "started_at": NOW,
                            "ended_at": NOW + 2}],
        "pipeline_artifacts": [{"id": "a-old1", "digest": "sha256:" + "1" * 64, "run_id": "p-old1", "step": "train",
                                "job_id": "j-old2", "attempt": 1, "output": "model", "url": "file:///tmp/m",
                                "size": 7, "files": 1, "inputs": {}, "code": None, "cache_key": "k" * 64,
                                "created_at": NOW + 2}],
        "subscriptions": [{"id": "ws-old1", "owner": "alice", "webhook": "ops", "on": ["failed"], "kind": "job",
                           "scope": "mine", "team": None, "queue": None, "name": "nightly-*", "created_at": NOW}],
        # deleted jobs' attempts (0019): summed for /metrics from 0020
        "usage_archive": [{"attempt_id": f"j-gone-{i}", "job_id": "j-gone", "queue": "gone-q", "queue_team": None,
                           "team": None, "owner": "alice", "resources": {"cpu": 1}, "replicas": 1, "node": "node-a",
                           "status": status, "reason": reason, "created_at": NOW, "ended_at": NOW + 1,
                           "preempted_by": by, "wait": wait}
                          for i, (status, reason, by, wait) in enumerate([("failed", "Error(exit 3)", None, 3.0),
                                                                         ("failed", "Preempted", "j-old1", None)])],
    }


def fill(url: str) -> set[str]:
    """Insert ``rows()`` into the tables that exist now, with the columns they have; the tables filled."""
    engine = sa.create_engine(normalize_url(url))
    meta = sa.MetaData()
    meta.reflect(engine)
    filled = set()
    with engine.begin() as conn:
        for name, values in rows().items():  # in foreign-key order
            if name not in meta.tables:
                continue
            table = meta.tables[name]
            conn.execute(table.insert(), [{k: v for k, v in row.items() if k in table.c} for row in values])
            filled.add(name)
    engine.dispose()
    return filled


def test_the_revisions_are_the_ones_this_test_knows():
    # a new one: give rows() its columns
    assert revisions() == ["0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008_ui_indexes",
                           "0009_services", "0010_service_restarts", "0011_metric_series", "0012_sweeps",
                           "0013_secrets", "0014_schedules", "0015_webhooks", "0016_node_cordons",
                           "0017_sweep_cursors", "0018_job_dependencies", "0019_usage_archive", "0020_archive_counts",
                           "0021_subscription_labels", "0022_job_labels", "0023_replica_requests",
                           "0024_labels_rev", "0025_snapshot_owners", "0026_dask_cluster_tls",
                           "0027_service_replica_token", "0028_sqlite_autoincrement", "0029_queue_max_priority",
                           "0030_users_os_user_unique"]


@pytest.mark.parametrize("start", EARLIER)
def test_upgrading_from_an_earlier_revision_keeps_the_data(db_url, start):
    upgrade_to(db_url, start)
    filled = fill(db_url)
    assert {"jobs", "attempts", "replicas", "log_chunks", "metrics", "artifacts"} <= filled
    assert ("queues" in filled) == (start >= "0002") and ("pipeline_runs" in filled) == (start >= "0003")

    store = Store(db_url)  # upgrades to head
    try:
        running, done = store.get_job("j-old1"), store.get_job("j-old2")
        assert (running.status.value, done.status.value) == ("running", "succeeded")
        assert running.spec.command == "echo hi" and running.spec.params == {"lr": 0.1}
        assert running.queue == "team-a" and running.created_at == NOW
        [attempt] = done.attempts
        assert (attempt.id, attempt.exit_code, attempt.reason, attempt.node) == ("j-old2-1", 0, "Succeeded", "node-a")
        assert attempt.replicas[0].gpus == ["0"]
        assert [a.id for a in store.active_attempts()] == ["j-old1-1"]  # still running, and still tracked
        assert "".join(c.data for c in store.read_logs("j-old2")[0]) == "hello\n"
        assert [(m.step, m.name, m.value) for m in store.metrics("j-old2")] == [(3, "loss", 0.25)]
        assert [(a.path, a.size) for a, _ in store.artifacts("j-old2")] == [("model.bin", 7)]
        # an attempt from before 0004 has no credential: its reports are refused, not let in
        assert store.get_attempt("j-old1-1").status.value == "running"

        if start >= "0002":
            q = store.get_queue("team-a")
            assert (q.team, q.priority, q.borrowing, q.quota.cpu, q.quota.jobs) == ("vision", 10, False, 4.0, 5)
        if start >= "0003":
            from trainyard.store.pipelines import PipelineStore

            run = PipelineStore(store).get_run("p-old1")
            assert run.status.value == "succeeded" and run.params == {"workers": 1}
            assert [(s.name, s.status, s.job_id) for s in run.steps] == [("train", "succeeded", "j-old2")]

        if "0019" <= start < "0020":  # the archive's counts, summed by 0020, as /metrics reads them
            outcomes, waits = store.attempt_outcomes(), store.admission_waits()["gone-q"]
            assert sorted(e for e in outcomes.ended if e[0] == "gone-q") == [("gone-q", "Error", 1),
                                                                             ("gone-q", "Preempted", 1)]
            assert outcomes.preempted["gone-q"] == 1 and (waits.count, waits.total, waits.buckets[:2]) == (1, 3.0, [0, 1])

        if start >= "0015":  # a subscription from before 0021 hears of jobs whatever their labels
            from trainyard.store.webhooks import WebhookStore

            [sub] = WebhookStore(store).subscriptions()
            assert (sub.id, sub.name, sub.labels) == ("ws-old1", "nightly-*", None)

        # a job's labels are found by a label filter, from the table 0022 filled (or the app wrote)
        from trainyard.spec.job_query import JobFilter
        from trainyard.spec.label_selector import parse_selector

        def labelled(text: str) -> list[str]:
            return [j.id for j in store.list_jobs(JobFilter(labels=parse_selector(text, "label"))).items]

        assert labelled("exp=old,team.example.com/owner") == ["j-old2"] and labelled("exp!=old") == ["j-old1"]

        # jobs from before 0005 belong to the server's own identity: no owner, no team
        assert (running.owner, running.team) == (None, None)

        # and the upgraded database takes new work, users and tokens included
        new = store.create_job(parse_job("command: echo new"), owner="alice", team="vision")
        assert (store.get_job(new.id).status.value, store.get_job(new.id).owner) == ("pending", "alice")
        store.create_user("alice", admin=False, team="vision", role="member", os_user=None)
        tok = store.add_token("alice", "laptop", "f" * 64, None)
        assert store.token_owner("f" * 64, NOW).caller.teams == {"vision": "member"}
        assert store.tokens("alice")[0].id == tok.id
        # from 0007 every status change is an event, old jobs' included (their past is not made up)
        assert [(e.old_status, e.new_status, e.actor) for e in store.events("job", new.id)] == [
            (None, "pending", "user")]
        assert store.request_cancel("j-old1") == JobStatus.CANCELLING
        # a row written once the triggers exist (from 0007) also has its creation event
        created = [(None, "running", "user")] if start >= "0007" else []
        assert [(e.old_status, e.new_status, e.actor) for e in store.events("job", "j-old1")] == [
            *created, ("running", "cancelling", "user")]
        if start >= "0002":
            assert store.get_queue("team-a").idle_gpus == "flag"
            # from before 0029 a queue has no ceiling of its own: a non-admin's jobs on it go up to normal
            assert store.get_queue("team-a").max_priority is None
    finally:
        store.close()


FOLLOWED = ("log_chunks", "events", "deliveries")  # 0028: AUTOINCREMENT on SQLite


def followed(engine: sa.Engine) -> tuple[dict, dict]:
    """Every row of the ``FOLLOWED`` tables, and their indexes and unique constraints."""
    insp = sa.inspect(engine)
    shape = {n: (sorted(map(repr, insp.get_indexes(n))), sorted(map(repr, insp.get_unique_constraints(n))))
             for n in FOLLOWED}
    with engine.connect() as conn:
        return {n: conn.execute(sa.text(f"SELECT * FROM {n} ORDER BY id")).all() for n in FOLLOWED}, shape


@pytest.mark.parametrize("events_left", [3, 0])  # 0: every event deleted, the table empty
def test_0028_keeps_every_row_and_gives_no_id_at_or_below_one_given_before(db_url, events_left):
    upgrade_to(db_url, "0027_service_replica_token")
    fill(db_url)
    engine = sa.create_engine(normalize_url(db_url))
    meta = sa.MetaData()
    meta.reflect(engine, only=[*FOLLOWED, "event_cursors"])
    chunk = rows()["log_chunks"][0]
    with engine.begin() as conn:
        conn.execute(meta.tables["log_chunks"].insert(), [{**chunk, "offset": 6, "data": "bye\n"}])
        conn.execute(meta.tables["deliveries"].insert(), [dict(
            subscription_id="ws-old1", webhook="ops", event_id=2, kind="job", object_id="j-old2", event="failed",
            payload={}, status="sent", attempts=1, created_at=NOW)])
        # the webhooks read to event 9, and the newest events went since (their jobs deleted): on SQLite without
        # AUTOINCREMENT their ids were free again, at or below the cursor
        events = meta.tables["events"]
        conn.execute(events.insert(), [dict(kind="job", object_id="j-gone", ts=NOW, new_status="pending",
                                            actor="user")] * 6)
        assert conn.execute(sa.select(sa.func.max(events.c.id))).scalar() == 9
        conn.execute(events.delete().where(events.c.id > events_left))
        conn.execute(meta.tables["event_cursors"].insert(), [{"name": "webhooks", "event_id": 9}])
    before = followed(engine)
    assert [len(before[0][n]) for n in FOLLOWED] == [2, events_left, 1]

    Store(db_url).close()  # upgrades to head
    assert followed(engine) == before
    store = Store(db_url)
    try:
        job = store.create_job(parse_job("command: echo new"))  # its creation is an event (0007's triggers)
    finally:
        store.close()
    given = {n: before[0][n][-1] for n in ("log_chunks", "deliveries")}  # the events: by the job's creation
    with engine.begin() as conn:
        new = {n: conn.execute(meta.tables[n].insert().values(again(n, row))).inserted_primary_key[0]
               for n, row in given.items()}
        [created] = conn.execute(sa.text("SELECT id FROM events WHERE object_id = :j"), {"j": job.id}).scalars()
    engine.dispose()
    assert all(new[n] > given[n].id for n in given), (new, given)
    assert created > 9


def again(name: str, row: sa.Row) -> dict:
    """``row`` of table ``name`` once more, with a new id (a delivery: of another event)."""
    out = {k: v for k, v in row._mapping.items() if k != "id"}
    return {**out, "event_id": out["event_id"] + 1} if name == "deliveries" else out


def test_a_new_database_logs_nothing_and_an_upgrade_one_line_as_it_starts_and_one_as_it_ends(db_url, tmp_path,
                                                                                              caplog):
    import logging

    def said() -> list[tuple[str, str]]:
        return [(r.name, r.getMessage()) for r in caplog.records if r.name.startswith(("alembic", "trainyard.store"))]

    caplog.set_level(logging.INFO)
    upgrade_to(db_url, EARLIER[-1])
    caplog.clear()
    Store(db_url).close()  # upgrades to head
    head = revisions()[-1]
    assert [name for name, _ in said()] == ["trainyard.store", "trainyard.store"], said()
    assert said()[0][1] == f"upgrading the database's schema from revision {EARLIER[-1]} to {head}"
    assert said()[1][1].startswith(f"the database's schema is at revision {head} (upgraded in ")
    caplog.clear()
    Store(db_url).close()  # at the newest schema already: nothing to say
    Store(f"sqlite:///{tmp_path / 'new.db'}").close()  # a new database: its tables made, quietly
    assert said() == []


def test_0030_refuses_a_database_whose_users_share_an_account_naming_them_and_upgrades_once_they_do_not(db_url):
    from alembic.runtime.migration import MigrationContext

    from trainyard.errors import InvalidSpec, TrainyardError

    # given users made before each needed an account of its own: bob and carol share 'ml'; dave and erin have none
    upgrade_to(db_url, "0029_queue_max_priority")
    engine = sa.create_engine(normalize_url(db_url))
    users = sa.Table("users", sa.MetaData(), autoload_with=engine)
    with engine.begin() as conn:
        conn.execute(users.insert(), [dict(name=n, admin=False, os_user=a, disabled=False, created_at=NOW)
                                      for n, a in (("bob", "ml"), ("carol", "ml"), ("dave", None), ("erin", None))])
    # when a server opens it, then it says which users share which account and how to part them
    with pytest.raises(TrainyardError) as refused:
        Store(db_url)
    said = refused.value.message
    assert "share Unix accounts (account 'ml': users bob, carol)" in said and "dave" not in said, said
    assert "UPDATE users SET os_user = 'ACCOUNT' WHERE name = 'USER'" in said, said
    # and leaves the schema as it was (not half-upgraded)
    with engine.connect() as conn:
        assert MigrationContext.configure(conn).get_current_revision() == "0029_queue_max_priority"
    # once the admin gives carol no account (disabled), it upgrades
    with engine.begin() as conn:
        conn.execute(users.update().where(users.c.name == "carol").values(os_user=None, disabled=True))
    engine.dispose()
    store = Store(db_url)
    try:
        # users with no account may be many; an account is one user's, refused naming whose it is
        store.create_user("fred", admin=False, team=None, role=None, os_user=None)
        with pytest.raises(InvalidSpec) as taken:
            store.create_user("gina", admin=False, team="vision", role="member", os_user="ml")
        [error] = taken.value.errors
        assert error["field"] == "os_user" and "account 'ml' is user bob's already" in error["message"], error
        assert [u.name for u in store.users()] == ["bob", "carol", "dave", "erin", "fred"]
    finally:
        store.close()
