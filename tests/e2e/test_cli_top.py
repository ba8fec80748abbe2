"""`trainyard top` in a real terminal (tmux): it draws nodes and running jobs, and q quits it; to a pipe, one view."""

import shlex
import shutil
import subprocess
import sys
import time

import pytest

from tests.conftest import need
from tests.support.waiting import until

pytestmark = pytest.mark.slow


def wait_for(pane, text: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        screen = pane()
        if text in screen:
            return screen
        time.sleep(0.2)
    raise AssertionError(f"{text!r} never showed; the screen:\n{pane()}")


def test_top_renders_in_a_terminal_and_quits_on_q(server, tmp_path):
    need(shutil.which("tmux") is not None, "tmux is not installed")
    job_id = server.cli("run", "--name", "sleeper", "--gpu", "2", "--", "sleep", "60").stdout.strip()
    assert job_id
    tmux = ["tmux", "-L", f"trainyard-test-{tmp_path.name}"]  # a server of our own: never the user's sessions
    env = {**server.env, "TRAINYARD_SERVER": server.url}
    # the pane's own size, not a COLUMNS the test run may carry
    command = " ".join(["env", "-u", "COLUMNS", "-u", "LINES", *(shlex.quote(f"{k}={v}") for k, v in env.items() if k.startswith(("TRAINYARD", "PYTHONPATH"))),
                        shlex.quote(sys.executable), "-m", "trainyard", "top", "--interval", "0.5",
                        "; echo top-exited-$?; sleep 60"])
    subprocess.run([*tmux, "new-session", "-d", "-s", "top", "-x", "160", "-y", "45", command], check=True)

    def pane() -> str:
        return subprocess.run([*tmux, "capture-pane", "-p", "-t", "top"], capture_output=True, text=True).stdout

    try:
        screen = wait_for(pane, "sleeper")
        assert "nodes" in screen and "A100" in screen and "q to quit" in screen, screen
        screen = wait_for(pane, "running")
        assert "2/4" in screen  # the node's GPUs: two of four held by the job
        node = server.client().nodes()[0].name
        assert server.cli("nodes", "cordon", node).returncode == 0
        wait_for(pane, f"{node} (cordoned)")  # its free GPUs are not free to anyone now
        subprocess.run([*tmux, "send-keys", "-t", "top", "q"], check=True)
        wait_for(pane, "top-exited-0", timeout=15)
        subprocess.run([*tmux, "respawn-pane", "-k", "-t", "top", command], check=True)
        wait_for(pane, "sleeper")
        subprocess.run([*tmux, "send-keys", "-t", "top", "C-c"], check=True)
        screen = wait_for(pane, "top-exited-130", timeout=15)
        assert "Traceback" not in screen
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)
        server.cli("cancel", job_id)


def test_top_to_a_pipe_prints_the_view_once_and_exits(server):
    """Not a terminal (`trainyard top | less`, a script): one view, then exit 0, where a live view would print
    nothing until killed."""
    job_id = server.cli("run", "--name", "piped", "--", "sleep", "60").stdout.strip()
    c = server.client()
    until(lambda: c.get(job_id).status.value == "running", timeout=60)
    try:
        r = server.cli("top", timeout=30)
        assert r.returncode == 0, r.stderr
        assert "nodes" in r.stdout and "piped" in r.stdout and "running" in r.stdout, r.stdout
        assert "q to quit" not in r.stdout  # nothing reads keys here
    finally:
        server.cli("cancel", job_id)
