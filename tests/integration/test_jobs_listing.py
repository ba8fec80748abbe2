"""The jobs listing the web UI pages through: filters, sorts, pages, counts and visibility on the
server, in a fixed number of SQL queries whatever the page size (SQLite and PostgreSQL)."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from trainyard.api.app import create_app
from trainyard.auth.permissions import Visible
from trainyard.config import ServerSettings
from trainyard.auth.tokens import token_hash
from trainyard.engines.fake import FakeEngine
from trainyard.services.platform import Platform
from trainyard.spec import parse_job
from trainyard.spec.job_query import JobFilter
from trainyard.spec.records import NodeInfo
from trainyard.status import AttemptStatus, JobStatus
from trainyard.store import Ending

pytestmark = pytest.mark.postgres

H = token_hash("launcher-token")
NODES = [NodeInfo(name="a", cpu=4, memory=16 * 2**30, gpu=2, gpu_type="A100", gpu_ids=["0", "1"])]


@pytest.fixture
def env(db_url, tmp_path):
    platform = Platform(ServerSettings(home=tmp_path / "home", db=db_url, token="s3cret"), engine=FakeEngine(NODES))
    with TestClient(create_app(platform, "http://testserver"), headers={"Authorization": "Bearer s3cret"}) as tc:
        yield tc, platform.store


def add(store, name, *, queue="default", team=None, owner=None, status=None, created_at=None):
    """A job as the store keeps it, moved to ``status`` with a real attempt where it has one."""
    job = store.create_job(parse_job(f"name: {name}\nqueue: {queue}\ncommand: x\nresources: {{cpu: 1, gpu: 1}}"),
                           owner=owner, team=team)
    if status in ("running", "failed"):
        attempt = store.admit(job.id, [("a", ["0"]), ("a", ["1"])], token_hash=H)
        store.report(attempt.id, 0, token_hash=H, running=True)
        if status == "failed":
            store.finish_attempt(attempt.id, Ending(AttemptStatus.FAILED, 3, "Error(exit 3)", "boom", JobStatus.FAILED))
    elif status == "cancelled":
        store.request_cancel(job.id)
    if created_at is not None:
        with store.engine.begin() as conn:
            conn.exec_driver_sql(f"UPDATE jobs SET created_at = {created_at} WHERE id = '{job.id}'")
    return job.id


@pytest.fixture
def quiet(db_url, tmp_path):
    """The API without its lifespan: no scheduler loop querying the store beside the request counted."""
    platform = Platform(ServerSettings(home=tmp_path / "home", db=db_url, token="s3cret"), engine=FakeEngine(NODES))
    yield TestClient(create_app(platform, "http://testserver"), headers={"Authorization": "Bearer s3cret"}), \
        platform.store
    platform.store.close()


@contextmanager
def counting(engine):
    """The SQL queries run on ``engine`` inside the block (SQLite's explicit BEGIN is no query)."""
    seen: list[str] = []

    def record(conn, cursor, statement, *args):  # noqa: ANN001, ANN002
        if not statement.startswith("BEGIN"):
            seen.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def ids(r):
    assert r.status_code == 200, r.text
    return [j["id"] for j in r.json()["items"]]


def test_filters_sorts_and_search_are_applied_by_the_server(env):
    tc, store = env
    a = add(store, "resnet-a", queue="vision", team="cv", owner="ann", status="running", created_at=1000)
    b = add(store, "bert-b", queue="nlp", team="text", owner="bob", status="failed", created_at=2000)
    c = add(store, "resnet_c", queue="vision", team="cv", owner="bob", created_at=3000)
    d = add(store, "gpt-d", queue="nlp", team="text", owner="ann", status="cancelled", created_at=4000)
    assert ids(tc.get("/api/v1/jobs")) == [d, c, b, a]
    assert ids(tc.get("/api/v1/jobs?status=running&status=pending")) == [c, a]
    assert ids(tc.get("/api/v1/jobs?queue=nlp")) == [d, b]
    assert ids(tc.get("/api/v1/jobs?team=cv&owner=bob")) == [c]
    assert ids(tc.get("/api/v1/jobs?q=resnet")) == [c, a]
    assert ids(tc.get("/api/v1/jobs?q=net_")) == [c]  # "_" is a character here, not LIKE's wildcard
    assert ids(tc.get(f"/api/v1/jobs?q={b[:6]}")) == [b]  # the start of an id
    assert ids(tc.get("/api/v1/jobs?name=bert-b")) == [b]
    assert ids(tc.get("/api/v1/jobs?since=2000&until=4000")) == [c, b]  # since inclusive, until not
    assert ids(tc.get("/api/v1/jobs?sort=created")) == [a, b, c, d]
    assert ids(tc.get("/api/v1/jobs?sort=name")) == [b, d, a, c]
    assert ids(tc.get("/api/v1/jobs?sort=-name")) == [c, a, d, b]
    assert ids(tc.get("/api/v1/jobs?sort=status")) == [d, b, c, a]  # cancelled, failed, pending, running
    assert ids(tc.get("/api/v1/jobs?sort=queue")) == [b, d, a, c]
    listed = {j["id"]: j for j in tc.get("/api/v1/jobs").json()["items"]}
    assert [len(listed[i]["attempts"]) for i in (a, b, c)] == [1, 1, 0]
    assert [r["gpus"] for r in listed[a]["attempts"][0]["replicas"]] == [["0"], ["1"]]


def test_pages_by_offset_or_cursor_with_a_total(env):
    tc, store = env
    made = [add(store, f"j{i}") for i in range(7)][::-1]
    first = tc.get("/api/v1/jobs?limit=3&count=true").json()
    assert [j["id"] for j in first["items"]] == made[:3]
    assert (first["more"], first["total"], first["total_capped"]) == (True, 7, False)
    last = tc.get("/api/v1/jobs?limit=3&offset=6&count=true").json()
    assert ([j["id"] for j in last["items"]], last["more"], last["total"]) == (made[6:], False, 7)
    # the CLI's and SDK's cursor still pages in submit order
    assert ids(tc.get(f"/api/v1/jobs?limit=3&cursor={first['next_cursor']}")) == made[3:6]
    by_name = tc.get("/api/v1/jobs?limit=3&sort=name&count=true").json()
    assert by_name["next_cursor"] is None and by_name["more"] and by_name["total"] == 7
    assert tc.get("/api/v1/jobs?count=true&status=failed").json()["total"] == 0
    assert tc.get("/api/v1/jobs?count=true&limit=1&offset=2").json()["total"] == 7  # counted, unfiltered


def test_counts_per_status_follow_the_filters(env):
    tc, store = env
    for status in ("running", "running", "failed", None):
        add(store, "x", queue="vision", status=status)
    add(store, "y", queue="nlp", status="running")
    counts = tc.get("/api/v1/jobs/counts?queue=vision").json()
    assert (counts["running"], counts["pending"], counts["failed"], counts["succeeded"]) == (2, 1, 1, 0)
    assert tc.get("/api/v1/jobs/counts").json()["running"] == 3


def test_a_caller_sees_only_their_teams_jobs_and_their_own_in_lists_and_counts(env):
    _, store = env
    mine = add(store, "m", team="cv", owner="ann")
    own_elsewhere = add(store, "o", team="text", owner="ann")
    add(store, "t", team="text", owner="bob", status="running")
    ann = Visible(frozenset({"cv"}), "ann")
    assert {j.id for j in store.list_jobs(visible=ann, count=True).items} == {mine, own_elsewhere}
    assert store.list_jobs(visible=ann, count=True, limit=1).total == 2
    assert store.job_counts(JobFilter(), ann).get("running", 0) == 0
    assert store.job_counts(JobFilter(), Visible(frozenset({"text"}), "x")) == {"running": 1, "pending": 1}


BAD = [("status=bogus", "status[0]"), ("sort=size", "sort"), ("limit=0", "limit"), ("offset=-1", "offset"),
       ("sort=name&cursor=5", "cursor"), ("since=10&until=5", "until"), ("q=", "q"), ("queue=" + "x" * 64, "queue"),
       ("since=nan", "since"), ("q=a%00b", "q"), ("owner=%01", "owner"), ("name=a%0Ab", "name")]


@pytest.mark.parametrize(("query", "field"), BAD)
def test_bad_listing_input_is_a_422_naming_the_field(env, query, field):
    tc, _ = env
    for path in ("/api/v1/jobs", "/api/v1/jobs/counts"):
        if path.endswith("counts") and field in ("sort", "limit", "offset", "cursor"):
            continue
        r = tc.get(f"{path}?{query}")
        assert r.status_code == 422, (path, query, r.text)
        assert r.json()["details"]["errors"][0]["field"] == field


NOT_NUMBERS = [("since=NaN", "since", "must be a finite number from 0 to 9007199254740992 (not 'NaN')"),
               ("until=-inf", "until", "must be a finite number from 0 to 9007199254740992 (not '-inf')"),
               ("since=1e400", "since", "must be a finite number from 0 to 9007199254740992 (not '1e400')"),
               ("limit=-1", "limit", "must be a whole number from 1 to 500 (not '-1')"),
               ("limit=abc", "limit", "must be a whole number from 1 to 500 (not 'abc')"),
               ("since=10&until=5", "until", "until must come after since")]


@pytest.mark.parametrize(("query", "field", "message"), NOT_NUMBERS)
def test_a_bad_query_parameter_is_said_as_one_naming_it_and_its_range_not_as_a_spec(env, query, field, message):
    tc, _ = env
    r = tc.get(f"/api/v1/jobs?{query}")
    assert r.status_code == 422 and r.json()["code"] == "invalid_spec", r.text  # the code clients catch, as before
    assert r.json()["message"] == f"invalid query parameter {field}: {message}"
    assert r.json()["details"]["errors"] == [{"field": field, "line": None, "where": field, "message": message,
                                              "in": "query"}]


def test_a_nul_in_the_path_or_query_is_said_as_the_requests_own(env):
    tc, _ = env
    assert tc.get("/api/v1/jobs?q=a%00b").json()["message"] == "invalid query parameter q: holds a NUL byte"
    assert tc.get("/api/v1/jobs/j-a%00b").json()["message"] == "invalid request path: holds a NUL byte"


def test_a_page_costs_the_same_few_queries_whatever_its_size(quiet):
    tc, store = quiet
    for i in range(240):  # running: their attempts are read every time (ended jobs are kept in memory)
        add(store, f"job-{i}", queue="vision" if i % 2 else "nlp", status="running" if i % 10 else None)
    costs = {}
    for limit in (10, 200):
        for query in (f"limit={limit}&count=true", f"limit={limit}&sort=name&status=running&count=true",
                      f"limit={limit}&offset=5&q=job&count=true"):
            with counting(store.engine) as seen:
                assert len(ids(tc.get(f"/api/v1/jobs?{query}"))) == limit
            costs[query.replace(str(limit), "N", 1)] = costs.get(query.replace(str(limit), "N", 1), []) + [len(seen)]
    for query, (small, big) in costs.items():
        assert small == big <= 3, (query, small, big, seen)
    with counting(store.engine) as seen:
        assert tc.get("/api/v1/jobs/counts").json()["running"] == 216
    assert len(seen) == 1


def test_the_sdk_pages_sorts_and_counts_like_the_page(env):
    tc, store = env
    from trainyard.sdk.client import Client

    sdk = Client("http://testserver", token="s3cret", transport=tc._transport)
    made = [add(store, name, status=status) for name, status in (("b", "running"), ("a", None), ("c", "failed"))]
    page = sdk.jobs(sort="name", limit=2, offset=1, count=True)
    assert ([j.id for j in page.items], page.more, page.total) == ([made[0], made[2]], False, 3)
    assert sdk.job_counts(queue="default")["running"] == 1


def test_a_page_asked_again_is_read_again_only_after_a_write(quiet):
    tc, store = quiet
    first = add(store, "first")
    sqlite = store.version is not None  # PostgreSQL may be written by other servers: every request reads
    assert ids(tc.get("/api/v1/jobs")) == [first]
    with counting(store.engine) as seen:
        assert ids(tc.get("/api/v1/jobs")) == [first]
    assert (seen == []) is sqlite
    second = add(store, "second")  # a write through the store: the page is read again
    with counting(store.engine) as seen:
        assert ids(tc.get("/api/v1/jobs")) == [second, first]
    assert seen
    store.request_cancel(second)
    assert tc.get("/api/v1/jobs").json()["items"][0]["status"] == "cancelled"


def test_a_job_another_store_writes_shows_on_the_next_read_of_a_kept_page(quiet, db_url):
    tc, store = quiet
    first = add(store, "first")
    assert ids(tc.get("/api/v1/jobs")) == [first]  # kept (SQLite) for the next request
    # given a second writer of the same database, as a second process would be (or a direct update)
    from trainyard.store import Store

    other = Store(db_url, run_migrations=False)
    try:
        second = add(other, "second")
        assert ids(tc.get("/api/v1/jobs")) == [second, first]
        with store.engine.begin() as conn:  # past the store altogether
            conn.exec_driver_sql(f"UPDATE jobs SET name = 'renamed' WHERE id = '{first}'")
        assert [j["name"] for j in tc.get("/api/v1/jobs").json()["items"]] == ["second", "renamed"]
    finally:
        other.close()
