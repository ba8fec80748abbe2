"""Submit→finished latency of a trivial job, against a bare subprocess and Ray's Jobs API.

    .venv/bin/python bench/latency.py [--n 30] [--warmup 3] [--cli 10] [--no-ray] [--marks]

Starts its own trainyard server in a temporary TRAINYARD_HOME, runs N
``python -c pass`` jobs one after another through the SDK, interleaved with N
bare ``subprocess.run`` calls of the same command (alternating which goes
first, so drift and noise hit both alike), then the same through Ray's Jobs
API when ``ray`` is importable, and ``--cli`` jobs through ``trainyard run
--wait`` and ``trainyard run --follow`` (a whole CLI process each, interleaved
with its own start-up, ``trainyard --help``, and a bare run). Prints medians, p90 and spread, ratios,
a per-phase breakdown of the trainyard latency, the idle server's RSS, and
PASS/MISS per target; a run that stopped before all its jobs were measured is
a MISS, whatever it measured. It is a measurement: it exits 0 whatever the
numbers (2 on bad usage).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

import fsstate
import launcher_marks
from benchserver import BenchServer

COMMAND = [sys.executable, "-c", "pass"]
MARKS_ENV = "TRAINYARD_LAUNCH_MARKS"  # trainyard.envvars.LAUNCH_MARKS, inherited by the server
TARGET_BARE_RATIO, TARGET_RAY_RATIO, TARGET_RSS_MB = 2.0, 20.0, 150.0  # issue 20: ≤ 2x (was 3x)
PHASES = [  # consecutive (label, from, to) over the per-job timestamps of Trainyard.run
    ("submit: SDK call → HTTP → job row written", "submit_start", "job_created"),
    ("admission: job row → attempt row (scheduler wake)", "job_created", "attempt_created"),
    ("engine: attempt row → launch.json written", "attempt_created", "launch_json"),
    ("launcher: forked (zygote) → its work dir made", "launch_json", "launcher_up"),
    ("launcher: setup, spawn, 1st report → 'running' in DB *", "launcher_up", "started"),
    ("command runs and exits, reaped → result.json", "started", "result_json"),
    ("exit report: result.json → attempt ended in DB", "result_json", "ended"),
    ("wait: attempt ended → SDK wait() returns", "ended", "wait_end"),
]
ASIDES = [  # overlapping spans, shown for what they tell
    ("submit() returned (its response overlaps the rows above)", "submit_start", "submit_end"),
    ("  of which: job row written → response at the client", "job_created", "submit_end"),
]


# -- small helpers -------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(xs: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    s = sorted(xs)
    return s[max(0, math.ceil(q * len(s)) - 1)]


def ms(x: float) -> str:
    return f"{x * 1000:8.1f} ms"


def mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def tree_rss(pid: int) -> tuple[int, int]:
    """(RSS of the process and all its descendants in bytes, number of descendants)."""
    proc = psutil.Process(pid)
    kids = proc.children(recursive=True)
    total = proc.memory_info().rss
    for k in kids:
        try:
            total += k.memory_info().rss
        except psutil.Error:
            pass
    return total, len(kids)


def stop(proc: subprocess.Popen, timeout: float = 15.0) -> None:
    """SIGTERM what we started, then SIGKILL it and any descendant still there after ``timeout``."""
    if proc.poll() is not None:
        return
    try:
        tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    except psutil.Error:
        tree = []
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    _, alive = psutil.wait_procs(tree, timeout=5)
    for p in alive:
        try:
            p.kill()
        except psutil.Error:
            pass


# -- the three ways to run the command ----------------------------------------


def run_bare() -> float:
    t0 = time.perf_counter()
    subprocess.run(COMMAND, check=True)
    return time.perf_counter() - t0


def run_cli(home: Path, argv: list[str]) -> float:
    """Wall time of one CLI process (``python -m trainyard ...``) against the bench server's home."""
    env = {**os.environ, "TRAINYARD_HOME": str(home)}
    env.pop("TRAINYARD_SERVER", None)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "trainyard", *argv], env=env, check=True, cwd=home,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


class Trainyard(BenchServer):
    def __init__(self, home: Path, argv: list[str], job_timeout: float):
        super().__init__(home, argv)
        self.job_timeout = job_timeout
        self.spec = {"name": "bench", "command": COMMAND}

    def run(self) -> tuple[float, dict[str, float]]:
        """One job, submit → wait() returned; and the timestamps of its phases (epoch seconds)."""
        wall0, t0 = time.time(), time.perf_counter()
        job = self.client.submit(self.spec)
        wall1 = time.time()
        info = job.wait(timeout=self.job_timeout)
        elapsed, wall2 = time.perf_counter() - t0, time.time()
        if info.status.value != "succeeded":
            raise RuntimeError(f"job {job.id} {info.status.value}: {info.reason}")
        a = info.attempts[-1]
        adir = self.home / "attempts" / a.id
        if (adir / "r0").is_dir():  # one folder per replica
            adir = adir / "r0"
        stamps = {
            "submit_start": wall0, "submit_end": wall1, "job_created": info.created_at,
            "attempt_created": a.created_at, "launch_json": mtime(adir / "launch.json"),
            "launcher_up": mtime(adir / "work"),  # made first thing in Launcher._prepare (the command writes nothing)
            "started": a.started_at, "result_json": mtime(adir / "result.json"), "ended": a.ended_at,
            "wait_end": wall2,
        }
        if os.environ.get(MARKS_ENV):
            stamps["marks"] = launcher_marks.load(adir)
        return elapsed, stamps

    def idle_rss(self, idle: float = 2.0) -> tuple[int, int]:
        time.sleep(idle)
        return tree_rss(self.proc.pid)



def ray_cli() -> str:
    """The `ray` script of this interpreter's environment, else the one on PATH."""
    here = Path(sys.executable).parent / "ray"
    return str(here) if here.exists() else shutil.which("ray") or "ray"


class Ray:
    """A throwaway Ray head (``ray start --block`` in its own process group) and its Jobs API."""

    def __init__(self, tmp: Path):
        from ray.job_submission import JobSubmissionClient

        gcs, dash = free_port(), free_port()
        self.log = open(tmp / "ray.log", "ab")
        self.proc = subprocess.Popen(
            [ray_cli(), "start", "--head", "--node-ip-address=127.0.0.1", f"--port={gcs}",
             f"--dashboard-port={dash}", "--include-dashboard=true", "--dashboard-host=127.0.0.1",
             f"--temp-dir={tmp / 'ray'}", "--block"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        url, deadline = f"http://127.0.0.1:{dash}", time.monotonic() + 120
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"`ray start` exited with {self.proc.returncode}; see {tmp / 'ray.log'}")
            try:
                self.client = JobSubmissionClient(url)
                self.client.list_jobs()
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"Ray's dashboard did not answer at {url}") from None
                time.sleep(0.5)

    def run(self) -> float:
        from ray.job_submission import JobStatus

        t0 = time.perf_counter()
        job_id = self.client.submit_job(entrypoint=shlex.join(COMMAND))
        while (status := self.client.get_job_status(job_id)) not in (JobStatus.SUCCEEDED, JobStatus.FAILED,
                                                                       JobStatus.STOPPED):
            time.sleep(0.01)
        elapsed = time.perf_counter() - t0
        if status != JobStatus.SUCCEEDED:
            raise RuntimeError(f"ray job {job_id} {status}")
        return elapsed

    def close(self) -> None:
        stop(self.proc, timeout=30)
        self.log.close()


# -- the run -------------------------------------------------------------------


def summary(name: str, xs: list[float]) -> str:
    return (f"  {name:<10} n={len(xs):<3} median {ms(statistics.median(xs))}   p90 {ms(pct(xs, 0.9))}   "
            f"min {ms(min(xs))}   max {ms(max(xs))}")


def _partial(got: int, want: int) -> str:
    return "" if got == want else f"  — only {got} of {want} runs measured: MISS"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def breakdown(stamps: list[dict[str, float]]) -> None:
    print("\ntrainyard latency by phase (median over jobs; from the JobInfo timestamps and the")
    print("mtimes of files in the attempt dir, which have the kernel's coarse clock resolution):")

    def row(label: str, a: str, b: str) -> float:
        spans = [s[b] - s[a] for s in stamps if s.get(a) is not None and s.get(b) is not None]
        if not spans:
            return 0.0
        print(f"  {label:<60} {ms(statistics.median(spans))}   p90 {ms(pct(spans, 0.9))}")
        return statistics.median(spans)

    total = sum(row(*phase) for phase in PHASES)
    print(f"  {'sum of phase medians':<60} {ms(total)}")
    print("  * the command is already running by then: its start overlaps this phase (and a command that")
    print("    ends before its first report is recorded as started by that report, with its end)")
    for aside in ASIDES:
        row(*aside)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=30, help="measured jobs per system (default 30)")
    ap.add_argument("--warmup", type=int, default=3, help="unmeasured runs of each first (default 3)")
    ap.add_argument("--no-ray", action="store_true", help="skip Ray even when it is installed")
    ap.add_argument("--cli", type=int, default=10, help="jobs through `trainyard run -f` too (default 10; 0: none)")
    ap.add_argument("--job-timeout", type=float, default=60.0, help="give up on a trainyard job after this")
    ap.add_argument("--server-cmd", default=f"{sys.executable} -m trainyard server",
                    help="how to start the server (split on spaces; default: %(default)s)")
    ap.add_argument("--json", type=Path, help="also write the raw numbers here")
    ap.add_argument("--marks", action="store_true",
                    help="launchers write marks.json (TRAINYARD_LAUNCH_MARKS): print their steps' wall and CPU")
    args = ap.parse_args()
    if args.marks:
        os.environ[MARKS_ENV] = "1"
    if args.n < 1 or args.warmup < 0 or args.cli < 0:
        ap.error("--n must be at least 1, --warmup and --cli at least 0")

    tmp = Path(tempfile.mkdtemp(prefix="trainyard-bench-"))
    print(fsstate.describe(tmp))
    fsstate.settle(tmp)
    try:
        measure(args, tmp)
    finally:
        fsstate.removed(tmp)
    return 0


def measure(args: argparse.Namespace, tmp: Path) -> None:
    print(f"python {sys.version.split()[0]} on {os.cpu_count()} cpus; n={args.n}, warm-up {args.warmup}; "
          f"load average {os.getloadavg()[0]:.2f}; home {tmp}")
    bare: list[float] = []
    ty: list[float] = []
    stamps: list[dict[str, float]] = []
    ray: list[float] = []
    cli: list[float] = []
    cli_follow: list[float] = []
    cli_start: list[float] = []
    cli_bare: list[float] = []
    rss: dict[str, tuple[int, int]] = {}
    server = None
    try:
        (tmp / "home").mkdir()
        server = Trainyard(tmp / "home", args.server_cmd.split(), args.job_timeout)
        for _ in range(args.warmup):
            run_bare()
            server.run()
        rss["after warm-up"] = server.idle_rss()
        for i in range(args.n):
            order = ("bare", "trainyard") if i % 2 == 0 else ("trainyard", "bare")
            for which in order:
                if which == "bare":
                    bare.append(run_bare())
                else:
                    elapsed, st = server.run()
                    ty.append(elapsed)
                    stamps.append(st)
        rss[f"after {args.warmup + args.n} jobs"] = server.idle_rss()
        if args.cli:
            spec = server.home / "bench.yaml"
            spec.write_text(json.dumps(server.spec))  # JSON is YAML
            run_cli(server.home, ["--help"])  # warm the page cache
            for i in range(args.cli):  # the CLI's own start-up (`--help`: imports, no request), then a job
                cli_start.append(run_cli(server.home, ["--help"]))
                cli.append(run_cli(server.home, ["run", str(spec), "--wait"]))
                cli_follow.append(run_cli(server.home, ["run", str(spec), "--follow"]))
                cli_bare.append(run_bare())
    except Exception as e:  # report what was measured, and why it stopped
        print(f"\ntrainyard run stopped after {len(ty)} measured jobs: {e}")
        if server is not None:
            try:
                print("  nodes as the server sees them:",
                      [(n.name, n.cpu, n.cpu_used) for n in server.client.nodes()])
            except Exception:
                pass
    finally:
        if server is not None:
            server.close()

    if args.no_ray:
        print("\nray: skipped (--no-ray)")
    else:
        try:
            import ray  # noqa: F401
        except ImportError:
            print("\nray: not installed; skipping the Ray Jobs API comparison (pip install 'ray[default]')")
        else:
            r = None
            try:
                r = Ray(tmp)
                for _ in range(args.warmup):
                    r.run()
                ray = [r.run() for _ in range(args.n)]
            except Exception as e:
                print(f"\nray: stopped after {len(ray)} jobs: {e}")
            finally:
                if r is not None:
                    r.close()

    print(f"\nsubmit → finished, `python -c pass` (load average now {os.getloadavg()[0]:.2f}):")
    for name, xs in (("bare", bare), ("trainyard", ty), ("ray jobs", ray), ("cli run -w", cli),
                     ("cli run -f", cli_follow), ("cli --help", cli_start), ("bare (cli)", cli_bare)):
        if xs:
            print(summary(name, xs))
    if stamps:
        breakdown(stamps)
    if args.marks:
        launcher_marks.table([s["marks"] for s in stamps if s.get("marks")])
    if rss:
        print("\nidle server RSS (server + descendants, after 2 s idle):")
        for when, (b, kids) in rss.items():
            print(f"  {when:<16} {b / 2**20:6.1f} MB  ({kids} child process{'es' if kids != 1 else ''})")

    # a run that stopped early is a MISS whatever it measured: the jobs it lost are part of the result
    ty_all, ray_all = len(ty) == args.n and len(bare) == args.n, len(ray) == args.n
    print("\ntargets:")
    if ty and bare:
        r1 = statistics.median(ty) / statistics.median(bare)
        print(f"  {verdict(ty_all and r1 <= TARGET_BARE_RATIO)}  median trainyard/bare = {r1:.2f}x  "
              f"(target ≤ {TARGET_BARE_RATIO:g}x){_partial(len(ty), args.n)}")
        ratios = sorted(t / b for t, b in zip(ty, bare))  # pairs run back to back
        print(f"        spread: per-pair ratio p10 {pct(ratios, 0.1):.2f}x, median {statistics.median(ratios):.2f}x, "
              f"p90 {pct(ratios, 0.9):.2f}x")
    else:
        print("  MISS  median trainyard/bare: not measured")
    if cli and cli_bare:
        r3 = statistics.median(cli) / statistics.median(cli_bare)
        own = statistics.median(cli_start)
        print(f"  {verdict(len(cli) == args.cli and r3 <= TARGET_BARE_RATIO)}  median CLI `run --wait`/bare = {r3:.2f}x  "
              f"(target ≤ {TARGET_BARE_RATIO:g}x){_partial(len(cli), args.cli)}")
        # `run SPEC --wait` and `run SPEC --follow` take the quick path (no typer, pydantic or httpx):
        # the full CLI's start-up (`--help`) is part of neither
        print(f"        the full CLI: `--help` {own * 1000:.0f} ms; `run --follow` "
              f"{statistics.median(cli_follow) * 1000:.0f} ms "
              f"({statistics.median(cli_follow) / statistics.median(cli_bare):.1f}× bare, "
              f"{statistics.median(cli_follow) / statistics.median(cli):.2f}× `run --wait`)")
        if ty:  # the job's own path is the SDK's; what the CLI adds is its interpreter, imports and requests
            print(f"        the CLI's extra over the SDK's submit→done: "
                  f"{(statistics.median(cli) - statistics.median(ty)) * 1000:.0f} ms "
                  f"({(statistics.median(cli) - statistics.median(ty)) / statistics.median(cli_bare):.1f}× bare)")
    elif args.cli:
        print("  MISS  median CLI/bare: not measured")
    if ty and ray:
        r2 = statistics.median(ray) / statistics.median(ty)
        print(f"  {verdict(ty_all and ray_all and r2 >= TARGET_RAY_RATIO)}  median ray/trainyard = {r2:.1f}x  "
              f"(target ≥ {TARGET_RAY_RATIO:g}x){_partial(len(ray), args.n)}")
    else:
        print(f"  n/a   median ray/trainyard: Ray not measured (target ≥ {TARGET_RAY_RATIO:g}x)")
    if rss:
        worst = max(b for b, _ in rss.values()) / 2**20
        print(f"  {verdict(worst < TARGET_RSS_MB)}  idle server RSS = {worst:.1f} MB  (target < {TARGET_RSS_MB:g} MB)")
    else:
        print("  MISS  idle server RSS: not measured")

    if args.json:
        args.json.write_text(json.dumps({"bare": bare, "trainyard": ty, "ray": ray, "stamps": stamps, "cli": cli,
                                         "cli_follow": cli_follow,
                                         "cli_start": cli_start, "cli_bare": cli_bare,
                                         "rss": {k: v[0] for k, v in rss.items()}}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
