"""Helpers for code running inside a trainyard job. Standard library only.

The launcher sets the ``TRAINYARD_*`` variables; outside trainyard these
helpers fall back to local folders so the same script runs by hand.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from trainyard import envvars


def params() -> dict[str, Any]:
    """The job's params (``TRAINYARD_PARAMS``), or ``{}`` outside trainyard."""
    return json.loads(os.environ.get(envvars.PARAMS) or "{}")


def _dir(var: str, fallback: str) -> Path:
    path = Path(os.environ.get(var) or fallback)
    path.mkdir(parents=True, exist_ok=True)
    return path


def output_dir() -> Path:
    """Where to write outputs; uploaded when the attempt ends."""
    return _dir(envvars.OUTPUT_DIR, "outputs")


def checkpoint_dir() -> Path:
    """Kept across attempts of one job: save here, and resume from here."""
    return _dir(envvars.CHECKPOINT_DIR, "checkpoints")


def checkpoint_saved(wait: bool = False) -> bool:
    """Say that the checkpoint dir now holds a complete checkpoint (every file written aside and
    renamed into place), so trainyard uploads it as one set to the object store.

    Returns once the files are captured (hard links: the job may go on writing at once), or with
    ``wait`` once the set is in the store. ``False`` when there is nothing to do: no object store is
    configured (the checkpoint dir is a folder on the node that persists between attempts as it is),
    this is not replica 0 (the master's set is the job's), or the script runs outside trainyard.
    Raises ``RuntimeError`` naming the object when the set cannot be captured or (``wait``) uploaded.
    See docs/CHECKPOINTS.md.
    """
    import socket

    path = os.environ.get(envvars.CHECKPOINT_SOCKET)
    if not path:
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(path)
        s.sendall(b"wait\n" if wait else b"saved\n")
        reply = s.makefile("rb").readline().decode(errors="replace").strip()
    if reply != "ok":
        raise RuntimeError(f"checkpoint not saved: {reply.removeprefix('error: ') or 'the launcher did not answer'}")
    return True


def log_metrics(step: int | None = None, **values: float) -> None:
    """Record metric values (numbers) for a step; the launcher forwards them.

    Each call appends one JSON line to the metrics file, so a crash loses at
    most the line being written and the launcher can resend by byte offset.
    The line is the whole protocol (``{"step", "ts", "values"}``, see the README's
    "Inside a job"): a job without trainyard can append it to ``$TRAINYARD_METRICS_FILE`` itself.
    """
    bad = [k for k, v in values.items() if isinstance(v, bool) or not isinstance(v, (int, float))]
    if bad:
        raise TypeError(f"log_metrics: values must be numbers; not {', '.join(bad)}")
    line = json.dumps({"step": step, "ts": time.time(), "values": values}) + "\n"
    path = os.environ.get(envvars.METRICS_FILE)
    if path is None:
        print(f"[metrics] step={step} " + " ".join(f"{k}={v}" for k, v in values.items()), flush=True)
        return
    with open(path, "a", encoding="utf-8") as f:
        f.write(line)
