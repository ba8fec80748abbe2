"""Who may use a code snapshot: its uploaders (``snapshot_owners``, migration 0025) and who sees a job that ran it."""

from __future__ import annotations

import time

from sqlalchemy import exists, or_, select
from sqlalchemy.exc import IntegrityError

from trainyard.store import tables as t
from trainyard.store.store import Store

_O = t.SnapshotOwner.__table__
_J = t.Job.__table__


class SnapshotOwners:
    def __init__(self, store: Store) -> None:
        self.store = store

    def add(self, digest: str, user: str) -> None:
        """``user`` uploaded ``digest`` (again: nothing changes)."""
        if self.owns(digest, user):
            return
        try:
            with self.store.write() as s:
                s.connection().execute(_O.insert().values(digest=digest, user=user, created_at=time.time()))
        except IntegrityError:  # another request of the same user's, at the same moment
            pass

    def owns(self, digest: str, user: str) -> bool:
        with self.store.read() as s:
            return bool(s.scalar(select(exists().where(_O.c.digest == digest, _O.c.user == user))))

    def ran_for(self, digest: str, user: str, teams: list[str]) -> bool:
        """Whether a job that ran ``digest`` is ``user``'s or of one of ``teams`` (one the user sees)."""
        sees = or_(_J.c.owner == user, _J.c.team.in_(teams)) if teams else _J.c.owner == user
        with self.store.read() as s:
            return bool(s.scalar(select(exists().where(_J.c.snapshot == digest, sees))))
