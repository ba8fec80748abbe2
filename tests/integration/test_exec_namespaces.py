"""A command run beside a replica that has namespaces of its own (``trainyard exec``; an account's job: its /dev/shm
and SysV IPC; cached inputs: their read-only mounts) joins them, as ``kubectl exec`` enters a container's: it sees
what the replica sees, never the node's. Where the replica's command has ended, or left for namespaces it made
itself, it is told so and runs nothing; one asked as the replica starts waits for its mounts."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.conftest import need_readonly_mounts
from tests.integration.test_launcher_requests import beside
from tests.integration.test_launcher_support import ReportServer, make_config, read_result, start_launcher
from tests.support.waiting import until

NOBODY = {"uid": 65534, "gid": 65534, "name": "nobody"}
AS_NOBODY = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]


@pytest.fixture
def report_server():
    server = ReportServer()
    yield server
    server.close()


@pytest.fixture
def root():
    """A folder an account may pass through, as a home's is (0711)."""
    need_readonly_mounts()  # root, and the namespaces a root launcher gives an account's job
    top = Path(tempfile.mkdtemp(prefix="trainyard-nsx-"))
    os.chmod(top, 0o711)
    yield top
    shutil.rmtree(top, ignore_errors=True)


def execs_beside(report_server, root: Path, command: list[str], asks: list[dict],  # noqa: ANN001
                 run_as: dict | None = NOBODY, **kw) -> dict[int, dict]:
    """Run a launcher of ``command`` as ``run_as`` (which says "ready", then waits for ``$FLAG``), answer its reports
    with ``asks`` once it is ready, let it end once all are answered; the answers by id."""
    attempt, flag = root / "attempt", root / "flag"
    log = attempt / "output.log"
    ready = lambda: log.exists() and "ready" in log.read_text()  # noqa: E731
    report_server.answer = lambda body: (200, {"cancel": False, "execs": asks if ready() else []})
    make_config(attempt, report_server.url, command, run_as=run_as, env={"FLAG": str(flag), "PATH": "/usr/bin:/bin"},
                **kw)
    os.chmod(attempt, 0o711)
    proc = start_launcher(attempt)
    sent = lambda: {a["id"]: a for r in report_server.snapshot() for a in r.get("execs", [])}  # noqa: E731
    try:
        until(lambda: len(sent()) >= len(asks), timeout=60, show=lambda: log.read_text() if log.exists() else "")
    finally:
        flag.touch()
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and read_result(attempt)["reason"] == "Succeeded", (out, log.read_text())
    return sent()


def test_a_command_beside_an_account_s_job_sees_its_dev_shm_and_ipc_and_not_what_others_left_on_the_node(
        report_server, root):
    # given what another job of the account left on the node: a file in /dev/shm and a SysV segment
    left = Path(f"/dev/shm/left-by-another-{os.getpid()}")
    left.write_text("theirs")
    os.chown(left, 65534, 65534)
    made = subprocess.run([*AS_NOBODY, "ipcmk", "-M", "8192"], capture_output=True, text=True, check=True)
    theirs = made.stdout.split()[-1]
    try:
        # and an account's job that puts a file in its /dev/shm and makes a segment of its own
        hold = ('echo mine > /dev/shm/job-file && ipcmk -M 4096 >/dev/null && echo ready && '
                'while [ ! -e "$FLAG" ]; do sleep 0.05; done')
        # when a command is run beside it
        look = "pwd; id -u; echo $(ls /dev/shm); df -k /dev/shm | tail -1; ipcs -m | grep -c ' 4096 '; " \
               "ipcs -m | grep -c ' 8192 ' || true"
        got = execs_beside(report_server, root, ["/bin/sh", "-c", hold],
                           [{"id": 1, "argv": ["sh", "-c", look], "timeout": 20},
                            {"id": 2, "argv": ["cat", str(left)], "timeout": 20}])
    finally:
        left.unlink()
        subprocess.run(["ipcrm", "-m", theirs], check=True)
    # then it runs as the account and sees the job's /dev/shm (its tmpfs) and SysV IPC, and nothing of the node's
    assert got[1]["error"] is None and got[1]["exit_code"] == 0, got[1]
    cwd, uid, listed, df, mine, others = got[1]["output"].splitlines()
    assert (cwd, uid, listed, mine, others) == (str(root / "attempt" / "work"), "65534", "job-file", "1", "0"), got[1]
    assert df.startswith("trainyard-shm "), df
    assert got[2]["exit_code"] != 0 and "No such file" in got[2]["output"], got[2]


def test_a_command_beside_a_job_in_namespaces_it_made_itself_is_refused_and_runs_nothing_as_root(report_server, root):
    # given an account's job that moved into a user and mount namespace of its own, and there mounted a program of
    # its own over the setpriv (and nsenter) that root runs on the way to the drop
    marks = root / "marks"
    marks.mkdir(mode=0o777)
    marks.chmod(0o777)
    fake = root / "fake"
    fake.write_text(f"#!/bin/sh\ntouch {marks}/ran-as-$(id -u)\n")
    fake.chmod(0o755)
    hold = (f"mount --bind {fake} /usr/bin/setpriv && mount --bind {fake} /usr/bin/nsenter && echo ready && "
            'while [ ! -e "$FLAG" ]; do sleep 0.05; done')
    # when a command is asked to run beside it
    got = execs_beside(report_server, root, [shutil.which("unshare"), "-Urm", "/bin/sh", "-c", hold],
                       [{"id": 1, "argv": ["id", "-u"], "timeout": 20}])
    # then it is refused, saying why, and the job's programs never ran
    assert got[1]["exit_code"] is None and "namespaces it made itself" in got[1]["error"], got[1]
    assert list(marks.iterdir()) == []


def replica(cached: tuple[str, ...] = (), shm: bool = True, work: str = tempfile.gettempdir()):  # noqa: ANN201
    """A replica's command in namespaces of its own, started as a root launcher starts it (its child), and the
    ``launch.execs.Where`` of a command run beside it, in ``work``."""
    from trainyard.launch import readonly

    proc = subprocess.Popen([*readonly.mount_prefix(list(cached), 0 if shm else None), "sleep", "60"],
                            start_new_session=True)
    return proc, beside(work, spaces=(proc.pid, cached, shm))


def test_a_replica_caught_mid_exec_is_not_joined_yet(monkeypatch):
    from trainyard.launch import nsjoin

    need_readonly_mounts()
    # a namespace of its own and no mounts made: as unshare is when it execs the mount script
    proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sleep", "60"], start_new_session=True)
    try:
        until(lambda: os.stat(f"/proc/{proc.pid}/ns/mnt").st_ino != os.stat("/proc/self/ns/mnt").st_ino)
        until(lambda: b"sleep" in Path(f"/proc/{proc.pid}/cmdline").read_bytes())
        real = Path.read_bytes
        monkeypatch.setattr(Path, "read_bytes", lambda p: b"" if p.name == "cmdline" else real(p))
        assert nsjoin._try((proc.pid, ("/nowhere",), False)) is None  # its args not set yet: its mounts may not be
    finally:
        proc.kill()
        proc.wait()


def test_a_command_beside_a_replica_whose_command_ended_is_told_so():
    from trainyard.launch import execs

    need_readonly_mounts()
    proc, where = replica()
    assert until(lambda: "trainyard-shm" in execs.run(["df", "/dev/shm"], 10, where)["output"])
    proc.kill()
    until(lambda: Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z")
    exited = execs.run(["echo", "hi"], 10, where)  # exited, its status not taken yet
    proc.wait()
    reaped = execs.run(["echo", "hi"], 10, where)  # and reaped: its pid anyone's next

    assert exited == reaped == {"exit_code": None, "output": "", "error": "the replica's command has ended"}


def test_a_command_asked_as_the_replica_starts_waits_for_its_mounts(tmp_path):
    from trainyard.launch import execs, nsjoin

    need_readonly_mounts()
    cached = tuple(str(tmp_path / f"input-{i}") for i in range(8))
    for path in cached:
        os.mkdir(path)
    for _ in range(5):  # right after the spawn: in the launcher's namespaces still, or between two mounts
        proc, where = replica(cached)
        try:
            got = execs.run(["sh", "-c", f"df /dev/shm | tail -1; touch {cached[-1]}/x"], 10, where)
        finally:
            proc.kill()
            proc.wait()
        assert got["output"].startswith("trainyard-shm ") and "Read-only file system" in got["output"], got
    # one that never makes them is not joined: a command beside it would see the node's
    plain = subprocess.Popen(["sleep", "60"])
    try:
        with pytest.raises(nsjoin.NotJoined, match="has not made its namespaces after 0.3s"):
            nsjoin.hold((plain.pid, (), True), within=0.3)
    finally:
        plain.kill()
        plain.wait()


def test_a_command_sees_the_job_s_cached_inputs_read_only_as_the_job_does(tmp_path):
    from trainyard.launch import execs

    need_readonly_mounts()  # root: the permission bits alone would not stop it
    cached = tmp_path / "cache-entry"
    cached.mkdir()
    (cached / "a.txt").write_text("alpha")
    # by the path from its work dir: the command is there in the replica's namespace, as the replica is
    write = ["sh", "-c", "cat cache-entry/a.txt; echo x >> cache-entry/a.txt && echo written"]
    proc, where = replica((str(cached),), shm=False, work=str(tmp_path))
    try:
        got = execs.run(write, 10, where)
    finally:
        proc.kill()
        proc.wait()

    assert got["exit_code"] != 0 and "Read-only file system" in got["output"], got
    assert got["output"].startswith("alpha") and "written" not in got["output"]
    assert (cached / "a.txt").read_text() == "alpha"
    assert execs.run(write, 10, beside(tmp_path))["output"].endswith("written\n")  # without it, root writes


def test_a_command_beside_a_root_job_that_unmounted_its_read_only_input_joins_what_the_job_sees(report_server, root):
    # given a job run as root (no account) with a cached input, which it sees read-only in a mount namespace of its
    # own: as root there it takes the read-only mount off and mounts a tmpfs of its own in its place
    entry = root / "cache" / "k1"  # where a fetched input lands (cache/<key>/<name>): the node's, shared
    entry.mkdir(parents=True)
    (entry / "data").write_text("alpha")
    hold = ('E=$(dirname "$TRAINYARD_INPUT_D") && umount "$E" && mount -t tmpfs jobs-own "$E" && '
            'echo mine > "$E/mine" && echo ready && while [ ! -e "$FLAG" ]; do sleep 0.05; done')
    # when a command is asked to run beside it
    look = ["sh", "-c", 'cat "$(dirname "$TRAINYARD_INPUT_D")/mine"']
    got = execs_beside(report_server, root, ["/bin/sh", "-c", hold], [{"id": 1, "argv": look, "timeout": 20}],
                       run_as=None, inputs={"d": str(entry / "data")}, input_cache=str(root / "cache"))
    # then it runs in the job's namespace and sees what the job sees there (not told, after 5 s, that the job has
    # not made its namespaces: it did, and changed them, as root may)
    assert (got[1]["error"], got[1]["exit_code"], got[1]["output"]) == (None, 0, "mine\n"), got[1]
