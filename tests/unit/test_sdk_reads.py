"""The plain reads of `ls`, `show` and `logs` (trainyard.sdk.reads) against a real socket: what they read, and
each case they leave to the full SDK (NotQuick) so that it says what it always said."""

import pytest

from tests.support.stub_http import JsonServer
from trainyard import errors
from trainyard.sdk.known import NotQuick
from trainyard.sdk.reads import Reads

JOB = {"id": "j-1", "status": "succeeded", "spec": {"replicas": 1}}


@pytest.fixture
def stub(monkeypatch):
    """A server answering ``stub.answers[path]`` (a path without a query); what was asked is in ``stub.got``."""
    answers: dict = {}
    srv = JsonServer(lambda method, path: answers.get(path.split("?")[0], (404, {"detail": "Not Found"})),
                     lambda request: request)
    srv.answers = answers
    monkeypatch.setenv("TRAINYARD_SERVER", srv.url)
    monkeypatch.setenv("TRAINYARD_TOKEN", "t0k")
    for proxy in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(proxy, raising=False)
    yield srv
    srv.close()


def test_a_job_a_page_of_jobs_and_logs_are_read_as_the_apis_json_with_the_token(stub):
    stub.answers["/api/v1/jobs/j-1"] = (200, JOB)
    stub.answers["/api/v1/jobs"] = (200, {"items": [JOB], "next_cursor": None})
    pages = iter([{"chunks": [{"attempt": 1, "replica": 0, "offset": 0, "data": "a\n"}], "cursor": 7},
                  {"chunks": [], "cursor": 7}])
    reads = Reads()
    assert reads.job("j-1") == JOB
    assert reads.jobs(status=["failed", "running"], name="a b", limit=5, since=1.5)["items"] == [JOB]
    stub.answers["/api/v1/jobs/j-1/logs"] = (200, next(pages))
    chunks = reads.logs("j-1", replica=0)
    assert next(chunks).data == "a\n"
    stub.answers["/api/v1/jobs/j-1/logs"] = (200, next(pages))
    assert list(chunks) == []
    asked = [r.path for r in stub.got]
    assert asked[1] == "/api/v1/jobs?status=failed&status=running&name=a+b&limit=5&since=1.5"
    assert asked[2:] == ["/api/v1/jobs/j-1/logs?replica=0&after=0", "/api/v1/jobs/j-1/logs?replica=0&after=7"]
    assert {r.headers["Authorization"] for r in stub.got} == {"Bearer t0k"}
    assert len({r.port for r in stub.got}) == 1  # one kept connection


def test_an_error_with_a_code_is_the_sdks_typed_error(stub):
    stub.answers["/api/v1/jobs/j-2"] = (404, {"code": "not_found", "message": "no job j-2"})
    with pytest.raises(errors.TrainyardError) as e:
        Reads().job("j-2")
    assert type(e.value) is type(errors.from_dict({"code": "not_found", "message": "no job j-2"}))
    assert e.value.message == "no job j-2"


@pytest.mark.parametrize("answer", [(404, {"detail": "Not Found"}), (307, {}), (502, ["not", "ours"])])
def test_an_answer_without_a_code_is_left_to_the_sdk_to_name(stub, answer):
    stub.answers["/api/v1/jobs/j-3"] = answer
    with pytest.raises(NotQuick):
        Reads().job("j-3")


@pytest.mark.parametrize("job_id", ["a/b", "x y", "", "j?x", "é"])
def test_an_id_that_httpx_would_quote_is_left_to_it(stub, job_id):
    with pytest.raises(NotQuick):
        Reads().job(job_id)
    assert stub.got == []


def test_following_a_log_is_the_sdks(stub):
    with pytest.raises(NotQuick):
        next(Reads().logs("j-1", follow=True))


@pytest.mark.parametrize("url, env", [("https://127.0.0.1:1", {}), ("http://10.1.2.3:8000", {}),
                                      ("http://127.0.0.1:1", {"ALL_PROXY": "http://127.0.0.1:9"})])
def test_a_server_that_is_not_plain_http_here_is_the_sdks(monkeypatch, url, env):
    monkeypatch.setenv("TRAINYARD_SERVER", url)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(NotQuick):
        Reads()


def test_a_server_that_does_not_answer_is_left_to_the_sdk_before_the_first_chunk_and_lost_after(stub):
    stub.answers["/api/v1/jobs/j-1/logs"] = (200, {"chunks": [{"attempt": 1, "replica": 0, "data": "a"}], "cursor": 1})
    reads = Reads()
    chunks = reads.logs("j-1")
    assert next(chunks).data == "a"
    stub.close()
    reads.close()  # the next page needs a new connection, to a server that is gone
    with pytest.raises(errors.ServerUnavailable):
        next(chunks)
    with pytest.raises(NotQuick):
        Reads().job("j-1")
