"""The launcher's read of its job's secrets against real HTTP on loopback: it asks with the attempt's credential,
asks again with the one the engine renewed in launch.json, waits out a server that fails, and stops setup with the
server's own words when refused."""

from __future__ import annotations

import pytest

from tests.support.stub_http import JsonServer
from trainyard.launch import secrets
from trainyard.launch.config import LaunchConfig
from trainyard.launch.prepare import SetupError


@pytest.fixture
def quick(monkeypatch):
    monkeypatch.setattr(secrets, "FIRST_BACKOFF", 0.01)


def config(url: str, tmp_path, token: str = "old") -> LaunchConfig:
    cfg = LaunchConfig(job_id="j-1", attempt_id="j-1-1", attempt=1, server=url, command=["true"], token=token,
                       secrets=["K"])
    cfg.write(tmp_path)
    return cfg


def serve(answers: dict[str, tuple[int, dict]]) -> JsonServer:
    srv = JsonServer(lambda method, path: answers[srv.got[-1]], lambda r: r.headers.get("Authorization", ""))
    return srv


def test_it_asks_with_the_attempts_credential_and_again_with_a_renewed_one(tmp_path, quick):
    srv = serve({"Bearer old": (410, {"message": "no such attempt"}), "Bearer new": (200, {"env": {"K": "v"}})})
    try:
        cfg = config(srv.url, tmp_path)
        config(srv.url, tmp_path, token="new")  # the engine launched the attempt again: launch.json renewed
        assert secrets.fetch(cfg, lambda: False, str(tmp_path)) == {"K": "v"}
        assert srv.got == ["Bearer old", "Bearer new"]
    finally:
        srv.close()


def test_a_refusal_stops_setup_with_the_servers_message_and_a_failing_server_is_asked_again(tmp_path, quick):
    srv = serve({"Bearer old": (410, {"message": "no such attempt: j-1-1"})})
    try:
        with pytest.raises(SetupError, match="the job's secrets: no such attempt: j-1-1"):
            secrets.fetch(config(srv.url, tmp_path), lambda: False, str(tmp_path))  # the same token: no retry
        assert len(srv.got) == 1
    finally:
        srv.close()
    srv = serve({"Bearer old": (500, {"message": "the key is not this server's"})})
    try:
        with pytest.raises(SetupError, match="could not be read: the key is not this server's"):
            secrets.fetch(config(srv.url, tmp_path), lambda: False, str(tmp_path))
        assert len(srv.got) == secrets.ATTEMPTS
    finally:
        srv.close()
