"""The lease on a SQLite file: of several holders of one lock file exactly one leads, and another
gains it when the leader stops, dies, or loses its file. Real locks, real processes."""

import os
import subprocess
import sys
import threading

from trainyard.store.lease import AdvisoryLease, FileLease, SoleLease, make_lease

PERIOD = 0.05


class Watch:
    """A lease started with callbacks that record its changes."""

    def __init__(self, path) -> None:
        self.lease = FileLease(path, period=PERIOD)
        self.gained, self.lost = threading.Event(), threading.Event()
        self.lease.start(on_gain=self.gained.set, on_loss=self.lost.set)


def test_one_of_two_leases_leads_and_the_other_gains_when_it_stops(tmp_path):
    path = tmp_path / "db.sqlite.lease"
    first, second = Watch(path), Watch(path)
    try:
        assert first.lease.leader and first.gained.is_set()  # a lone holder leads before start() returns
        assert not second.lease.leader
        assert not second.gained.wait(10 * PERIOD)  # it keeps trying, and keeps failing
        first.lease.stop()
        assert not first.lease.leader
        assert second.gained.wait(10)
        assert second.lease.leader and not second.lost.is_set()
    finally:
        first.lease.stop()
        second.lease.stop()


def test_a_killed_leader_process_hands_the_lease_on(tmp_path):
    path = tmp_path / "db.sqlite.lease"
    leader = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom trainyard.store.lease import FileLease\n"
         f"FileLease({str(path)!r}).start(lambda: print('lead', flush=True), lambda: None)\ntime.sleep(600)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert leader.stdout.readline().strip() == "lead"
        mine = Watch(path)
        assert not mine.lease.leader
        leader.kill()  # SIGKILL: nothing of the lease's own code runs
        leader.wait(10)
        assert mine.gained.wait(10)
        mine.lease.stop()
    finally:
        leader.kill()
        leader.wait(10)


def test_a_process_the_leader_started_does_not_keep_its_lock(tmp_path):
    path = tmp_path / "db.sqlite.lease"
    first = Watch(path)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], close_fds=False)
    try:
        first.lease.stop()  # the child (a launcher, a job) lives on
        second = Watch(path)
        # soon, not at once: a child started by posix_spawn lets its parent go on before the kernel
        # has closed its close-on-exec descriptors, and for that moment it holds the lock too
        assert second.gained.wait(10)
        second.lease.stop()
    finally:
        child.kill()
        child.wait(10)


def test_a_leader_whose_lock_file_is_replaced_steps_down(tmp_path):
    path = tmp_path / "db.sqlite.lease"
    first = Watch(path)
    try:
        path.unlink()  # a new server would lock a new file at the path: the old lock guards nothing
        second = Watch(path)
        assert second.lease.leader
        assert first.lost.wait(10)
        assert not first.lease.leader
        assert not second.lost.wait(5 * PERIOD)  # the one on the file at the path keeps it
        second.lease.stop()
    finally:
        first.lease.stop()


def test_each_database_gets_its_lease(tmp_path):
    db = tmp_path / "shared.db"
    for url in (f"sqlite:///{db}", str(db)):
        lease = make_lease(url)
        assert isinstance(lease, FileLease) and lease.path == f"{db}.lease"
    assert make_lease("sqlite:///rel.db").path == os.path.abspath("rel.db") + ".lease"  # relative to the cwd
    for url in ("sqlite://", "sqlite:///:memory:", "sqlite:///file:x?mode=memory&cache=shared&uri=true"):
        assert isinstance(make_lease(url), SoleLease)
    lease = make_lease("postgresql://nobody@127.0.0.1:1/none")  # connects only when started
    assert isinstance(lease, AdvisoryLease)
    lease.stop()


def test_launchers_look_for_the_leader_beside_a_shared_sqlite_file(tmp_path):
    from trainyard.config import ServerSettings

    db = tmp_path / "shared.db"
    assert ServerSettings(home=tmp_path / "a", db=str(db)).leader_file == tmp_path / "shared.db.server.json"
    assert ServerSettings(home=tmp_path / "a").leader_file == tmp_path / "a" / "trainyard.db.server.json"
    on_pg = ServerSettings(home=tmp_path / "a", db="postgresql://u@h/d")
    assert on_pg.leader_file == on_pg.address_file == tmp_path / "a" / "server.json"
