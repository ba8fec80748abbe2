"""examples/ddp through trainyard with real PyTorch processes (gloo on CPU)."""

from pathlib import Path

import psutil
import pytest

from tests.conftest import need_module
from tests.e2e.helpers import until

need_module("torch", "pip install 'trainyard[torch]'")
pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ddp"


def job_processes(job_id: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("TRAINYARD_JOB_ID") == job_id:
                found.append(p)
        except psutil.Error:
            pass
    return found


def test_two_replicas_train_to_the_stated_accuracy(server):
    job = server.client().submit(EXAMPLE / "job.yaml", params={"epochs": 5})
    info = job.wait(timeout=240)
    assert info.status.value == "succeeded", job.logs()
    acc = [m.value for m in job.metrics() if m.name == "test_accuracy"]
    assert len(acc) == 5 and acc[-1] >= 0.95
    assert {o.path for o in job.outputs()} >= {"model.pt"}


def test_killing_a_replica_mid_training_restarts_the_gang_from_the_saved_epoch(server):
    job = server.client().submit(EXAMPLE / "job.yaml", params={"epochs": 6, "sleep_per_epoch": 1})
    until(lambda: "epoch 2 " in job.logs(), timeout=180)
    victim = next(p for p in job_processes(job.id)
                  if p.environ().get("RANK") == "1" and "train.py" in " ".join(p.cmdline()))
    victim.kill()
    info = job.wait(timeout=240)
    assert info.status.value == "succeeded", job.logs()
    assert len(info.attempts) == 2 and info.attempts[0].status.value == "failed"
    second = job.logs(attempt=2)
    resumed = int(second.split("resuming from epoch ")[1].split()[0])
    assert resumed >= 2 and "epoch 1 " not in second


def test_the_same_script_runs_from_the_pytorchjob_manifest(server):
    job = server.client().submit(EXAMPLE / "pytorchjob.yaml")
    info = job.wait(timeout=300)
    assert info.status.value == "succeeded", job.logs()
    assert info.spec.replicas == 2 and info.spec.retry.max == 2 and info.spec.timeout == 600
    assert "test accuracy" in job.logs()


def test_cancel_leaves_no_process_behind(server):
    job = server.client().submit(EXAMPLE / "job.yaml", params={"epochs": 50, "sleep_per_epoch": 2})
    until(lambda: "epoch 1 " in job.logs(), timeout=180)
    assert len(job_processes(job.id)) >= 2
    job.cancel()
    assert job.wait(timeout=60).status.value == "cancelled"
    until(lambda: not [p for p in job_processes(job.id) if p.status() != psutil.STATUS_ZOMBIE], timeout=15)
