"""Commands on many jobs against a real server: `trainyard wait JOB...` (and the SDK's ``Client.wait_all``), each
ending said as it comes, the exit code from how they ended, a timeout that names what still runs; `trainyard cancel
JOB...`, on with the next when one is refused."""

import pytest

from tests.e2e.helpers import py_job, until
from trainyard.errors import JobNotFound, WaitTimeout

pytestmark = pytest.mark.slow


def test_wait_says_each_ending_and_exits_0_only_when_all_succeeded(server):
    c = server.client()
    ok = c.submit({"name": "ok", "command": "true"}).id
    bad = c.submit({"name": "bad", "command": "exit 3"}).id

    both = server.cli("wait", ok, bad)
    assert both.returncode == 1, both.stderr
    lines = both.stderr.splitlines()
    assert any(line.startswith(f"{ok} succeeded") for line in lines), both.stderr
    assert any(line.startswith(f"{bad} failed") and "exit 3" in line for line in lines), both.stderr
    assert both.stdout == ""

    alone = server.cli("wait", ok)
    assert alone.returncode == 0, alone.stderr
    assert alone.stderr.startswith(f"{ok} succeeded")


def test_ids_come_from_stdin_with_dash_and_an_id_given_twice_is_said_once(server):
    c = server.client()
    ids = [c.submit({"name": f"n{i}", "command": "true"}).id for i in range(3)]
    listed = server.cli("ls", "--name", "n1", "--ids")
    assert listed.stdout.strip() == ids[1]

    r = server.cli("wait", ids[0], "-", stdin=listed.stdout + ids[2] + "\n" + ids[0] + "\n")
    assert r.returncode == 0, r.stderr
    said = [line.split()[0] for line in r.stderr.splitlines() if " succeeded" in line]
    assert sorted(said) == sorted(ids), r.stderr


def test_a_timeout_exits_124_naming_the_jobs_still_going_after_saying_the_ended_ones(server):
    c = server.client()
    ok = c.submit({"name": "ok", "command": "true"}).id
    slow = c.submit(py_job("import time; time.sleep(300)", name="slow")).id
    until(lambda: c.get(slow).status.value == "running")

    r = server.cli("wait", slow, ok, "--timeout", "1")

    assert r.returncode == 124, r.stderr
    assert f"{ok} succeeded" in r.stderr
    assert f"timeout: 1 of 2 jobs not ended after 1.0s: {slow} (running)" in r.stderr
    c.cancel(slow)
    cancelled = server.cli("wait", slow)
    assert cancelled.returncode == 1
    assert cancelled.stderr.startswith(f"{slow} cancelled"), cancelled.stderr


def test_an_unknown_job_fails_at_once_and_bad_arguments_are_refused_naming_them(server):
    c = server.client()
    slow = c.submit(py_job("import time; time.sleep(300)", name="slow")).id
    try:
        # an unknown id is found before any wait: the slow job is not waited for (the CLI's 120 s would pass)
        r = server.cli("wait", slow, "j-0000000000")
        assert r.returncode == 1
        assert "no such job: j-0000000000" in r.stderr
        for args, named in [(["--timeout", "-1"], "--timeout"), (["--timeout", "nan"], "--timeout"),
                            (["--timeout", "inf"], "--timeout")]:
            r = server.cli("wait", *args, slow)
            assert r.returncode == 2 and named in r.stderr, (args, r.stderr)
    finally:
        c.cancel(slow)


def test_the_sdk_returns_jobs_in_the_order_given_and_calls_on_end_as_they_end(server):
    c = server.client()
    late = c.submit(py_job("import time; time.sleep(3)", name="late")).id
    soon = c.submit({"name": "soon", "command": "true"}).id
    heard = []

    infos = c.wait_all([late, soon, late], on_end=lambda info: heard.append((info.id, info.status.value)))

    assert [i.id for i in infos] == [late, soon]
    assert heard == [(soon, "succeeded"), (late, "succeeded")]
    slow = c.submit(py_job("import time; time.sleep(300)", name="slow")).id
    try:
        with pytest.raises(WaitTimeout, match=f"1 of 2 jobs not ended after 0.5s: {slow}"):
            c.wait_all([soon, slow], timeout=0.5)
        with pytest.raises(JobNotFound):
            c.wait_all([slow, "j-0000000000"])
    finally:
        c.cancel(slow)


def test_cancel_takes_many_ids_says_each_status_and_goes_on_past_one_it_cannot_cancel(server):
    c = server.client()
    tiny = {"cpu": "10m"}  # all fit at once
    sleepers = [c.submit(py_job("import time; time.sleep(300)", name=f"s{i}", resources=tiny)).id for i in range(2)]
    waiting = c.submit({"name": "w", "command": "true", "after": [sleepers[1]]}).id  # pending while it sleeps
    done = c.submit({"name": "d", "command": "true", "resources": tiny}).id
    c.wait(done)
    until(lambda: all(c.get(j).status.value == "running" for j in sleepers))

    r = server.cli("cancel", sleepers[0], "j-0000000000", waiting, done, "-", stdin=sleepers[1] + "\n")

    assert r.returncode == 1
    assert r.stdout.splitlines() == [f"{sleepers[0]} cancelling", f"{waiting} cancelled", f"{done} succeeded",
                                     f"{sleepers[1]} cancelling"]
    assert "no such job: j-0000000000" in r.stderr and "1 of 5 not cancelled" in r.stderr
    ended = c.wait_all(sleepers, timeout=60)
    assert [j.status.value for j in ended] == ["cancelled", "cancelled"]
    assert server.cli("cancel", *sleepers).returncode == 0  # ended already: said, nothing refused
