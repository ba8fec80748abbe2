"""DDP training throughput: examples/ddp/train.py launched by trainyard against torchrun directly.

    .venv/bin/python bench/ddp.py [--epochs 30] [--hidden 256] [--repeats 5] [--max-repeats 15] [--memory 2Gi|none]
                                  [--no-gpu | --no-cpu] [--json out.json]

One run measures, on the same data, epochs and world size:

- **direct**: ``python -m torch.distributed.run --nproc-per-node 2 train.py …``
  in a fresh folder;
- **trainyard**: a trainyard server started in a temporary ``TRAINYARD_HOME``
  (``python -m trainyard server``), the same command submitted with
  ``trainyard.Client(url).submit(spec)`` as ``replicas: 2``,
  ``distributed: torch`` (one process per replica), the number read from
  ``job.logs()``.

Two gates, both on medians of runs that alternate which goes first:

- **training**: the script's own ``throughput samples_per_sec=`` line (training
  samples of all ranks per second of training steps): what trainyard's way of
  running the processes costs the training itself (environment, CPU placement,
  log tee, the launcher next to it). Target: trainyard ≥ 0.98 × direct.
- **wall**: start to exit (torchrun's process; submit to the job's end through
  the SDK), so start-up, rendezvous, checkpoints and teardown show. Target:
  direct wall / trainyard wall ≥ 0.95 (trainyard at most ~5 % slower end to end,
  its submit, launch and status round trips included).

Each pair of runs (one each way, back to back) gives a ratio; the spread is the
standard error of the median ratio (1.25 σ / √n). Runs go on past ``--repeats``,
up to ``--max-repeats``, until the spread of both gates is smaller than their
margin (the target's distance from 1: 0.02 and 0.05). A gate prints MISS unless
every run was measured and the spread came under the margin (then it says
"undecided"), else PASS/MISS on the median. On a machine with as many cores as
processes, whatever the launchers and the server use comes out of training;
``--memory none`` shows the share of the launchers' memory sampling.

When ``torch.cuda.is_available()``, the same again on the GPU (NCCL), with
one process per GPU (at most 2) and the GPU named. It is a measurement: it
exits 0 whatever the numbers (2 on bad usage).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from benchserver import BenchServer

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "ddp"
THROUGHPUT = re.compile(r"throughput samples_per_sec=([0-9.]+)")
TARGET_RATIO = 0.98  # training throughput, trainyard / direct
TARGET_WALL = 0.95  # speed end to end: direct wall / trainyard wall


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def throughput(text: str) -> float:
    found = THROUGHPUT.findall(text)
    if not found:
        tail = "\n".join(text.splitlines()[-15:])
        raise RuntimeError(f"no 'throughput samples_per_sec=' line in the output; its end:\n{tail}")
    return float(found[-1])


def train_args(args: argparse.Namespace) -> list[str]:
    return ["--epochs", str(args.epochs), "--batch-size", str(args.batch_size), "--hidden", str(args.hidden),
            "--lr", str(args.lr)]


# -- the two ways to run it ---------------------------------------------------------


def run_direct(args: argparse.Namespace, nproc: int, tmp: Path) -> tuple[float, float]:
    """(samples/s, wall s) of one torchrun in a fresh folder, so it never resumes."""
    cwd = Path(tempfile.mkdtemp(prefix="direct-", dir=tmp))
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc),
            "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
            str(EXAMPLE / "train.py"), *train_args(args)]
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=args.job_timeout)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"torchrun exited with {proc.returncode}:\n{proc.stdout[-2000:]}")
    return throughput(proc.stdout), wall


class Server(BenchServer):
    """``python -m trainyard server`` in its own process group, for one TRAINYARD_HOME."""

    def run(self, args: argparse.Namespace, replicas: int, gpu: int) -> tuple[float, float]:
        """(samples/s, wall s from submit to the end) of one job."""
        spec = {
            "name": "bench-ddp", "workdir": ".", "command": ["python", "train.py", *train_args(args)],
            "replicas": replicas, "distributed": "torch",
            "resources": {"cpu": 1, "memory": None if args.memory == "none" else args.memory, "gpu": gpu},
            "timeout": args.job_timeout,
        }
        t0 = time.perf_counter()
        job = self.client.submit(spec, base_dir=EXAMPLE)
        info = job.wait(timeout=args.job_timeout + 60)
        wall = time.perf_counter() - t0
        logs = job.logs()
        if info.status.value != "succeeded":
            raise RuntimeError(f"job {job.id} {info.status.value}: {info.reason}\n{logs[-2000:]}")
        return throughput(logs), wall


# -- one comparison ------------------------------------------------------------------


def compare(label: str, args: argparse.Namespace, server: Server | None, nproc: int, gpu: int,
            tmp: Path) -> dict:
    print(f"\n{label}: {nproc} process{'es' if nproc > 1 else ''}, {args.repeats}–{args.max_repeats} run(s) each "
          f"way, alternating", flush=True)
    runs: dict[str, list[tuple[float, float]]] = {"direct": [], "trainyard": []}
    errors: dict[str, str] = {}
    i = 0
    while i < args.warmup + args.max_repeats:
        measured = i - args.warmup
        if len(errors) == 2 or (measured >= args.repeats and (errors or decided(runs))):
            break
        order = ("direct", "trainyard") if i % 2 == 0 else ("trainyard", "direct")
        for which in order:
            if which in errors:
                continue
            try:
                if which == "direct":
                    result = run_direct(args, nproc, tmp)
                elif server is None:
                    raise RuntimeError("no trainyard server")
                else:
                    result = server.run(args, nproc, gpu)
            except Exception as e:  # report what was measured, and why the rest was not
                errors[which] = f"run {measured + 1}: {e}"
                print(f"  {which:<9} failed: {e}", flush=True)
                continue
            if i < args.warmup:
                print(f"  {which:<9} warm-up {result[0]:10.1f} samples/s", flush=True)
            else:
                runs[which].append(result)
                print(f"  {which:<9} run {measured + 1}  {result[0]:10.1f} samples/s  (wall {result[1]:5.1f} s)",
                      flush=True)
        i += 1
    return {"label": label, "nproc": nproc, "runs": runs, "errors": errors}


def pair_ratios(runs: dict) -> tuple[list[float], list[float]]:
    """Per pair of runs: trainyard / direct samples/s, and direct / trainyard wall."""
    pairs = list(zip(runs["direct"], runs["trainyard"]))
    return [t[0] / d[0] for d, t in pairs], [d[1] / t[1] for d, t in pairs]


def spread(xs: list[float]) -> float:
    """Standard error of the median of ``xs`` (1.25 σ / √n); infinite below two samples."""
    return 1.2533 * statistics.stdev(xs) / len(xs) ** 0.5 if len(xs) > 1 else float("inf")


def decided(runs: dict) -> bool:
    speed, wall = pair_ratios(runs)
    return bool(speed) and spread(speed) < 1 - TARGET_RATIO and spread(wall) < 1 - TARGET_WALL


def report(results: list[dict], args: argparse.Namespace) -> None:
    print("\nsummary (medians; range in brackets; spread = standard error of the median ratio):")
    for r in results:
        print(f"  {r['label']}")
        for which in ("direct", "trainyard"):
            rs = r["runs"][which]
            if rs:
                xs, ws = [x for x, _ in rs], [w for _, w in rs]
                print(f"    {which:<10} {statistics.median(xs):10.1f} samples/s ({min(xs):.0f}–{max(xs):.0f})   "
                      f"wall {statistics.median(ws):5.1f} s ({min(ws):.1f}–{max(ws):.1f}), {len(rs)} runs")
            if which in r["errors"]:
                print(f"    {which:<10} failed: {r['errors'][which][:300]}")
        speed, wall = pair_ratios(r["runs"])
        complete = not r["errors"] and len(speed) >= args.repeats
        for name, xs, target in (("training trainyard/direct", speed, TARGET_RATIO),
                                 ("wall direct/trainyard", wall, TARGET_WALL)):
            if not xs:
                print(f"    MISS  {name}: not measured (target ≥ {target})")
                continue
            m, sp, margin = statistics.median(xs), spread(xs), 1 - target
            if not complete:
                ok = f"MISS  (not every run was measured: {len(xs)} pairs of {args.repeats} or more)"
            elif sp >= margin:
                ok = f"MISS  (undecided: spread {sp:.3f} ≥ margin {margin:.2f} after {len(xs)} pairs)"
            else:
                ok = "PASS" if m >= target else "MISS"
            print(f"    {name} = {m:.3f} ({min(xs):.3f}–{max(xs):.3f}, spread {sp:.3f}, {len(xs)} pairs); "
                  f"target ≥ {target}: {ok}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=32, help="per process")
    ap.add_argument("--lr", type=float, default=0.003)
    ap.add_argument("--repeats", type=int, default=5, help="measured runs each way at least (default 5)")
    ap.add_argument("--max-repeats", type=int, default=15,
                    help="measured runs each way at most, while the spread is not under the margin (default 15)")
    ap.add_argument("--memory", default="2Gi",
                    help="memory per replica for the trainyard job, as in examples/ddp/job.yaml; 'none': no "
                         "limit, so the launcher does not sample memory (default %(default)s)")
    ap.add_argument("--warmup", type=int, default=1, help="unmeasured runs each way first (default 1)")
    ap.add_argument("--no-gpu", action="store_true", help="skip the GPU comparison")
    ap.add_argument("--no-cpu", action="store_true", help="skip the CPU (gloo) comparison")
    ap.add_argument("--job-timeout", type=float, default=600.0)
    ap.add_argument("--json", type=Path, help="also write the numbers here")
    args = ap.parse_args()
    if args.repeats < 1 or args.warmup < 0 or args.epochs < 1 or args.max_repeats < args.repeats:
        ap.error("--repeats and --epochs must be at least 1, --warmup at least 0, --max-repeats at least --repeats")

    tmp = Path(tempfile.mkdtemp(prefix="trainyard-bench-ddp-"))
    gpus = torch.cuda.device_count() if torch.cuda.is_available() and not args.no_gpu else 0
    print(f"python {sys.version.split()[0]}, torch {torch.__version__}, {os.cpu_count()} cpus, load average "
          f"{os.getloadavg()[0]:.2f}; epochs={args.epochs} hidden={args.hidden} batch={args.batch_size}/process; "
          f"trainyard memory per replica {args.memory}; home {tmp / 'home'}")
    results: list[dict] = []
    server = None
    try:
        try:
            server = Server(tmp / "home")
        except Exception as e:
            print(f"trainyard server did not start: {e}")
        # CPU: hide the GPUs from both, so the script picks gloo; trainyard sets CUDA_VISIBLE_DEVICES itself.
        saved = os.environ.get("CUDA_VISIBLE_DEVICES")
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        try:
            if not args.no_cpu:
                results.append(compare("CPU, gloo", args, server, 2, 0, tmp))
        finally:
            if saved is None:
                os.environ.pop("CUDA_VISIBLE_DEVICES", None)
            else:
                os.environ["CUDA_VISIBLE_DEVICES"] = saved
        if gpus:
            name = torch.cuda.get_device_name(0)
            n = min(2, gpus)  # NCCL wants one GPU per process
            results.append(compare(f"GPU, NCCL: {n} × {name}", args, server, n, 1, tmp))
        elif not args.no_gpu:
            print("\nGPU: torch.cuda.is_available() is False here; no NCCL comparison")
    finally:
        if server is not None:
            server.close()
    report(results, args)
    if args.json:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": str(args.json)}, "results": results},
                                        indent=1, default=str))
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
