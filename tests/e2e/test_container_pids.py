"""The server's process limit on `image:` jobs: the runtime's --pids-limit (tests/e2e/test_containers.py has the
rest of the container tests, and is past 400 lines)."""

from __future__ import annotations

import pytest

from tests.conftest import need
from tests.e2e.test_containers import busybox, containers_of  # noqa: F401  (busybox is a fixture)
from tests.support import images
from tests.support.servers import ServerProcess

need(not images.tools_missing(), f"container tests need {', '.join(images.tools_missing())} (.ci/run installs them)")
pytestmark = pytest.mark.slow


def test_the_servers_pids_max_bounds_a_job_in_an_image(busybox, tmp_path):
    # given a server whose replicas may hold 16 processes (its own: the module's server keeps the default)
    (tmp_path / "server.yaml").write_text("pids_max: 16\n")
    srv = ServerProcess(tmp_path / "home", ["--cpus", "1", "--memory", "1Gi", "--container-runtime", "podman",
                                            "--config", str(tmp_path / "server.yaml")])
    srv.start()
    try:
        # when a job in an image tries to hold 40
        job = srv.client().submit({"name": "forks", "image": busybox, "retry": {"max": 0}, "command":
                                   "cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max; "
                                   "i=0; while [ $i -lt 40 ]; do sleep 5 & i=$((i+1)); done; echo all started"})
        info, logs = job.wait(timeout=90), job.logs()
    finally:
        srv.stop_all()
    # then the runtime set the limit and the kernel refused the forks past it
    assert info.status.value == "failed" and logs.splitlines()[0] == "16", logs
    assert "can't fork" in logs and "all started" not in logs, logs
    assert containers_of(job.id) == []
