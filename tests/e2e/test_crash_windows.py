"""A server killed (SIGKILL) between two writes that belong together converges once restarted: nothing runs twice,
nothing is left untracked, nothing waits for ever. The server kills itself at a named crash point
(``TRAINYARD_TEST_CRASH_AT``, :mod:`trainyard.crashpoints`) and is started again without it."""

from __future__ import annotations

import os
import signal
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import httpx
import pytest

from tests.e2e.helpers import stored_schedule as stored
from tests.support.servers import ServerProcess
from trainyard.envvars import TEST_CRASH_AT
from trainyard.errors import ServerUnavailable
from trainyard.spec.labels import own_label

pytestmark = pytest.mark.slow

TRIAL = ("import time, trainyard\nfor s in range({{params.steps}}):\n"
         "    trainyard.log_metrics(step=s, score={{params.x}})\n    time.sleep(0.1)\n")


def sweep(xs: list[float], steps: int, parallel: int = 1) -> dict:
    return {"name": "crashy", "job": {"command": [sys.executable, "-c", TRIAL], "resources": {"cpu": 0.5}},
            "parameters": {"x": {"values": xs}, "steps": steps}, "metric": {"name": "score", "goal": "maximize"},
            "method": "grid", "parallel": parallel}


def crashing(tmp_path: Path, point: str, **env: str) -> ServerProcess:
    """A started server that kills itself when it reaches ``point`` (with ``env`` added to its environment)."""
    srv = ServerProcess(tmp_path / "home", ["--cpus", "2", "--memory", "4Gi", "--container-runtime", "none"])
    srv.extra_env = {TEST_CRASH_AT: point, **env}
    srv.start()
    return srv


def restart(srv: ServerProcess, timeout: float = 60) -> None:
    """Once it has killed itself at its crash point: start it again, as it is, without one."""
    assert srv.proc is not None
    srv.proc.wait(timeout)
    assert srv.proc.returncode == -signal.SIGKILL, srv.log_path.read_text()[-3000:]
    srv.extra_env = {}
    srv.start()


def labelled(srv: ServerProcess, **own: str) -> set[str]:
    """The ids of every job carrying trainyard's own labels ``own`` (whatever their status)."""
    page = srv.client().jobs(labels={own_label(k): v for k, v in own.items()}, limit=100)
    return {j.id for j in page.items}


def until(probe, timeout: float = 60.0):  # noqa: ANN001, ANN201
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if got := probe():
            return got
        time.sleep(0.2)
    raise AssertionError("timed out")


def test_a_crash_after_a_trials_job_is_submitted_leaves_no_job_the_sweep_does_not_know(tmp_path):
    srv = crashing(tmp_path, "sweep.trial_submitted")
    try:
        try:
            sid = srv.client().sweep(sweep([0.3, 0.5], steps=2)).id  # the loop submits trial 0 and dies
        except ServerUnavailable:  # it died before the answer went out (a loaded machine): the sweep was stored
            sid = None
        restart(srv)
        sid = sid or srv.client().sweeps.list()[0].id
        info = srv.client().sweeps.wait(sid, timeout=120)
        assert info.status.value == "succeeded", info.reason
        assert [(t.number, t.state.value) for t in info.trials] == [(0, "complete"), (1, "complete")]
        # every job the sweep submitted is one of its trials: none ran outside its budget
        assert labelled(srv, sweep=sid) == {t.job_id for t in info.trials}
    finally:
        srv.stop_all()


def test_a_crash_after_a_steps_job_is_submitted_leaves_no_job_the_run_does_not_know(tmp_path):
    srv = crashing(tmp_path, "pipeline.step_submitted")
    try:
        spec = {"name": "crashy", "steps": {"only": {"command": [sys.executable, "-c", "pass"],
                                                     "resources": {"cpu": 0.5}}}}
        with pytest.raises(httpx.HTTPError):  # the request that starts the run submits its first step, and dies
            httpx.post(srv.url + "/api/v1/pipelines", json={"spec": spec}, headers=srv.headers, timeout=30)
        restart(srv)
        c = srv.client()
        [run] = c.pipelines.list().items
        info = c.pipelines.wait(run.id, timeout=120)
        assert info.status.value == "succeeded", info
        [step] = info.steps
        assert labelled(srv, pipeline_run=run.id) == {step.job_id}  # one job: the step ran once
    finally:
        srv.stop_all()


def test_a_crash_after_a_sweep_is_cancelled_still_stops_its_running_trials(tmp_path):
    srv = crashing(tmp_path, "sweep.cancel_ended")
    try:
        c = srv.client()
        sid = c.sweep(sweep([0.1, 0.2], steps=100_000, parallel=2)).id
        running = until(lambda: [t for t in c.sweeps.get(sid).trials if t.state.value == "running"] or None)
        until(lambda: c.get(running[0].job_id).status.value == "running")
        with pytest.raises(httpx.HTTPError):  # the cancel ends the sweep, and the server dies
            httpx.post(f"{srv.url}/api/v1/sweeps/{sid}/cancel", headers=srv.headers, timeout=30)
        restart(srv)
        c = srv.client()
        info = c.sweeps.get(sid)
        assert info.status.value == "cancelled"
        for t in info.trials:  # none goes on for ever under an ended sweep
            assert c.job(t.job_id).wait(timeout=60).status == "cancelled"
        assert {t.state.value for t in c.sweeps.get(sid).trials} == {"cancelled"}
    finally:
        srv.stop_all()


@pytest.mark.parametrize("point", ["schedule.claimed", "schedule.fired"])
def test_a_crash_as_a_schedule_fires_neither_loses_the_fire_nor_leaves_its_job_unrecorded(tmp_path, point):
    srv = crashing(tmp_path, point)
    try:
        # given a daily schedule due a few seconds from now, its job long enough to still run
        at = datetime.fromtimestamp(time.time() + 4, timezone.utc)
        spec = {"name": "daily", "cron": f"{at.minute} {at.hour} * * *", "timezone": "UTC",
                "job": {"command": "sleep 60", "resources": {"cpu": "100m"}}}
        stored(srv, {"spec": spec}, next_at=int(at.timestamp()))  # a cron's minute is too long for a test to wait
        restart(srv)  # it died making that fire
        c = srv.client()
        # then the fire is made once, and recorded with its job: the schedule knows what runs (concurrency)
        started = until(lambda: [r for r in c.schedules.get("daily").runs if r.outcome == "started"], timeout=30)
        assert [r.at for r in started] == [int(at.timestamp())]
        assert labelled(srv, schedule="daily") == {started[0].job_id} == set(c.schedules.get("daily").active)
    finally:
        srv.stop_all()


def due_soon(srv: ServerProcess, name: str, seconds: float) -> float:
    """Move schedule ``name``'s next fire to ``seconds`` from now, in its database (the server is down)."""
    from sqlalchemy import update

    from trainyard.store import Store
    from trainyard.store.schedule_tables import Schedule

    at = float(int(time.time() + seconds))
    with Store(f"sqlite:///{srv.home / 'trainyard.db'}", run_migrations=False).write() as s:
        s.connection().execute(update(Schedule.__table__).where(Schedule.__table__.c.name == name).values(next_at=at))
    return at


def test_a_crash_after_a_replacing_fire_committed_still_stops_the_run_it_replaced(tmp_path):
    srv = ServerProcess(tmp_path / "home", ["--cpus", "2", "--memory", "4Gi", "--container-runtime", "none"])
    srv.start()
    try:
        # given a replacing schedule whose first run is running
        spec = {"name": "daily", "cron": "0 3 * * *", "concurrency": "replace",
                "job": {"command": "sleep 60", "resources": {"cpu": "100m"}}}
        c = srv.client()
        c.schedules.create(spec)
        first = c.schedules.trigger("daily").job_id
        until(lambda: c.get(first).status.value == "running", timeout=30)
        # when its next fire comes to a server that dies once that fire's claim has committed
        srv.stop()
        due = due_soon(srv, "daily", 5)
        srv.extra_env = {TEST_CRASH_AT: "schedule.fired"}
        try:
            srv.start()
        except RuntimeError:  # a loaded machine: it was due, and made, before the server answered
            pass
        restart(srv)
        c = srv.client()
        # then the fire was made once, and the run it replaced is stopped all the same
        fire = until(lambda: [r for r in c.schedules.get("daily").runs if r.at == due], timeout=30)
        assert [(r.outcome, r.message) for r in fire] == [("started", f"replaced {first}")]
        ended = c.wait(first, timeout=60)
        assert ended.status.value == "cancelled", ended
        assert c.schedules.get("daily").active == [fire[0].job_id]
    finally:
        srv.stop_all()


NO_ZYGOTE = '''import sys


class NoZygote:  # the local engine's zygote cannot start: it starts each launcher itself, the slow way
    def find_spec(self, name, path=None, target=None):
        if name == "trainyard.launch.zygote":
            raise ImportError("no zygote in this test")


sys.meta_path.insert(0, NoZygote())
'''


def test_a_crash_right_after_a_launcher_is_started_without_the_zygote_runs_the_job_once(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(NO_ZYGOTE)
    # the server and what it starts share this environment: with it, no zygote
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    srv = crashing(tmp_path, "local.launcher_started", PYTHONPATH=path)
    runs, gate = tmp_path / "runs", tmp_path / "gate"
    try:
        code = (f"import os, time\nopen({str(runs)!r}, 'a').write('x')\n"
                f"while not os.path.exists({str(gate)!r}): time.sleep(0.05)")
        job = srv.client().submit({"name": "once", "command": [sys.executable, "-c", code],
                                   "resources": {"cpu": "100m"}})
        restart(srv)  # it died with the launcher started and its handle not written
        time.sleep(3)  # a few of the restarted server's looks at its attempts (once a second): nothing to wait on
        gate.touch()
        info = srv.client().wait(job.id, timeout=90)
        assert info.status.value == "succeeded" and len(info.attempts) == 1, info
        assert runs.read_text() == "x"  # ran exactly once
    finally:
        srv.stop_all()
