"""The audit log: every change (submit, cancel, retry, queue, user, team, token) with who, when,
from where and what. Written after the change succeeded; never holds a token."""

from __future__ import annotations

from typing import Any

from trainyard.auth.permissions import Action, Caller
from trainyard.spec.identity import AuditRecord
from trainyard.store import Store


class AuditLog:
    def __init__(self, store: Store) -> None:
        self.store = store

    def record(self, caller: Caller, action: str, target: str | None = None, **detail: Any) -> None:
        self.store.add_audit(**self.entry(caller, action, **detail), target=target)

    @staticmethod
    def entry(caller: Caller, action: str, **detail: Any) -> dict[str, Any]:
        """An entry without its target, for a change that writes its own entry in its transaction
        (``Store.create_job``: the target is the id it makes)."""
        return {"user": caller.user, "source": caller.source, "action": action, "detail": detail or None}

    def read(self, caller: Caller, *, user: str | None, since: float | None, limit: int) -> list[AuditRecord]:
        """Everyone's entries for an admin; a user's own entries otherwise."""
        if not caller.may(Action.MANAGE_USERS, None):
            user = caller.user
        return self.store.audit(user=user, since=since, limit=limit)
