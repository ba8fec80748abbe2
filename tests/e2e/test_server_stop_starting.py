"""A `trainyard server` stopped while it starts: one line says so, it exits as a stopped server does, and lets
its home go, so that the next server starts there."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainyard.home import held
from tests.support.servers import ServerProcess

pytestmark = pytest.mark.slow


def catches(pid: int, sig: int) -> bool:
    """Whether process ``pid`` has a handler for ``sig`` (Linux: the SigCgt mask of /proc/PID/status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    mask = next(int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(mask >> (sig - 1) & 1)


def until(condition, proc: subprocess.Popen, timeout: float = 30) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None and time.monotonic() < deadline, "the server ended, or never got there"
        time.sleep(0.001)


@pytest.mark.parametrize("when", ["first moment", "home held"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_during_start_up_is_logged_and_the_home_is_free_again(tmp_path, when, sig):
    # given a server starting on a fresh home
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "TRAINYARD_HOME": str(home)}
    env.pop("TRAINYARD_SERVER", None)
    log_path = tmp_path / "server.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "trainyard", "server", "--cpus", "1",
                                 "--container-runtime", "none"], env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        # when the signal comes as soon as the process answers it at all (Python's defaults before that, which no
        # program can change), or once it holds its home, well before it answers /healthz
        if when == "first moment":
            until(lambda: catches(proc.pid, signal.SIGTERM), proc)
        else:
            until(lambda: held(home), proc)
        proc.send_signal(sig)
        code = proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    # then one line says it was stopped during start-up, and it exits as a stopped server does (0, or 130 for ^C)
    text = log_path.read_text()
    lines = [line for line in text.splitlines() if f"got {signal.Signals(sig).name} during start-up" in line]
    assert code == (0 if sig == signal.SIGTERM else 130), text[-3000:]
    assert len(lines) == 1 and "stopped before serving" in lines[0], text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    # and it announced nothing and holds nothing: the next server starts in that home
    assert not held(home) and not (home / "server.json").exists()
    second = ServerProcess(home, ["--cpus", "1", "--container-runtime", "none"])
    try:
        second.start()
        assert second.client().nodes()[0].cpu == 1
    finally:
        second.stop_all()
