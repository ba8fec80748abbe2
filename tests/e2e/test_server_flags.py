"""`trainyard server` with flags it cannot serve with: one line naming the flag, exit 2, no traceback."""

import os
import socket
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def server(home, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRAINYARD_HOME": str(home)}
    for key in ("TRAINYARD_SERVER", "TRAINYARD_TOKEN", "RAY_ADDRESS"):
        env.pop(key, None)
    # a timeout, not a hang, if one is taken after all: the server would serve until killed
    return subprocess.run([sys.executable, "-m", "trainyard", "server", *args], env=env, capture_output=True,
                          text=True, timeout=60)


def refused(r: subprocess.CompletedProcess) -> str:
    """The one line a refused start printed."""
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


@pytest.mark.parametrize("args, said", [
    (["--engine", "fake"], "error: --engine: Input should be 'local' or 'ray'"),
    (["--port", "99999"], "error: --port: 99999: a TCP port is 1–65535"),
    (["--port", "-1"], "error: --port: -1: a TCP port is 1–65535"),
    (["--container-runtime", "dokker"], "error: --container-runtime: Input should be 'auto', 'podman', 'docker'"),
    (["--engine", "ray", "--ray-address", "127.0.0.1:9", "--cpus", "4"],
     "error: --cpus: not with --engine ray: Ray's nodes declare their own (ray start --num-cpus N)"),
], ids=["engine", "port too high", "port negative", "container runtime", "capacity with ray"])
def test_a_flag_out_of_its_choices_or_range_is_named(tmp_path, args, said):
    assert refused(server(tmp_path / "home", *args)).startswith(said)


def test_a_port_in_use_says_so_and_suggests_another(tmp_path):
    # given a port another process listens on
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # when a server is asked to listen there
        line = refused(server(tmp_path / "home", "--port", str(port)))
    # then it says which flag, that the port is taken, and what to do
    assert line.startswith(f"error: --port: {port} is in use by another process"), line
    assert "choose another with --port" in line
