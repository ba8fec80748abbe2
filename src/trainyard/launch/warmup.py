"""The launcher's own path, run a few times in the zygote before it forks the launchers that need it.

Python 3.11 rewrites a code object's bytecode in place once it has run a few
times (quickening, then specializing each instruction to the types it sees). A
zygote that never ran the launcher's path leaves that to every launcher it
forks: each one specializes the same code again, and each write lands on a
page it shares with the zygote, which the kernel must then copy (a fault of
some microseconds; a launcher took about 950 of them). Run here once, the
specialized code is what every fork inherits.

Only what has no effect outside a scratch folder of its own runs here: the
config read, the work dir and environment, an overlay's listing, the spawn and
exit of ``true``, a report's body and the result's file. Nothing is sent, no
signal handler is touched, no child but its own ``true`` is waited for (the
zygote's launchers are its children too).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import threading
from pathlib import Path

ROUNDS = 12  # past 3.11's quickening delay (8 runs) and the first specialization of each instruction


def warm(rounds: int = ROUNDS) -> None:
    """Run the path ``rounds`` times in a scratch folder, then remove it; never raises."""
    try:
        scratch = _scratch()
    except OSError:
        return
    try:
        _warm(Path(scratch), rounds)
    except Exception:  # noqa: BLE001  (an optimisation: a launcher works the same without it)
        pass
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _scratch() -> str:
    """A new folder of the zygote's own. Not by ``tempfile``: it imports ``random``, whose hook reseeds
    from the kernel in every forked child (~40 µs and a copied page per launcher)."""
    name = f"trainyard-warmup-{os.getpid()}-{os.urandom(6).hex()}"
    base = os.environ.get("TMPDIR") or "/tmp"
    try:
        os.mkdir(os.path.join(base, name), 0o700)
    except OSError:
        if base == "/tmp":
            raise
        base = "/tmp"  # as tempfile would: a $TMPDIR that is not there, or not writable
        os.mkdir(os.path.join(base, name), 0o700)
    return os.path.join(base, name)


def _warm(scratch: Path, rounds: int) -> None:
    from trainyard.launch import procs, scratchenv, tail
    from trainyard.launch.config import LOG_NAME, METRICS_NAME, RESULT_NAME, LaunchConfig
    from trainyard.launch.files import atomic_write_json, real_dir
    from trainyard.launch.prepare import build_env, cache_entries, prepare_workdir, resolve_inputs
    from trainyard.launch.reporter import Reporter

    attempt = scratch / "attempt"
    attempt.mkdir()
    LaunchConfig(job_id="warmup", attempt_id="warmup-1", attempt=1, server="http://127.0.0.1:9", command=["true"],
                 env={"TRAINYARD_PARAMS": "{}"}, checkpoint_dir=str(scratch / "checkpoints"), venv="overlay",
                 venv_cache=str(scratch / "venvs"), sample_every=5.0).write(attempt)
    venv = attempt / "venv"
    scratchenv._build_overlay(venv)
    wake_r, wake_w = os.pipe()
    try:
        for _ in range(rounds):
            here = real_dir(str(attempt))
            config = LaunchConfig.read(here)
            work = prepare_workdir(config.snapshot, here / "work")
            scratchenv.seen(venv)
            cache = here / "input_cache"
            inputs = resolve_inputs(config.inputs, cache, work)
            cache_entries(inputs, cache)
            env = build_env(config, here, inputs, venv)
            proc = procs.spawn(config.command, str(work), env, str(here / LOG_NAME))
            waiter = procs.watch(proc, wake_w)
            while not waiter.exited:
                select.select([wake_r, *waiter.fds()], [], [], 1.0)
            waiter.join()
            result = {"exit_code": proc.returncode, "reason": "Succeeded", "message": "", "outputs": []}
            reporter = Reporter(config, str(here / LOG_NAME), str(here / METRICS_NAME), lambda: None)
            reporter.started(proc.pid)
            reporter.exited()
            reporter._final(result)
            body, log_n, metrics_n = reporter._build(True)
            reporter._last_chunk(log_n, metrics_n)
            body["result"] = result
            json.dumps(body).encode()
            tail.file_size(str(here / LOG_NAME))
            atomic_write_json(here / RESULT_NAME, result)
    finally:
        os.close(wake_r)
        os.close(wake_w)


def touch() -> None:
    """For a launcher forked ahead, while it waits: its path's steps on a made-up attempt, reading
    only and writing nothing, so that the pages they touch (each object's reference count is a
    write, which copies the page it shares with the zygote) are its own before its attempt comes
    rather than after. About 300 such copies were left on the path to the exec without it."""
    try:
        _touch()
    except Exception:  # noqa: BLE001  (an optimisation)
        pass


def _touch() -> None:
    from trainyard.launch import procs, scratchenv, tail
    from trainyard.launch.config import LaunchConfig
    from trainyard.launch.emptydirs import Pool
    from trainyard.launch.files import real_dir
    from trainyard.launch.launchlog import LaunchLog
    from trainyard.launch.prepare import INHERITED_SECRETS, build_env, cache_entries, resolve_inputs
    from trainyard.launch.reporter import Reporter
    from trainyard.launch.transport import urlsplit

    procs.become_subreaper()  # its own attribute, harmless before it has a child; done once
    here = real_dir(os.path.dirname(__file__))  # a folder that is there, written to by no one here
    Path(__file__).read_bytes()
    config = LaunchConfig(**json.loads(_CONFIG))
    LaunchLog(str(here / "launcher.log")).stream(1)
    for name in INHERITED_SECRETS:
        os.environ.get(name)
    missing = here / ".trainyard-touch-none"  # never made: each step below finds nothing there
    Pool(str(missing)).place_file(here / "output.log")
    scratchenv.take_spare(missing, missing / "venv")
    (missing / "pyvenv.cfg").exists()
    scratchenv.seen(here)
    inputs = resolve_inputs(config.inputs, missing, here)
    cache_entries(inputs, missing)
    build_env(config, here, inputs, here, dirs=_NoFolders())
    procs.on_path(config.command[0], config.env)  # the lookup before posix_spawn
    procs.nothing_inherited()  # the checks before posix_spawn: fds, threads
    threading.active_count()
    reporter = Reporter(config, str(missing / "output.log"), str(missing / "metrics.jsonl"), lambda: None)
    reporter.started(1)
    reporter._final({"exit_code": 0, "reason": "", "message": "", "outputs": []})
    body, log_n, metrics_n = reporter._build(True)
    reporter._last_chunk(log_n, metrics_n)
    tail.file_size(str(missing))
    urlsplit(config.server)
    json.dumps(body).encode()


class _NoFolders:
    """An emptydirs.Pool that makes nothing: :func:`touch` runs build_env without writing."""

    def make(self, folder: Path) -> None:
        pass


_CONFIG = json.dumps({"job_id": "j", "attempt_id": "j-1", "attempt": 1, "server": "http://127.0.0.1:9",
                      "command": ["true"], "env": {"TRAINYARD_PARAMS": "{}"}, "venv": "overlay"})
