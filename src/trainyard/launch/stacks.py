"""The command's Python stacks, dumped with py-spy when the server asks (``trainyard stack``).

py-spy reads a process's memory from outside (ptrace), so it needs no help from the job: it shows where
a hung NCCL call, a dead-locked data loader or a slow step is, in every thread, as ``ray stack`` does. Each
process of the command's tree is tried (the launcher is a subreaper: the tree is what the command started);
those that are not Python are named and passed over. Runs in a thread of its own, off the reporter's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from trainyard.launch.procs import Owned, descendants

MOST = 16             # processes dumped at most (a DDP replica with its data loader workers is a handful)
PER_PROCESS = 10.0    # seconds for one py-spy dump (a process with hundreds of threads takes ~1 s)
CAP = 250 * 1024      # characters of text, under the server's 256 KiB a dump
ERROR_CAP = 1900      # characters of the error, under the server's 2,000
_ENV = {**os.environ, "RUST_BACKTRACE": "0"}  # its reason without a Rust backtrace after it


def py_spy() -> str | None:
    """py-spy beside the launcher's Python (installed with trainyard), else on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return beside if os.access(beside, os.X_OK) else shutil.which("py-spy")


def _why(stderr: str) -> str:
    """py-spy's reason in one line (it prints a Rust backtrace after it)."""
    lines = [ln.strip() for ln in stderr.split("Stack backtrace:")[0].splitlines() if ln.strip()]
    said = next((ln[len("Error:"):].strip() for ln in lines if ln.startswith("Error:")), lines[0] if lines else "")
    causes = lines[lines.index("Caused by:") + 1:] if "Caused by:" in lines else []
    cause = causes[0].split(":", 1)[1].strip() if causes and ":" in causes[0] else ""
    return f"{said} ({cause})" if cause and cause not in said else said or "py-spy failed"


def _not_python(stderr: str) -> bool:
    return "Failed to find python version" in stderr


def dump(masks=None, with_locals: bool = False, native: bool = False) -> dict:  # noqa: ANN001  (secrets.Masks)
    """``{"text": ..., "error": ...}`` for the command's processes now, with each frame's local variables
    and C/C++ frames if asked; ``masks`` hides the job's secrets."""
    exe = py_spy()
    if exe is None:
        return {"text": "", "error": "py-spy is not installed where this replica runs (pip install py-spy)"}
    texts, problems, others = [], [], []
    flags = [*(["--locals"] if with_locals else []), *(["--native"] if native else [])]
    for p in descendants()[:MOST]:
        try:
            name = p.name()
        except Exception:  # gone meanwhile
            continue
        with Owned([exe, "dump", "--pid", str(p.pid), *flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                   text=True, errors="replace", stdin=subprocess.DEVNULL, env=_ENV) as spy:
            try:
                out, err = spy.communicate(timeout=PER_PROCESS)
            except subprocess.TimeoutExpired:
                spy.kill()
                spy.communicate()
                problems.append(f"pid {p.pid} ({name}): py-spy took over {PER_PROCESS:.0f} s")
                continue
        if spy.returncode == 0:
            texts.append(out.rstrip())
        elif _not_python(err):
            others.append(f"{p.pid} ({name})")
        else:
            problems.append(f"pid {p.pid} ({name}): {_why(err)}")
    text = "\n\n".join(texts)
    if others and texts:
        text += "\n\nnot Python: " + ", ".join(others)
    error = "; ".join(problems) or (None if texts else
                                     "no Python process in the command's tree" +
                                     (f" (only {', '.join(others)})" if others else ""))
    if masks:
        text, error = masks.truncated(text), masks.text(error) if error else None
    if len(text) > CAP:
        text = text[:CAP] + "\n… (cut)"
    return {"text": text, "error": error[:ERROR_CAP] if error else None}
