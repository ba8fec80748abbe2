"""How a job ended, as a line: shared by the quick ``run --wait`` path (:mod:`trainyard.cli.entry`, which
imports nothing heavy) and the full CLI (:mod:`trainyard.cli.jobs`); standard library only."""

from __future__ import annotations

from typing import Any


def ending(job: dict[str, Any]) -> tuple[str, str, str]:
    """How a job ended, in three parts (the status between, for the full CLI to colour)."""
    last = job["attempts"][-1] if job.get("attempts") else None
    reason = f" {job.get('reason') or ''}".rstrip()
    attempt = f" (attempt {last['number']}, {last.get('reason')})" if last else ""
    return f"{job['id']} ", job["status"], reason + attempt
