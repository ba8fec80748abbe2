"""What running replicas' launchers are asked to do on their nodes (dump stacks, run a command), and their answers,
as rows: a launcher reporting to any server of the database hears of them."""

from __future__ import annotations

import time
from typing import Iterable, NamedTuple

from sqlalchemy import delete, insert, select, update

from trainyard.spec.execs import MAX_EXEC_TIMEOUT, ExecResult
from trainyard.spec.reports import ExecAnswer, ExecAsk, StackAnswer, StackAsk
from trainyard.spec.stacks import StackDump
from trainyard.store import Store
from trainyard.store import request_tables as rq

_R = rq.ReplicaRequest.__table__
EXPIRE = 60.0  # seconds past its own time a request waits for its launcher (a report comes at least every 3 s)
KEEP = 20      # the newest requests of each kind kept per job (each answer up to 256 KiB)


def _expired(row, now: float) -> bool:  # noqa: ANN001  (a row mapping)
    return row["answered_at"] is None and now - row["requested_at"] > EXPIRE + (row["timeout"] or 0.0)


def _status(row, now: float) -> str:  # noqa: ANN001
    if row["answered_at"] is None:
        return "expired" if _expired(row, now) else "pending"
    if row["kind"] == "exec":
        return "failed" if row["exit_code"] is None else "done"
    return "failed" if row["error"] and not row["text"] else "done"


def stack_dump(row, now: float) -> StackDump:  # noqa: ANN001
    return StackDump(id=row["id"], job_id=row["job_id"], attempt_id=row["attempt_id"], replica=row["replica"],
                     node=row["node"], status=_status(row, now), requested_at=row["requested_at"],
                     requested_by=row["requested_by"], locals=row["locals"], native=row["native"],
                     answered_at=row["answered_at"], text=row["text"] or "", error=row["error"])


def exec_result(row, now: float) -> ExecResult:  # noqa: ANN001
    return ExecResult(id=row["id"], job_id=row["job_id"], attempt_id=row["attempt_id"], replica=row["replica"],
                      node=row["node"], status=_status(row, now), argv=row["argv"], timeout=row["timeout"],
                      requested_at=row["requested_at"], requested_by=row["requested_by"],
                      answered_at=row["answered_at"], exit_code=row["exit_code"], output=row["text"] or "",
                      error=row["error"])


class Pending(NamedTuple):
    """A replica's unanswered requests, as its report's answer carries them."""

    stacks: list[StackAsk]
    execs: list[ExecAsk]


class RequestRows:
    def __init__(self, store: Store) -> None:
        self.store = store

    def request_stacks(self, job_id: str, attempt_id: str, replicas: Iterable[tuple[int, str | None]],
                       by: str | None, with_locals: bool = False, native: bool = False) -> list[StackDump]:
        """A request for each ``(replica, node)``, or the same one still pending (two people asking at once, or
        a hand on the button, make one dump); the job's older dumps past the newest :data:`KEEP` go."""
        now = time.time()
        rows = [dict(job_id=job_id, attempt_id=attempt_id, replica=r, node=node, kind="stack", requested_at=now,
                     requested_by=by, locals=with_locals, native=native) for r, node in replicas]
        out = []
        with self.store.write() as s:
            conn = s.connection()
            waiting = {r["replica"]: r for r in conn.execute(select(_R).where(
                _R.c.attempt_id == attempt_id, _R.c.kind == "stack", _R.c.answered_at.is_(None),
                _R.c.requested_at > now - EXPIRE, _R.c.locals == with_locals, _R.c.native == native)).mappings()}
            for row in rows:
                if (same := waiting.get(row["replica"])) is not None:
                    out.append(stack_dump(same, now))
                    continue
                out.append(stack_dump(self._insert(conn, row), now))
            self._keep(conn, job_id, "stack")
        return out

    def request_exec(self, job_id: str, attempt_id: str, replica: int, node: str | None, argv: list[str],
                     timeout: float, by: str | None) -> ExecResult:
        now = time.time()
        row = dict(job_id=job_id, attempt_id=attempt_id, replica=replica, node=node, kind="exec", requested_at=now,
                   requested_by=by, locals=False, native=False, argv=argv, timeout=timeout)
        with self.store.write() as s:
            conn = s.connection()
            made = self._insert(conn, row)
            self._keep(conn, job_id, "exec")
        return exec_result(made, now)

    @staticmethod
    def _insert(conn, row: dict) -> dict:  # noqa: ANN001
        i = conn.execute(insert(_R).values(**row)).inserted_primary_key[0]
        return {"argv": None, "timeout": None, **row, "id": i, "answered_at": None, "text": None, "error": None,
                "exit_code": None}

    @staticmethod
    def _keep(conn, job_id: str, kind: str) -> None:  # noqa: ANN001
        mine = (_R.c.job_id == job_id) & (_R.c.kind == kind)
        kept = select(_R.c.id).where(mine).order_by(_R.c.id.desc()).limit(KEEP)
        conn.execute(delete(_R).where(mine, _R.c.id.not_in(kept.scalar_subquery())))

    def pending(self) -> dict[tuple[str, int], Pending]:
        """Unanswered requests that have not expired: (attempt id, replica) → what each asks."""
        out: dict[tuple[str, int], Pending] = {}
        now = time.time()
        with self.store.read() as s:
            rows = s.connection().execute(select(_R.c.id, _R.c.attempt_id, _R.c.replica, _R.c.kind, _R.c.locals,
                                                 _R.c.native, _R.c.argv, _R.c.timeout, _R.c.answered_at,
                                                 _R.c.requested_at).where(
                _R.c.answered_at.is_(None), _R.c.requested_at > now - EXPIRE - MAX_EXEC_TIMEOUT)).mappings()
            for r in rows:
                if _expired(r, now):
                    continue
                got = out.setdefault((r["attempt_id"], r["replica"]), Pending([], []))
                if r["kind"] == "exec":
                    got.execs.append(ExecAsk(id=r["id"], argv=r["argv"], timeout=r["timeout"]))
                else:
                    got.stacks.append(StackAsk(id=r["id"], locals=r["locals"], native=r["native"]))
        return out

    def answer(self, attempt_id: str, replica: int, answers: list[StackAnswer | ExecAnswer]) -> int:
        """Record a launcher's answers; only to requests of its own attempt and replica, of the answer's kind,
        and once. How many."""
        now, n = time.time(), 0
        with self.store.write() as s:
            conn = s.connection()
            for a in answers:
                values = dict(answered_at=now, error=a.error)
                if isinstance(a, ExecAnswer):
                    values.update(text=a.output, exit_code=a.exit_code)
                else:
                    values.update(text=a.text)
                n += conn.execute(update(_R).where(
                    _R.c.id == a.id, _R.c.attempt_id == attempt_id, _R.c.replica == replica,
                    _R.c.kind == ("exec" if isinstance(a, ExecAnswer) else "stack"), _R.c.answered_at.is_(None))
                    .values(**values)).rowcount
        return n

    def stacks_of(self, job_id: str) -> list[StackDump]:
        """The job's kept dumps, newest first."""
        with self.store.read() as s:
            rows = s.connection().execute(select(_R).where(_R.c.job_id == job_id, _R.c.kind == "stack")
                                          .order_by(_R.c.id.desc())).mappings().all()
        now = time.time()
        return [stack_dump(r, now) for r in rows]

    def exec_of(self, job_id: str, exec_id: int) -> ExecResult | None:
        with self.store.read() as s:
            row = s.connection().execute(select(_R).where(_R.c.id == exec_id, _R.c.job_id == job_id,
                                                          _R.c.kind == "exec")).mappings().first()
        return None if row is None else exec_result(row, time.time())
