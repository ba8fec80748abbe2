"""Shell completion of job ids: the newest jobs of the server already running (never starts one)."""

from __future__ import annotations


def job_ids(incomplete: str) -> list[tuple[str, str]]:
    """``(id, "name status")`` of recent jobs whose id starts with ``incomplete``; nothing when no server answers."""
    from trainyard.errors import TrainyardError
    from trainyard.sdk.client import Client
    from trainyard.sdk.discovery import resolve_server

    try:
        with Client(resolve_server(None, autostart=False), timeout=3) as c:
            jobs = c.jobs(limit=200).items
    except (TrainyardError, OSError):
        return []
    return [(j.id, f"{j.name} {j.status.value}") for j in jobs if j.id.startswith(incomplete)]
