"""How a job ended, as a line: shared by the quick ``run --wait`` path (:mod:`trainyard.cli.entry`, which
imports nothing heavy) and the full CLI (:mod:`trainyard.cli.jobs`); standard library only."""

from __future__ import annotations

from typing import Any


def ending(job: dict[str, Any]) -> tuple[str, str, str]:
    """How a job ended, in three parts (the status between, for the full CLI to colour).

    Each thing is said once: the job's reason where it adds to the status (``failed: Error(exit 1) after
    2 attempts``), and the last attempt's where the job's does not already say it."""
    status = job["status"]
    reason = job.get("reason") or ""
    if reason.lower() == status.lower():
        reason = ""
    last = job["attempts"][-1] if job.get("attempts") else None
    attempt = ""
    if last:
        why = last.get("reason") or ""
        told = not why or why.lower() == status.lower() or why in reason
        attempt = f" (attempt {last['number']})" if told else f" (attempt {last['number']}: {why})"
    return f"{job['id']} ", status, (f": {reason}" if reason else "") + attempt
