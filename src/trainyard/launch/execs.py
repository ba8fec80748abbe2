"""A command run beside the replica's own when the server asks (``trainyard exec``): ``nvidia-smi``, ``ls
checkpoints``, ``df -h`` on the node, as the job sees it.

It runs where the command runs and as whom: in its work dir, with its environment (its secrets included,
and masked in what comes back, as in the logs), dropped to its account (``run_as``), or in its container
(``podman exec``/``docker exec``). No shell, no standard input; the first :data:`CAP` bytes of standard
output and error, interleaved as they came, go back; past its timeout its process group is killed. Standard
library only, imported when the first request comes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading

CAP = 250 * 1024  # bytes of output kept, under the server's 256 KiB an answer
# how a command runs beside the replica's: (what goes before it, in which folder, with which environment),
# set by the launcher once its command runs (a plain tuple: nothing of this module is imported before then)
Where = tuple[list[str], str, dict[str, str]]


def _masked(text: str, masks) -> str:  # noqa: ANN001  (launch.secrets.Masks)
    return masks.apply(text.encode()).decode(errors="replace") if masks and text else text


def run(argv: list[str], timeout: float, where: Where | None, masks=None) -> dict:  # noqa: ANN001
    """``{"exit_code", "output", "error"}`` of ``argv`` run beside the command (see the module's doc)."""
    if where is None:
        return {"exit_code": None, "output": "", "error": "the replica's command is not running here"}
    prefix, cwd, env = where
    try:
        proc = subprocess.Popen([*prefix, *argv], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as e:
        return {"exit_code": None, "output": "", "error": f"cannot run {argv[0]!r}: {e.strerror or e}"}
    kept, cut = bytearray(), [False]

    def read() -> None:  # keeps the first CAP bytes and drains the rest, so the command never blocks on a pipe
        try:
            while chunk := proc.stdout.read1(65536):
                room = CAP - len(kept)
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
    output = _masked(kept.decode(errors="replace") + ("\n… (cut)" if cut[0] else ""), masks)
    return {"exit_code": exit_code, "output": output, "error": error}
