"""A command run beside the replica's own when the server asks (``trainyard exec``): ``nvidia-smi``, ``ls
checkpoints``, ``df -h`` on the node, as the job sees it.

It runs where the command runs and as whom: in its work dir, with its environment (its secrets included,
and masked in what comes back, as in the logs), dropped to its account (``run_as``), or in its container
(``podman exec``/``docker exec``). It is bounded as the command is, as ``kubectl exec`` is by its container:
inside the replica's cgroups (counted against the job's memory limit, past which the kernel's OOM killer acts
on the group, and against its pids limit) and in its namespaces where it has its own (:mod:`trainyard.launch.nsjoin`):
its mounts (the node's cached inputs read-only) and an account's ``/dev/shm`` and SysV IPC. No shell, no standard
input; the first :data:`CAP` bytes of standard output and error, interleaved as they came, go back; past its
timeout its process group is killed. Standard library only, imported when the first request comes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading

from trainyard.launch import nsjoin
from trainyard.launch.procs import Owned, check_executable

CAP = 250 * 1024  # bytes of output kept, under the server's 256 KiB an answer
# where the replica's command runs: (its launch.container.Container or None, launch.json's run_as, its work dir,
# its environment, its launch.cgroup.Group's (memory, pids, cpu, devices; none without), the launch.nsjoin.Spaces
# of its own or None), set by the launcher once it runs (plain values: nothing here is done, or imported, before a
# request)
Where = tuple[object, "dict | None", str, dict[str, str], tuple, "nsjoin.Spaces | None"]


def _place(where: Where, join: list[str]) -> tuple[list[str], str, dict[str, str]]:
    """What goes before a command to run it beside the replica's, in which folder, with which environment:
    wrapped as the launcher wraps the replica's own (the cgroup shim outermost, then ``join``, the entry into its
    namespaces, which root makes before the drop to the job's account)."""
    container, run_as, work, env, groups, _ = where
    if container is not None:  # the runtime's client, with the launcher's own environment; the image bounds it
        return [container.runtime, "exec", "-w", work, *container.user(), container.name], work, dict(os.environ)
    prefix: list[str] = []
    if run_as:
        from trainyard.launch.runas import RunAs

        prefix, env = RunAs(run_as).drop(env)  # root's part of the chain starts without the job's loader vars
    prefix = join + prefix
    if groups:
        from trainyard.launch.cgroup import wrap

        prefix = wrap(prefix, groups)
    return prefix, work, env


def run(argv: list[str], timeout: float, where: Where | None, masks=None) -> dict:  # noqa: ANN001
    """``{"exit_code", "output", "error"}`` of ``argv`` run beside the command (see the module's doc)."""
    if where is None:
        return _failed("the replica's command is not running here")
    spaces = where[5] if where[0] is None else None
    if spaces is None:
        return _run(argv, timeout, where, masks, [])
    try:
        held = nsjoin.hold(spaces)
    except nsjoin.NotJoined as e:
        return _failed(str(e))
    with held:  # until the command has entered them: it has ended when _run returns
        return _run(argv, timeout, where, masks, held.prefix(where[2]))


def _failed(error: str) -> dict:
    return {"exit_code": None, "output": "", "error": error}


def _run(argv: list[str], timeout: float, where: Where, masks, join: list[str]) -> dict:  # noqa: ANN001
    try:
        prefix, cwd, env = _place(where, join)
    except OSError as e:  # no setpriv here
        return _failed(str(e))
    if prefix and where[0] is None:  # behind a shim, nsenter or setpriv the exec is too late to tell "cannot run"
        try:
            check_executable(argv[0], cwd, where[3])  # on the job's PATH, where the command will look
        except OSError as e:
            return _failed(f"cannot run {argv[0]!r}: {e.strerror or e}")
    whole = [*prefix, *argv]
    if prefix and where[0] is None and "OPTIND" in where[3]:  # a shell of ours may be in the prefix
        from trainyard.launch import optind

        whole, env = optind.past_shells(prefix, argv, where[3]["OPTIND"], env)
    try:
        child = Owned(whole, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                      stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as e:
        return _failed(f"cannot run {argv[0]!r}: {e.strerror or e}")
    with child as proc:
        return _collect(proc, timeout, masks)


def _collect(proc: subprocess.Popen, timeout: float, masks) -> dict:  # noqa: ANN001
    kept, cut = bytearray(), [False]
    # a secret's value that starts within the first CAP bytes is kept whole, so that it is masked before the cut
    keep = CAP + (masks.longest if masks else 0)

    def read() -> None:  # keeps the first bytes and drains the rest, so the command never blocks on a pipe
        try:
            while chunk := proc.stdout.read1(65536):
                room = keep - len(kept)
                kept.extend(chunk[:max(room, 0)])
                cut[0] = cut[0] or len(chunk) > room
        except (OSError, ValueError):  # closed below, under a daemon that kept it open
            pass

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    error = None
    try:
        exit_code = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        exit_code, error = None, f"still running after {timeout:g}s: stopped"
    reader.join(5)
    proc.stdout.close()
    data = masks.apply(bytes(kept)) if masks else bytes(kept)
    if len(data) > CAP:
        data, cut[0] = data[:CAP], True
    output = data.decode(errors="replace") + ("\n… (cut)" if cut[0] else "")
    return {"exit_code": exit_code, "output": output, "error": error}
