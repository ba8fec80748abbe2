"""Secrets as rows: (team, name) → the sealed value. Nothing here sees a value in the clear."""

from __future__ import annotations

import time
from typing import NamedTuple

from sqlalchemy import delete, insert, select, update

from trainyard.spec.secrets import SecretInfo
from trainyard.status import AttemptStatus
from trainyard.store import Store
from trainyard.store import identity_tables as it
from trainyard.store import tables as t

_S, _A, _J, _D = it.Secret.__table__, t.Attempt.__table__, t.Job.__table__, t.DaskCluster.__table__
_R = t.ServiceReplicaRow.__table__
_INFO = (_S.c.team, _S.c.name, _S.c.length, _S.c.created_at, _S.c.updated_at, _S.c.updated_by)


def scope(team: str | None) -> str:
    """The row key of a team's secrets; "" for those of no team."""
    return team or ""


class Grant(NamedTuple):
    """What an attempt's launcher may read: its credential's hash, whether it still runs, and its job's wants."""

    token_hash: str | None
    live: bool
    job_id: str
    owner: str | None
    team: str | None
    wanted: dict[str, str]  # environment variable -> secret name, from the job's spec


class SecretStore:
    def __init__(self, store: Store) -> None:
        self.store = store

    def put(self, team: str | None, name: str, sealed: str, length: int, by: str | None) -> bool:
        """Create or replace; True if it was created."""
        now = time.time()
        key = (_S.c.team == scope(team)) & (_S.c.name == name)
        with self.store.write() as s:
            c = s.connection()
            values = dict(sealed=sealed, length=length, updated_at=now, updated_by=by)
            if c.execute(update(_S).where(key).values(**values)).rowcount:
                return False
            c.execute(insert(_S), [dict(team=scope(team), name=name, created_at=now, **values)])
            return True

    def delete(self, team: str | None, name: str) -> bool:
        with self.store.write() as s:
            stmt = delete(_S).where(_S.c.team == scope(team), _S.c.name == name)
            return s.connection().execute(stmt).rowcount == 1

    def infos(self, teams: list[str | None] | None = None) -> list[SecretInfo]:
        """Every secret of ``teams`` (None: of all teams), by team and name."""
        q = select(*_INFO).order_by(_S.c.team, _S.c.name)
        if teams is not None:
            q = q.where(_S.c.team.in_([scope(x) for x in teams]))
        with self.store.read() as s:
            rows = s.connection().execute(q).mappings().all()
        return [SecretInfo(**{**r, "team": r["team"] or None}) for r in rows]

    def names(self, team: str | None) -> set[str]:
        with self.store.read() as s:
            return set(s.connection().execute(select(_S.c.name).where(_S.c.team == scope(team))).scalars())

    def sealed(self, team: str | None, names: list[str]) -> dict[str, str]:
        """name -> sealed value, for those of ``names`` that exist."""
        q = select(_S.c.name, _S.c.sealed).where(_S.c.team == scope(team), _S.c.name.in_(names))
        with self.store.read() as s:
            return {name: sealed for name, sealed in s.connection().execute(q)}

    def reseal_all(self, reseal) -> int:  # noqa: ANN001  (sealed, what -> sealed)
        """Every stored value through ``reseal``, in one transaction; how many changed."""
        changed = 0
        with self.store.write() as s:
            c = s.connection()
            for team, name, sealed in c.execute(select(_S.c.team, _S.c.name, _S.c.sealed)).all():
                new = reseal(sealed, f"secret {name} of {team or 'no team'}")
                if new != sealed:
                    c.execute(update(_S).where(_S.c.team == team, _S.c.name == name).values(sealed=new))
                    changed += 1
            # a Dask cluster's TLS identity is sealed with the same key: once an old key is dropped, a live cluster
            # would start no worker and its server could not reach it
            for cluster_id, sealed in c.execute(select(_D.c.id, _D.c.tls).where(_D.c.tls.is_not(None))).all():
                new = reseal(sealed, f"the TLS identity of Dask cluster {cluster_id}")
                if new != sealed:
                    c.execute(update(_D).where(_D.c.id == cluster_id).values(tls=new))
                    changed += 1
            # so is each service replica's token: the proxy would send none, and the replica refuse every request
            for job_id, sealed in c.execute(select(_R.c.job_id, _R.c.token).where(_R.c.token.is_not(None))).all():
                new = reseal(sealed, f"the token of service replica {job_id}")
                if new != sealed:
                    c.execute(update(_R).where(_R.c.job_id == job_id).values(token=new))
                    changed += 1
        return changed

    def grant(self, attempt_id: str) -> Grant | None:
        q = (select(_A.c.token_hash, _A.c.status, _J.c.id, _J.c.owner, _J.c.team, _J.c.spec)
             .join(_J, _J.c.id == _A.c.job_id).where(_A.c.id == attempt_id))
        with self.store.read() as s:
            row = s.connection().execute(q).first()
        if row is None:
            return None
        live = not AttemptStatus(row.status).is_terminal()
        return Grant(row.token_hash, live, row.id, row.owner, row.team, dict((row.spec or {}).get("secrets") or {}))
