"""A launcher that never reaches the server (an address its node cannot reach, a cut network) is not left
starting until it gives up, an hour on: past the server's ``start_deadline`` since its launch, it is
killed and its replica ends LostContact, and the job follows its retry policy."""

from __future__ import annotations

import json
import time

import psutil
from fastapi.testclient import TestClient

from tests.support.waiting import until
from trainyard.api.app import create_app
from trainyard.config import ServerSettings
from trainyard.engines.local import LocalEngine
from trainyard.launch.handle import HANDLE_NAME
from trainyard.sdk.client import Client
from trainyard.services.platform import Platform
from trainyard.spec.records import NodeInfo

UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing listens on loopback there
DEADLINE = 3.0


def test_a_job_whose_launcher_cannot_reach_the_server_ends_lost_contact_past_the_start_deadline(tmp_path):
    # given a server whose launchers are told an address they cannot reach, and a start deadline of 3 s
    home = tmp_path / "home"
    engine = LocalEngine(home, NodeInfo(name="local", cpu=2, memory=2**30), container_runtime="none")
    platform = Platform(ServerSettings(home=home, db=f"sqlite:///{tmp_path / 'db.sqlite'}", token="s3cret",
                                       start_deadline=DEADLINE), engine=engine)
    with TestClient(create_app(platform, UNREACHABLE), headers={"Authorization": "Bearer s3cret"}) as tc:
        sdk = Client("http://testserver", token="s3cret", transport=tc._transport)
        # when a job runs there whose launcher never gets a report through
        job = sdk.submit({"name": "cut-off", "command": "sleep 60", "resources": {"cpu": 0.5}, "retry": {"max": 0}})
        submitted = time.time()
        attempt = until(lambda: (j := sdk.get(job.id)).attempts and j.attempts[0], timeout=10)
        handle = engine.launched_dir(attempt, 0) / HANDLE_NAME
        launcher = json.loads(until(lambda: handle.exists() and handle.read_text(), timeout=10))["pid"]
        # then it ends LostContact soon after the deadline, saying why, and its launcher is gone
        ended = until(lambda: (j := sdk.get(job.id)).status.is_terminal() and j, timeout=DEADLINE + 15)
        took = time.time() - submitted
    a = ended.attempts[0]
    assert (ended.status.value, a.reason) == ("failed", "LostContact"), (a.reason, a.message)
    assert "never reached the server" in a.message
    assert DEADLINE <= took < DEADLINE + 10
    assert not psutil.pid_exists(launcher) or psutil.Process(launcher).status() == psutil.STATUS_ZOMBIE
