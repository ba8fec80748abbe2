"""Small factories for end-to-end tests against a real server."""

from __future__ import annotations

import sys
from typing import Any

from tests.support.waiting import until

__all__ = ["PY", "py_job", "until"]

PY = sys.executable


def py_job(code: str, **spec: Any) -> dict[str, Any]:
    """A job spec that runs ``code`` with this interpreter."""
    return {"name": spec.pop("name", "t"), "command": [PY, "-c", code], **spec}


def stored_schedule(server, body: dict, next_at: float | None = None) -> None:  # noqa: ANN001
    """``body``'s schedule written into the server's database as one made before six fields were refused, due
    at ``next_at`` (default: its cron's next fire): the server's loop finds it within its LOOK."""
    import time

    from trainyard.spec.schedule import ScheduleSpec, next_fire
    from trainyard.spec.submitted import STORED
    from trainyard.store import Store
    from trainyard.store.schedules import ScheduleStore

    spec = ScheduleSpec.model_validate(body["spec"], context=STORED)
    store = Store(f"sqlite:///{server.home / 'trainyard.db'}", run_migrations=False)
    ScheduleStore(store).create(spec, None, "local", None, next_at or next_fire(spec.cron, spec.timezone, time.time()))
