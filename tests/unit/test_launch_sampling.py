"""The launcher's resource sampler: a real process tree's CPU and memory, GPUs through a fake NVML
(the real one only where a GPU is), lines in the in-job SDK's format, and a summary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import psutil
import pytest

from trainyard.launch import sampling
from trainyard.launch.sampling import Sampler

HOLD = "x = bytearray(80 << 20); x[::4096] = b'1' * len(x[::4096]); import time; time.sleep(30)"


class FakeNVML:
    def __init__(self, utils: dict[int, float], used: int = 3 << 30) -> None:
        self.utils, self.used = utils, used
        self.calls: list[str] = []

    def nvmlInit(self):
        self.calls.append("init")

    def nvmlShutdown(self):
        self.calls.append("shutdown")

    def nvmlDeviceGetHandleByIndex(self, i):
        if i not in self.utils:
            raise RuntimeError(f"no GPU {i}")
        return i

    def nvmlDeviceGetUtilizationRates(self, h):
        return type("U", (), {"gpu": self.utils[h]})()

    def nvmlDeviceGetMemoryInfo(self, h):
        return type("M", (), {"used": self.used})()


@pytest.fixture
def child():
    proc = subprocess.Popen([sys.executable, "-c", HOLD])
    until = time.monotonic() + 10
    while time.monotonic() < until and psutil.Process(proc.pid).memory_info().rss < 80 << 20:
        time.sleep(0.05)
    yield proc
    proc.kill()
    proc.wait()


def test_a_sample_counts_the_memory_the_process_tree_holds(tmp_path, child):
    s = Sampler(str(tmp_path / "m.jsonl"), [], every=1)
    values = s.sample(psutil)
    assert values["system/memory_bytes"] >= 80 << 20
    assert values["system/cpu_percent"] >= 0 and "system/gpu_util" not in values
    assert s.peak_memory == values["system/memory_bytes"]


def test_the_first_sample_counts_the_cpu_a_busy_process_has_used_and_the_next_only_what_came_since(tmp_path):
    spin = subprocess.Popen([sys.executable, "-c", "import time\nt = time.monotonic() + 1.5\nwhile time.monotonic() < t:"
                             " pass\ntime.sleep(30)"])
    try:
        time.sleep(1.0)
        s = Sampler(str(tmp_path / "m.jsonl"), [], every=1)
        busy = s.sample(psutil)["system/cpu_percent"]  # psutil's own cpu_percent reads 0 the first time
        assert busy > 25, busy
        time.sleep(1.0)  # the loop ends meanwhile: from the next sample on the process only sleeps
        s.sample(psutil)
        time.sleep(0.5)
        assert s.sample(psutil)["system/cpu_percent"] < 5
    finally:
        spin.kill()
        spin.wait()


def test_gpus_are_read_through_nvml_per_device_and_as_a_mean(tmp_path):
    nvml = FakeNVML({0: 10.0, 1: 30.0})
    s = Sampler(str(tmp_path / "m.jsonl"), ["0", "1"], every=1, nvml=nvml)
    s._open_gpus()
    values = s.sample(psutil)
    assert values["system/gpu_util"] == 20.0 and values["system/gpu_memory_bytes"] == 6 << 30
    assert values["system/gpu0_util"] == 10.0 and values["system/gpu1_memory_bytes"] == 3 << 30
    s.sample(psutil)
    assert s.gpu_util_sum / s.gpu_samples == 20.0  # the mean `show` prints
    s.stop()
    assert nvml.calls == ["init", "shutdown"]


def test_a_gpu_nvml_does_not_know_leaves_out_gpu_samples_not_the_rest(tmp_path):
    s = Sampler(str(tmp_path / "m.jsonl"), ["7"], every=1, nvml=FakeNVML({0: 50.0}))
    s._open_gpus()
    values = s.sample(psutil)
    assert "system/gpu_util" not in values and "system/memory_bytes" in values


def test_the_thread_writes_sdk_lines_after_the_start_and_stops(tmp_path, child, monkeypatch):
    monkeypatch.setattr(sampling, "FIRST_AFTER", 0.05)
    path = tmp_path / "metrics.jsonl"
    path.write_text(json.dumps({"step": 1, "ts": 1.0, "values": {"loss": 0.5}}) + "\n")  # the job's own
    s = sampling.start(str(path), [], every=0.1)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(path.read_text().splitlines()) < 3:
        time.sleep(0.05)
    s.stop()
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert lines[0]["values"] == {"loss": 0.5}
    assert len(lines) >= 3 and all(x["step"] is None and x["values"]["system/memory_bytes"] >= 80 << 20
                                   for x in lines[1:])
    n = len(lines)
    time.sleep(0.3)
    assert len(path.read_text().splitlines()) == n  # stopped
    assert s.peak_memory >= 80 << 20


def test_sampling_is_off_with_no_interval(tmp_path):
    assert sampling.start(str(tmp_path / "m.jsonl"), [], every=0) is None
    assert sampling.start(str(tmp_path / "m.jsonl"), [], every=None) is None


def test_real_nvml_samples_the_gpus_where_there_are_some(tmp_path):
    pynvml = pytest.importorskip("pynvml")
    try:
        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
        pynvml.nvmlShutdown()
    except pynvml.NVMLError:
        count = 0
    if not count:
        pytest.skip("no GPU here (the GPU machine runs this)")
    s = Sampler(str(tmp_path / "m.jsonl"), [str(i) for i in range(count)], every=1)
    s._open_gpus()
    values = s.sample(psutil)
    s.stop()
    assert 0 <= values["system/gpu_util"] <= 100 and values["system/gpu_memory_bytes"] > 0
    assert os.path.exists(tmp_path) and all(f"system/gpu{i}_util" in values for i in range(count))


def test_with_a_root_only_that_tree_is_sampled_and_nothing_before_it_is_known(tmp_path, child):
    """As in a container: the job's processes under its first one, not the rest of the launcher's children."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])  # the runtime's client, say
    try:
        known: list[int | None] = [None]
        s = Sampler(str(tmp_path / "m.jsonl"), [], every=1, root=lambda: known[0])
        assert s.sample(psutil) == {}  # not up yet: no sample, rather than a zero
        known[0] = child.pid
        values = s.sample(psutil)
        held = psutil.Process(child.pid).memory_info().rss
        assert abs(values["system/memory_bytes"] - held) < 1 << 20  # the child's alone; `other` is not in it
        child.kill()
        child.wait()
        assert s.sample(psutil)["system/memory_bytes"] == 0  # ended: an empty tree
    finally:
        other.kill()
        other.wait()


def test_a_sampler_stopped_before_its_start_made_no_thread_and_wrote_nothing(tmp_path):
    # a job over before its first sample: the launcher makes the sampler, never starts it, stops it
    import threading

    before = threading.active_count()
    s = sampling.make(str(tmp_path / "m.jsonl"), [], every=5)
    s.stop()
    assert s._thread is None and threading.active_count() == before
    assert not (tmp_path / "m.jsonl").exists()
