"""What trainyard's GPU paths do on a real NVIDIA GPU: one short script for a machine that has one.

    PYTHONPATH=src:bench python bench/gpu.py [--json out.json] [--seconds 8]

Checks, each printed as ok/FAIL with what was seen (exit 1 if any failed, 2 if no GPU is visible):

1. **detect**: the node trainyard builds here (``local_node``, NVML) has every GPU, and its type is the
   model a spec names (``H100``, not NVML's "NVIDIA H100 80GB HBM3"); ``trainyard doctor`` sees them.
2. **job**: a server on the embedded default runs a job asking ``gpu: 1, gpu_type: <detected>``; the
   job sees exactly one GPU (``CUDA_VISIBLE_DEVICES``), multiplies bf16 matrices on it for
   ``--seconds``, and the launcher's NVML sampler records its utilisation (``job_usage``).
3. **exclusive**: two such jobs at once on a one-GPU node run one after the other, never together
   (with more GPUs: on different GPUs).
4. **refused**: more GPUs than the node has, or another GPU type, is refused at submit, naming the field.
5. **fenced**: a job asking no GPU, on this GPU node, with ``CUDA_VISIBLE_DEVICES`` unset, cannot open the
   GPUs' device files (EPERM) and torch finds no GPU, where ``trainyard doctor``'s "gpu devices" says the fence
   is enforced here (else: what the doctor says, and that the job could open them); each GPU's minor number
   as NVML gives it (``launch.devices.minors``) against its device file.
6. **serve**: the built-in model server, given ``--gpu 1``, loads a TorchScript model, then the same module as a
   ``torch.export`` program, onto the GPU, and each one's ``infer`` through ``/serve/NAME`` equals the model's
   own output on the CPU.

``bench/ddp.py`` measures NCCL training throughput beside this; it is not repeated here.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import httpx

from benchserver import BenchServer

JOB = r'''
import os, time, torch
seen = os.environ.get("CUDA_VISIBLE_DEVICES")
n = torch.cuda.device_count()
print(f"CUDA_VISIBLE_DEVICES={seen} devices={n} name={torch.cuda.get_device_name(0) if n else None}", flush=True)
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
start, count = time.time(), 0
t0 = time.time()
while time.time() - start < float(os.environ["SECONDS_ON_GPU"]):
    for _ in range(20):
        a = (a @ a).clamp_(-1, 1)
    torch.cuda.synchronize()
    count += 20
flops = 2 * 8192**3 * count / (time.time() - t0)
print(f"matmuls={count} tflops={flops / 1e12:.0f} started={start:.3f} ended={time.time():.3f}", flush=True)
'''


class Checks:
    def __init__(self) -> None:
        self.results: list[dict] = []

    def run(self, name: str, fn) -> None:  # noqa: ANN001
        t0 = time.perf_counter()
        try:
            detail = fn()
            ok = True
        except Exception as e:  # noqa: BLE001 - every check reports, whatever broke
            detail, ok = f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}", False
        self.results.append({"check": name, "ok": ok, "seconds": round(time.perf_counter() - t0, 2),
                             "detail": detail})
        print(f"{'ok  ' if ok else 'FAIL'} {name} ({time.perf_counter() - t0:.1f} s): {detail}", flush=True)


def check(cond: bool, message: str) -> None:
    if not cond:
        raise AssertionError(message)


def detect() -> str:
    import pynvml

    from trainyard.engines.detect import gpu_family, local_node

    pynvml.nvmlInit()
    try:
        names = [pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))
                 for i in range(pynvml.nvmlDeviceGetCount())]
    finally:
        pynvml.nvmlShutdown()
    node = local_node()
    check(node.gpu == len(names), f"node has {node.gpu} GPUs, NVML {len(names)}")
    check(node.gpu_type == gpu_family(names[0]), f"type {node.gpu_type!r} for {names[0]!r}")
    doctor = subprocess.run([sys.executable, "-m", "trainyard", "doctor"], capture_output=True, text=True,
                            timeout=120)
    line = next((x.strip() for x in doctor.stdout.splitlines() if "gpus here" in x), doctor.stdout[-300:])
    check(str(len(names)) in line, f"doctor says: {line}")
    return f"NVML {names}; node gpu={node.gpu} gpu_type={node.gpu_type} ids={node.gpu_ids}; doctor: {line}"


def gpu_job(srv: BenchServer, gpu_type: str, seconds: float, name: str = "gpu-job"):  # noqa: ANN201
    spec = {"name": name, "command": ["python", "-c", JOB], "env_vars": {"SECONDS_ON_GPU": str(seconds)},
            "resources": {"cpu": 1, "memory": "8Gi", "gpu": 1, "gpu_type": gpu_type}, "timeout": 600}
    return srv.client.submit(spec)


def job(srv: BenchServer, gpu_type: str, seconds: float) -> str:
    j = gpu_job(srv, gpu_type, seconds)
    usage = []
    deadline = time.monotonic() + seconds + 120
    while time.monotonic() < deadline:  # sample while it runs: the latest values are what we check
        info = srv.client.get(j.id)
        if info.status.value in ("succeeded", "failed", "cancelled"):
            break
        usage = srv.client.monitoring.job_usage(j.id) or usage
        time.sleep(1)
    info = j.wait(timeout=120)
    logs = j.logs()
    check(info.status.value == "succeeded", f"job {info.status.value}: {info.reason}\n{logs[-1500:]}")
    check("devices=1 " in logs, f"the job saw: {logs[:300]}")
    final = srv.client.monitoring.job_usage(j.id)
    peak = max([u.gpu_util or 0 for u in usage] + [u.mean_gpu_util or 0 for u in final])
    check(peak > 10, f"GPU utilisation sampled: {[u.model_dump() for u in usage + final]}")
    lines = [x for x in logs.splitlines() if x.startswith(("CUDA_", "matmuls"))]
    return f"{' | '.join(lines)}; sampled gpu_util peak {peak:.0f} %, " \
           f"gpu memory {max((u.gpu_memory_bytes or 0) for u in usage + final) / 2**30:.1f} GiB"


def exclusive(srv: BenchServer, gpu_type: str, gpus: int) -> str:
    jobs = [gpu_job(srv, gpu_type, 3, f"gpu-excl-{i}") for i in range(2)]
    spans, seen = [], []
    for j in jobs:
        info = j.wait(timeout=300)
        logs = j.logs()
        check(info.status.value == "succeeded", f"{j.id} {info.status.value}: {info.reason}\n{logs[-800:]}")
        last = [x for x in logs.splitlines() if x.startswith("matmuls")][-1]
        fields = dict(kv.split("=") for kv in last.split())
        spans.append((float(fields["started"]), float(fields["ended"])))
        seen.append(next(x for x in logs.splitlines() if x.startswith("CUDA_")).split()[0])
    overlap = min(spans[0][1], spans[1][1]) - max(spans[0][0], spans[1][0])
    if gpus == 1:
        check(overlap <= 0, f"both ran on the one GPU at once for {overlap:.2f} s: {spans}")
    else:
        check(seen[0] != seen[1] or overlap <= 0, f"both saw {seen} while overlapping {overlap:.2f} s")
    return f"GPU spans {[(round(b - spans[0][0], 2), round(e - spans[0][0], 2)) for b, e in spans]} s; {seen}"


def refused(srv: BenchServer, gpu_type: str, gpus: int) -> str:
    from trainyard.errors import TrainyardError

    out = []
    for resources, field in (({"gpu": gpus + 1}, "resources.gpu"),
                             ({"gpu": 1, "gpu_type": "A100" if gpu_type != "A100" else "H100"},
                              "resources.gpu_type")):
        try:
            j = srv.client.submit({"name": "too-big", "command": ["true"], "resources": resources})
        except TrainyardError as e:
            text = str(e)
            check(field in text, f"{resources}: refused without naming {field}: {text}")
            out.append(text.splitlines()[0][:160])
        else:
            raise AssertionError(f"{resources} was accepted as {j.id}")
    return " | ".join(out)


FENCE_JOB = r'''
import glob, os, torch
os.environ.pop("CUDA_VISIBLE_DEVICES", None)
for path in sorted(glob.glob("/dev/nvidia[0-9]*")):
    try:
        os.close(os.open(path, os.O_RDWR))
        print(f"open {path} ok", flush=True)
    except OSError as e:
        print(f"open {path} {os.strerror(e.errno)}", flush=True)
print(f"torch devices={torch.cuda.device_count()}", flush=True)
'''


def fenced(srv: BenchServer) -> str:
    from trainyard.launch import devices

    doctor = subprocess.run([sys.executable, "-m", "trainyard", "doctor"], capture_output=True, text=True,
                            timeout=120)
    line = next((x.strip() for x in doctor.stdout.splitlines() if "gpu devices" in x), "no gpu devices line")
    known = devices.minors()
    files = {p.name: os.minor(p.stat().st_rdev) for p in sorted(Path("/dev").glob("nvidia[0-9]*"))}
    j = srv.client.submit({"name": "gpu-fenced", "command": ["python", "-c", FENCE_JOB],
                           "resources": {"cpu": 1, "memory": "4Gi"}, "timeout": 300})
    info = j.wait(timeout=300)
    logs = j.logs()
    check(info.status.value == "succeeded", f"job {info.status.value}: {info.reason}\n{logs[-800:]}")
    opened = [x for x in logs.splitlines() if x.startswith("open ")]
    seen = f"NVML minors {known}, device files {files}; the job: {' | '.join(opened)}; " \
           + next((x for x in logs.splitlines() if x.startswith("torch ")), "")
    if "can open only its own" in line:
        check(opened and all(x.endswith("Operation not permitted") for x in opened), f"not fenced: {seen}")
        check("devices=0" in logs, f"torch found a GPU: {seen}")
    return f"{seen}; doctor: {line}"


def serve(srv: BenchServer, tmp: Path) -> str:
    """The same module served on the GPU as TorchScript and as a torch.export program (moved onto the GPU by
    its device pass): each answer within TF32's error of the CPU's."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).eval()
    torch.jit.script(model).save(str(tmp / "gpu-model.pt"))
    batch = torch.export.Dim("batch")
    torch.export.save(torch.export.export(model, (torch.zeros(2, 64),), dynamic_shapes=({0: batch},)),
                      tmp / "gpu-model.pt2")
    return "; ".join(_serve_one(srv, tmp / name, fmt, model) for name, fmt in
                     [("gpu-model.pt", "torchscript"), ("gpu-model.pt2", "torch-export")])


def _serve_one(srv: BenchServer, path: Path, fmt: str, model) -> str:
    import numpy as np
    import torch

    from trainyard.spec.serve import serve_spec

    name = f"gpu-{fmt}"  # the GPU frees when the last one's replica ends: the next one waits for it
    srv.client.services.apply(serve_spec(f"file://{path}", name, replicas=1, cpu=1, memory="8Gi", gpu=1,
                                         model_format=fmt))
    srv.client.services.wait_ready(name, 1, timeout=240)
    x = torch.randn(4, 64)
    with torch.inference_mode():
        want = model(x).numpy()
    token = (srv.home / "token").read_text().strip()
    body = {"inputs": [{"name": "input-0", "shape": [4, 64], "datatype": "FP32", "data": x.flatten().tolist()}]}
    r = httpx.post(f"{srv.url}/serve/{name}/v2/models/{name}/infer", json=body, timeout=60,
                   headers={"Authorization": f"Bearer {token}"})
    check(r.status_code == 200, f"{fmt}: infer answered {r.status_code}: {r.text[:400]}")
    got = r.json()["outputs"][0]
    diff = float(np.abs(np.asarray(got["data"], dtype=np.float32).reshape(got["shape"]) - want).max())
    check(diff < 1e-2, f"{fmt}: the GPU's answer differs from the CPU's by {diff}")  # TF32 matmuls on the GPU
    logs = "".join(c.data for c in srv.client.services.logs(name))
    ready = next((x for x in logs.splitlines() if " ready: " in x), logs[-400:])
    check("cuda" in ready, f"{fmt}: the model server did not load onto the GPU: {ready}")
    srv.client.services.delete(name)
    return f"{fmt}: max |GPU - CPU| = {diff:.2e}; {ready.strip()[-100:]}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path)
    ap.add_argument("--seconds", type=float, default=8.0, help="matrix products on the GPU per job")
    args = ap.parse_args()
    try:
        import torch

        if not torch.cuda.is_available():
            print("no GPU visible to torch here: nothing to check")
            return 2
        print(f"torch {torch.__version__}, {torch.cuda.device_count()} × {torch.cuda.get_device_name(0)}, "
              f"python {sys.version.split()[0]}", flush=True)
    except ImportError:
        print("torch is not installed here")
        return 2
    from trainyard.engines.detect import local_node

    node = local_node()
    checks = Checks()
    checks.run("detect", detect)
    tmp = Path(tempfile.mkdtemp(prefix="trainyard-gpu-"))
    srv = BenchServer(tmp / "home")
    try:
        checks.run("job", lambda: job(srv, node.gpu_type, args.seconds))
        checks.run("exclusive", lambda: exclusive(srv, node.gpu_type, node.gpu))
        checks.run("refused", lambda: refused(srv, node.gpu_type, node.gpu))
        checks.run("fenced", lambda: fenced(srv))
        checks.run("serve", lambda: serve(srv, tmp))
    finally:
        srv.close()
    failed = [c["check"] for c in checks.results if not c["ok"]]
    print(f"\n{len(checks.results) - len(failed)}/{len(checks.results)} checks ok"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    if args.json:
        args.json.write_text(json.dumps({"node": node.model_dump(), "results": checks.results}, indent=1,
                                        default=str))
    if os.environ.get("TRAINYARD_GPU_KEEP") is None:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
