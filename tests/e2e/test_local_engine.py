"""Real jobs, real processes: the local engine and the launcher behind a real server."""

import json
import os
import time

import psutil
import pytest

from tests.conftest import need
from tests.e2e.helpers import py_job, until
from tests.support.servers import ServerProcess
from trainyard.launch import pidlimit

pytestmark = pytest.mark.slow


def test_jobs_wait_for_room_and_the_node_is_never_overcommitted(server, tmp_path):
    c = server.client()
    log = tmp_path / "spans.jsonl"
    code = ("import json,time,os; t=time.time(); time.sleep(0.8); "
            f"open({str(log)!r},'a').write(json.dumps([t,time.time()])+'\\n')")
    jobs = [c.submit(py_job(code, resources={"cpu": 1})) for _ in range(4)]
    waiting = until(lambda: next((j for j in jobs if "needs 1 core (0 free on any node)" in (j.refresh().reason or "")),
                                 None))
    assert waiting.info.status.value == "pending"
    for j in jobs:
        assert j.wait(timeout=60).status.value == "succeeded"
    spans = [json.loads(line) for line in log.read_text().splitlines()]
    for t, _ in spans:
        assert sum(1 for s, e in spans if s <= t < e) <= 2  # 2 declared cores, 1 each


def test_each_job_sees_exactly_its_own_gpus(server):
    c = server.client()
    code = "import os,time; print('GPUS=' + os.environ['CUDA_VISIBLE_DEVICES']); time.sleep(1)"
    jobs = [c.submit(py_job(code, resources={"gpu": 2, "cpu": 0.5})) for _ in range(3)]
    for j in jobs:
        assert j.wait(timeout=60).status.value == "succeeded"
    seen = [j.logs().strip().removeprefix("GPUS=").split(",") for j in jobs]
    assert all(len(s) == 2 for s in seen)
    assert sorted(jobs[0].info.attempts[0].gpus + jobs[1].info.attempts[0].gpus) == ["0", "1", "2", "3"]
    assert [j.info.attempts[0].gpus for j in jobs] == seen
    no_gpu = c.submit(py_job("import os; print(repr(os.environ['CUDA_VISIBLE_DEVICES']))"))
    no_gpu.wait(timeout=30)
    assert no_gpu.logs().strip() == "''"


def test_memory_limit_kills_only_the_greedy_job(server):
    c = server.client()
    greedy = c.submit(py_job("import time; b = bytearray(400 * 2**20); time.sleep(30)",
                             resources={"memory": "150Mi", "cpu": 0.5}))
    calm = c.submit(py_job("import time; time.sleep(2); print('fine')", resources={"cpu": 0.5}))
    info = greedy.wait(timeout=60)
    assert info.status.value == "failed" and info.attempts[-1].reason == "OOMKilled"
    assert calm.wait(timeout=60).status.value == "succeeded" and calm.logs().strip() == "fine"


def test_the_servers_pids_max_stops_a_fork_bomb_in_its_job_alone(tmp_path):
    need(pidlimit.detect() is not None, "no writable pids cgroup here (root on cgroup v1, or a delegated v2 tree)")
    (tmp_path / "server.yaml").write_text("pids_max: 64\n")
    srv = ServerProcess(tmp_path / "home", ["--cpus", "2", "--memory", "4Gi", "--container-runtime", "none",
                                            "--config", str(tmp_path / "server.yaml")])
    srv.start()
    try:
        # given a job that tries to hold 200 processes (bounded: a server that set no limit fails this test
        # without harming the machine) and, beside it, one that holds 40
        hold = ("import os, sys\nr, w = os.pipe()\nheld = []\nfor i in range({n}):\n"
                "    try:\n        pid = os.fork()\n    except BlockingIOError:\n        break\n"
                "    if pid == 0:\n        os.close(w); os.read(r, 1); os._exit(0)\n    held.append(pid)\n"
                "print('held', len(held), flush=True)\nos.close(w)\nfor pid in held:\n    os.waitpid(pid, 0)\n"
                "sys.exit(0 if len(held) == {n} else 3)\n")
        c = srv.client()
        bomb = c.submit(py_job(hold.format(n=200), name="bomb", resources={"cpu": 0.5}, retry={"max": 0}))
        calm = c.submit(py_job(hold.format(n=40), name="calm", resources={"cpu": 0.5}))
        info = bomb.wait(timeout=60)
        # then its forks past 64 failed, it says why, and the other job and the server went on
        assert info.status.value == "failed" and int(bomb.logs().split()[1]) < 64, bomb.logs()
        assert "pids limit of 64 processes was reached" in info.attempts[-1].message
        assert calm.wait(timeout=60).status.value == "succeeded" and calm.logs().strip() == "held 40"
    finally:
        srv.stop_all()


def test_the_servers_cpu_limit_caps_each_job_at_its_cpu_in_its_own_cpu_group(tmp_path):
    from trainyard.launch import cgroup, cpulimit

    need(cpulimit.detect() == cgroup.V1, "no writable cgroup v1 cpu controller here (root on cgroup v1)")
    (tmp_path / "server.yaml").write_text("cpu_limit: true\n")
    srv = ServerProcess(tmp_path / "home", ["--cpus", "2", "--memory", "4Gi", "--container-runtime", "none",
                                            "--config", str(tmp_path / "server.yaml")])
    srv.start()
    try:
        # given a job asking 750m, with no memory limit nor pids limit: its cpu group is joined for the cap alone
        show = ("import os\npath = next(l.split(':')[2] for l in open('/proc/self/cgroup').read().splitlines()\n"
                "            if 'cpu' in l.split(':')[1].split(','))\n"
                "print(path, *(open(f'/sys/fs/cgroup/cpu{path}/{f}').read().strip()\n"
                "              for f in ('cpu.shares', 'cpu.cfs_quota_us', 'cpu.cfs_period_us')))\n")
        job = srv.client().submit(py_job(show, resources={"cpu": "750m"}))
        assert job.wait(timeout=60).status.value == "succeeded", job.logs()
        # then it ran in a group of its own, weighted and capped at three quarters of a core
        path, shares, quota, period = job.logs().split()
        assert path.endswith(f"/{cgroup.PARENT}/{job.info.attempts[0].id}-r0"), path
        assert (int(shares), int(quota) / int(period)) == (768, 0.75)
    finally:
        srv.stop_all()


def test_timeout_ends_the_attempt(server):
    job = server.client().submit(py_job("import time; time.sleep(60)", timeout=1, grace_period=1))
    info = job.wait(timeout=30)
    assert info.status.value == "failed" and info.attempts[0].reason == "Timeout"


def test_cancel_leaves_no_process_of_the_tree_behind(server, tmp_path):
    pids = tmp_path / "pids"
    code = f"""
import os, signal, subprocess, sys, time
out = open({str(pids)!r}, 'a')
child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])
print(child.pid, file=out, flush=True)
if os.fork() == 0:   # a daemonized grandchild that ignores SIGTERM
    os.setsid()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print(os.getpid(), file=out, flush=True)
    time.sleep(300)
    os._exit(0)
print(os.getpid(), file=out, flush=True)
print('ready', flush=True)
time.sleep(300)
"""
    job = server.client().submit(py_job(code, grace_period=1))
    until(lambda: pids.exists() and len(pids.read_text().split()) == 3)
    listed = [int(p) for p in pids.read_text().split()]
    assert all(psutil.pid_exists(p) for p in listed)
    job.cancel()
    info = job.wait(timeout=30)
    assert info.status.value == "cancelled" and info.attempts[0].reason == "Cancelled"

    def gone() -> bool:
        alive = []
        for p in listed:
            try:
                if psutil.Process(p).status() != psutil.STATUS_ZOMBIE:
                    alive.append(p)
            except psutil.NoSuchProcess:
                pass
        return not alive

    until(gone, timeout=10)


def test_a_failed_attempt_is_retried_and_resumes_from_its_checkpoint(server):
    code = """
import os, sys, trainyard
ckpt = trainyard.checkpoint_dir() / 'epoch'
epoch = int(ckpt.read_text()) if ckpt.exists() else 0
print('resuming at', epoch, 'attempt', os.environ['TRAINYARD_ATTEMPT'], flush=True)
for e in range(epoch, 4):
    ckpt.write_text(str(e + 1))
    if e == 1 and os.environ['TRAINYARD_ATTEMPT'] == '1':
        sys.exit(3)
print('done')
"""
    job = server.client().submit(py_job(code, retry={"max": 2, "backoff": 0}))
    info = job.wait(timeout=60)
    assert info.status.value == "succeeded"
    assert [(a.number, a.reason) for a in info.attempts] == [(1, "Error(exit 3)"), (2, "Succeeded")]
    logs = job.logs()
    assert "resuming at 0 attempt 1" in logs and "resuming at 2 attempt 2" in logs


def test_outputs_are_uploaded_and_downloaded(server, tmp_path):
    code = """
import trainyard, pathlib
out = trainyard.output_dir()
(out / 'model.bin').write_bytes(bytes(range(256)) * 100)
(out / 'sub').mkdir()
(out / 'sub' / 'metrics.json').write_text('{"acc": 0.97}')
pathlib.Path('extra.txt').write_text('from the work dir')
"""
    job = server.client().submit(py_job(code, outputs=["extra.txt"]))
    assert job.wait(timeout=60).status.value == "succeeded"
    paths = {a.path: a for a in job.outputs()}
    assert set(paths) == {"model.bin", "sub/metrics.json", "extra.txt"}
    dest = job.download(tmp_path / "dl")
    assert (dest / "model.bin").read_bytes() == bytes(range(256)) * 100
    assert json.loads((dest / "sub" / "metrics.json").read_text()) == {"acc": 0.97}
    assert paths["model.bin"].digest.startswith("sha256:") and paths["model.bin"].size == 25600


def test_logs_stream_while_the_job_runs(server, tmp_path):
    # the job prints, then waits for a flag only the test sets after it has read that line:
    # the line can only have come while the job ran (latency figures: bench/latency.py)
    flag = tmp_path / "go"
    code = (f"import pathlib, time\nfor i in range(3):\n    print(f'line {{i}}', flush=True)\n"
            f"    while not pathlib.Path({str(flag)!r} + str(i)).exists(): time.sleep(0.02)")
    job = server.client().submit(py_job(code))
    lines, buffer = [], ""
    for text in job.logs(follow=True):
        buffer += text
        while "\n" in buffer:
            line, buffer = buffer.split("\n", 1)
            lines.append(line)
            assert job.refresh().status.value == "running"
            (tmp_path / f"go{len(lines) - 1}").touch()
    assert lines == ["line 0", "line 1", "line 2"]
    assert job.wait(timeout=30).status.value == "succeeded"


def test_params_and_metrics_reach_the_job_and_back(server):
    code = ("import trainyard, json; p = trainyard.params(); print(json.dumps(p));"
            "[trainyard.log_metrics(step=s, loss=1.0 / (s + 1), lr=p['lr']) for s in range(3)]")
    job = server.client().submit(py_job(code, params={"lr": 0.1, "name": "x"}))
    assert job.wait(timeout=30).status.value == "succeeded"
    assert json.loads(job.logs()) == {"lr": 0.1, "name": "x"}
    loss = [(m.step, m.value) for m in job.metrics() if m.name == "loss"]
    assert loss == [(0, 1.0), (1, 0.5), (2, 1 / 3)]


def test_an_image_without_a_container_engine_is_refused_and_not_stored(tmp_path, monkeypatch):
    from trainyard.errors import Unsupported

    # docker and podman clients whose engine does not answer, ahead of any real one on PATH
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    for tool in ("docker", "podman"):
        (fake_bin / tool).write_text("#!/bin/sh\necho 'Cannot connect to the daemon' >&2\nexit 1\n")
        (fake_bin / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake_bin}:{os.environ['PATH']}")
    srv = ServerProcess(tmp_path / "home", ["--cpus", "1", "--memory", "1Gi"])
    srv.start()
    try:
        c = srv.client()
        with pytest.raises(Unsupported, match="needs a container runtime and no container runtime"):
            c.submit(py_job("pass", image="python:3.11"))
        assert c.jobs().items == []
    finally:
        srv.stop_all()
