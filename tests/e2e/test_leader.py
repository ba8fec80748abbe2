"""Servers sharing one database (PostgreSQL, or a SQLite file named with --db from several homes):
exactly one schedules, and when it dies another takes over within seconds with nothing lost and
nothing run twice."""

import socket
import time

import pytest

from tests.e2e.helpers import py_job, until
from tests.support.servers import ServerProcess

pytestmark = [pytest.mark.slow]
CAPACITY = ["--cpus", "4", "--memory", "8Gi"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def counted_job(runs, i, lines=30):
    """A job that marks each run of itself and prints ``lines`` lines over a few seconds."""
    return py_job(f"import time\nopen({str(runs)!r}, 'a').write('{i}\\n')\n"
                  f"for n in range({lines}):\n    print(f'line {{n}}', flush=True); time.sleep(0.1)",
                  name=f"j{i}", resources={"cpu": 0.1, "memory": "64Mi"})


@pytest.mark.postgres
def test_one_of_two_servers_schedules_and_the_other_takes_over_when_it_dies(pg_url, tmp_path):
    home, runs = tmp_path / "home", tmp_path / "runs"
    first, second = ServerProcess(home, CAPACITY, db=pg_url), ServerProcess(home, CAPACITY, db=pg_url)
    first.start(port=free_port())
    second.start(port=free_port())
    try:
        assert (first.role(), second.role()) == ("leader", "follower")
        # jobs submitted through the follower are scheduled by the leader
        c = second.client()
        jobs = [c.submit(counted_job(runs, i)) for i in range(6)]
        until(lambda: all(c.get(j.id).status.value == "running" for j in jobs), timeout=60)

        first.kill()
        killed = time.monotonic()
        until(lambda: second.role() == "leader", timeout=15)
        took = time.monotonic() - killed
        later = [c.submit(counted_job(runs, 6 + i, lines=3)) for i in range(2)]

        for j in jobs + later:
            info = c.wait(j.id, timeout=90)
            assert info.status.value == "succeeded" and len(info.attempts) == 1, (j.id, info.status, info.reason)
        for j in jobs:
            assert c.job(j.id).logs().splitlines() == [f"line {n}" for n in range(30)]
        assert sorted(runs.read_text().split()) == sorted(str(i) for i in range(8))  # each ran once
        print(f"takeover in {took:.1f}s")
    finally:
        first.stop_all()
        second.stop_all()


def two_servers_on_one_file(tmp_path) -> tuple[ServerProcess, ServerProcess]:
    """Two servers with homes of their own on one SQLite file, started in that order."""
    db = f"sqlite:///{tmp_path / 'shared.db'}"
    first, second = ServerProcess(tmp_path / "a", CAPACITY, db=db), ServerProcess(tmp_path / "b", CAPACITY, db=db)
    first.start(port=free_port())
    second.start(port=free_port())
    return first, second


def launched_in(server: ServerProcess) -> set[str]:
    """The jobs whose attempts this server's local engine launched (each in its own home)."""
    attempts = server.home / "attempts"
    return {d.name.rsplit("-", 1)[0] for d in attempts.iterdir()} if attempts.exists() else set()


def test_servers_of_two_homes_on_one_sqlite_file_elect_one_scheduler(tmp_path):
    runs = tmp_path / "runs"
    first, second = two_servers_on_one_file(tmp_path)
    try:
        assert (first.role(), second.role()) == ("leader", "follower")
        # jobs submitted to either server are scheduled by the leader alone, each run once
        c1, c2 = first.client(), second.client()
        done = [c.submit(counted_job(runs, i, lines=3)) for i, c in enumerate([c1, c2] * 2)]
        for j in done:
            info = c2.wait(j.id, timeout=90)  # the follower's long polls see the leader's changes
            assert info.status.value == "succeeded" and len(info.attempts) == 1, (j.id, info.status, info.reason)
        assert sorted(runs.read_text().split()) == sorted(str(i) for i in range(4))
        assert launched_in(first) == {j.id for j in done} and launched_in(second) == set()

        # jobs still running when the leader dies: the new leader finds their launchers in the dead
        # one's home, and they find it through the address beside the database
        running = [c.submit(counted_job(runs, 4 + i)) for i, c in enumerate([c1, c2])]
        until(lambda: all(c2.get(j.id).status.value == "running" for j in running), timeout=60)
        assert second.role() == "follower"
        first.kill()
        killed = time.monotonic()
        until(lambda: second.role() == "leader", timeout=15)
        took = time.monotonic() - killed
        later = c2.submit(counted_job(runs, 6, lines=3))
        for j in running + [later]:
            info = c2.wait(j.id, timeout=90)
            assert info.status.value == "succeeded" and len(info.attempts) == 1, (j.id, info.status, info.reason)
        for j in running:
            assert c2.job(j.id).logs().splitlines() == [f"line {n}" for n in range(30)]
        assert sorted(runs.read_text().split()) == sorted(str(i) for i in range(7))  # each ran once
        assert launched_in(first) == {j.id for j in done + running} and launched_in(second) == {later.id}
        print(f"takeover in {took:.1f}s")
    finally:
        first.stop_all()
        second.stop_all()
