"""Logs, metrics and artifacts of attempts.

The launcher resends by byte offset after any failure, so every append here
is idempotent: bytes (or metric lines) before what was already received are
dropped, and the received size moves with a compare-and-set.
"""

from __future__ import annotations

import hmac
import json
import logging
import math
import time
from typing import Any, NamedTuple

from sqlalchemy import bindparam, delete, func, select, update

from trainyard.artifact_paths import is_artifact_path, output_record_problem
from trainyard.config import LOG_KEEP, METRICS_KEEP
from trainyard.errors import AttemptEnded, AttemptNotFound, AttemptUnauthorized
from trainyard.spec.records import ArtifactInfo, AttemptInfo, LogChunk, MetricPoint
from trainyard.spec.nul import printable
from trainyard.spec.units import format_memory
from trainyard.status import AttemptStatus, JobStatus
from trainyard.store import log_bound, tables as t
from trainyard.store.log_tail import last_lines
from trainyard.store.metric_series import Point, dropped_note, store_points

logger = logging.getLogger("trainyard.store")


class Outputs(NamedTuple):
    """Files a replica uploaded: ``items`` ({"path", "size", "digest"}) relative to ``base_url``,
    listed under ``prefix`` (``replica-N/`` for replicas other than 0)."""

    base_url: str
    items: list[dict[str, Any]]
    prefix: str = ""


class AttemptRow(NamedTuple):
    id: str
    job_id: str
    number: int
    token_hash: str | None
    status: str
    stop_reason: str | None


class ReplicaRow(NamedTuple):
    attempt_id: str
    index: int
    status: str
    log_size: int
    metrics_offset: int


_A, _R = t.Attempt.__table__.c, t.Replica.__table__.c
_REPLICA_ROW = (select(_A.id, _A.job_id, _A.number, _A.token_hash, _A.status, _A.stop_reason,
                       _R.attempt_id, _R.index, _R.status, _R.log_size, _R.metrics_offset)
                .join_from(t.Replica.__table__, t.Attempt.__table__, _R.attempt_id == _A.id)
                .where(_R.attempt_id == bindparam("k_attempt_id"), _R.index == bindparam("k_index")))
# a received size moves only from the size it was read at: a compare-and-set, checked on its row count
_MOVED = {col: update(t.Replica.__table__).where(_R.attempt_id == bindparam("k_attempt_id"),
                                                 _R.index == bindparam("k_index"), _R[col] == bindparam("k_have"))
          .values({col: bindparam("v_new")}) for col in ("log_size", "metrics_offset")}
_CONTACT = update(t.Replica.__table__).where(_R.attempt_id == bindparam("k_attempt_id"),
                                             _R.index == bindparam("k_index")).values(last_contact_at=bindparam("v_at"))


PAGE_BYTES = 4 << 20  # characters of log one read returns at most (and one chunk more): 1,000 chunks of a chatty
# job's 1 MiB reports were a page of 1 GiB in the server's memory, per reader


def log_note(keep: int) -> str:
    """The line a log past ``keep`` bytes shows where the server began to drop its middle."""
    half = format_memory(keep // 2)
    return (f"\n[trainyard: this log passed {format_memory(keep)}; the server keeps its first {half} and its last "
            f"{half}, and drops what lies between (the whole of it is output.log in the attempt's folder on its "
            "node)]\n")


def _log_rows(job_id: str, attempt: int | None, replica: int | None):  # noqa: ANN202
    """(cursor, attempt, replica, offset, text) of a job's log chunks, of one attempt or replica if named."""
    c = t.LogChunk.__table__.c
    q = select(c.id, c.attempt, c.replica, c.offset, c.data).where(c.job_id == job_id)
    if attempt is not None:
        q = q.where(c.attempt == attempt)
    return q if replica is None else q.where(c.replica == replica)


class TelemetryMixin:
    log_keep: int = LOG_KEEP  # ServerSettings.log_keep: its first and its last half are kept; 0: every byte
    metrics_keep: int = METRICS_KEEP  # ServerSettings.metrics_keep: points of each series (metric_series); 0: all

    def _replica_row(self, s, attempt_id: str, replica: int) -> tuple[AttemptRow, ReplicaRow]:  # noqa: ANN001
        """The attempt's and the replica's columns a report needs, in one prebuilt query (two ORM
        ``get``s cost a report more CPU than its SQL)."""
        row = s.connection().execute(_REPLICA_ROW, {"k_attempt_id": attempt_id, "k_index": replica}).first()
        if row is None:
            raise AttemptNotFound(f"no such replica: {attempt_id}/{replica}", attempt_id=attempt_id)
        return AttemptRow(*row[:6]), ReplicaRow(*row[6:])

    def _moved(self, s, rep: ReplicaRow, column: str, have: int, new: int) -> bool:  # noqa: ANN001
        params = {"k_attempt_id": rep.attempt_id, "k_index": rep.index, "k_have": have, "v_new": new}
        return s.connection().execute(_MOVED[column], params).rowcount == 1  # Core, like Store._cas

    def report(
        self, attempt_id: str, replica: int, *, token_hash: str | None, running: bool,
        log: tuple[int, str] | None = None, metrics: tuple[int, list[str]] | None = None,
        end: dict[str, Any] | None = None,
    ) -> tuple[str, str | None, tuple[AttemptInfo, bool] | None]:
        """One launcher report in one transaction: contact (its first moves replica, attempt
        and job to running), log bytes, metric lines, and with ``end`` (the keyword arguments
        of ``finish_replica``) the replica's end. Returns ``(job id, stop reason, what
        finish_replica returns)``.

        Checked first, on the rows read anyway: ``token_hash`` (of the credential the
        launcher sent) must be the attempt's (else :class:`AttemptUnauthorized`), and
        the attempt and replica must not have ended (else :class:`AttemptEnded`).
        Either way nothing is changed."""
        now = time.time()
        with self.write() as s:  # type: ignore[attr-defined]
            attempt, rep = self._replica_row(s, attempt_id, replica)
            # an attempt admitted before credentials existed has no hash: refused, like a wrong token
            if not (attempt.token_hash and token_hash and hmac.compare_digest(attempt.token_hash, token_hash)):
                raise AttemptUnauthorized(attempt_id=attempt_id)
            if AttemptStatus(attempt.status).is_terminal() or AttemptStatus(rep.status).is_terminal():
                raise AttemptEnded(f"attempt {attempt_id} replica {replica} has ended", attempt_id=attempt_id)
            first = running and rep.status == AttemptStatus.STARTING.value
            # a first report that is also the last (a command that ended at once) starts the replica
            # in finish_replica's own update, below
            if first and not end:
                self._cas(s, t.Replica, (attempt_id, replica), AttemptStatus.RUNNING,  # type: ignore[attr-defined]
                          started_at=now, last_contact_at=now)
                if self._cas(s, t.Attempt, attempt_id, AttemptStatus.RUNNING,  # type: ignore[attr-defined]
                             started_at=now, last_contact_at=now):
                    # a reason it had while starting (its engine had not placed it) is over
                    self._cas(s, t.Job, attempt.job_id, JobStatus.RUNNING, reason=None)  # type: ignore[attr-defined]
            elif not first:
                s.connection().execute(_CONTACT, {"k_attempt_id": attempt_id, "k_index": replica, "v_at": now})
            if log:
                self._append_log(s, attempt, rep, *log)
            if metrics:
                self._add_metrics(s, attempt, rep, *metrics)
            job_id, stop_reason = attempt.job_id, attempt.stop_reason
            ended = (self._finish_replica(s, attempt_id, replica, **end,  # type: ignore[attr-defined]
                                          started_at=now if first else None) if end else None)
            return job_id, stop_reason, ended

    def append_log(self, attempt_id: str, replica: int, offset: int, data: str) -> int:
        """Store ``data`` (bytes ``offset…`` of the replica's log); returns the new size."""
        with self.write() as s:  # type: ignore[attr-defined]
            return self._append_log(s, *self._replica_row(s, attempt_id, replica), offset, data)

    def _append_log(self, s, attempt: AttemptRow, rep: ReplicaRow, offset: int, data: str) -> int:  # noqa: ANN001
        raw = data.encode("utf-8")
        have, end = rep.log_size, offset + len(raw)
        if end <= have:
            return have
        if not self._moved(s, rep, "log_size", have, end):
            return have
        start, new = max(offset, have), raw[max(0, have - offset):]
        keep = self.log_keep
        if keep and end > keep:
            return self._bounded_log(s, attempt, rep, have, start, new, keep)
        if keep and start < keep // 2 < end:
            # the head ends in a chunk of its own: split later, at the first cut, the part past the head would be
            # written again after the note, to followers that had it (log_bound.head_edge)
            at = log_bound.head_edge(new, keep // 2 - start)
            self._log_chunk(s, attempt, rep, start, new[:at])
            start, new = start + at, new[at:]
        self._log_chunk(s, attempt, rep, start, new)
        return end

    def _bounded_log(self, s, attempt: AttemptRow, rep: ReplicaRow, have: int, start: int, new: bytes,  # noqa: ANN001
                     keep: int) -> int:
        """Bytes ``start…`` of a log that passes ``keep``: its first half stays, then a note (written once, when the
        log first passes), then at most its last half, older chunks dropped as the end moves on (see
        :mod:`trainyard.store.log_bound`). A job that prints without end would otherwise fill the database
        through the server, for everyone."""
        half, end = keep // 2, start + len(new)
        if start < half:  # the rest of the head
            self._log_chunk(s, attempt, rep, start, log_bound.text(new[:half - start]).encode())
            new, start = new[half - start:], half
        if log_bound.crosses(have, end, keep):
            c = t.LogChunk
            tail = log_bound.tail_start(end, keep)
            cut = log_bound.cut_log(s, (c.job_id == attempt.job_id, c.attempt_id == attempt.id,
                                        c.replica == rep.index), have <= keep, tail, keep,
                                    lambda offset, raw: self._log_chunk(s, attempt, rep, offset, raw),
                                    log_note(keep).encode(), (start, new))
            # a report larger than the kept end, or its first part before the cut; or one that starts the kept end
            if start < tail or (start == tail and cut.lead):
                new, start = log_bound.text(cut.lead + new[tail - start:]).encode(), tail - len(cut.lead)
            if cut.gone is not None:
                self._log_chunk(s, attempt, rep, start, new)
                s.flush()  # its id first (log_bound.Cut)
                s.execute(delete(t.LogChunk).where(t.LogChunk.id == cut.gone))
                return end
        self._log_chunk(s, attempt, rep, start, new)
        return end

    @staticmethod
    def _log_chunk(s, attempt: AttemptRow, rep: ReplicaRow, offset: int, raw: bytes) -> None:  # noqa: ANN001
        if raw:
            s.add(t.LogChunk(job_id=attempt.job_id, attempt_id=attempt.id, attempt=attempt.number, replica=rep.index,
                             offset=offset, data=printable(raw.decode("utf-8", errors="replace"))))

    def read_logs(
        self, job_id: str, *, after: int = 0, attempt: int | None = None, replica: int | None = None,
        limit: int = 1000, max_bytes: int = PAGE_BYTES,
    ) -> tuple[list[LogChunk], int]:
        """Chunks after cursor ``after``, oldest first, and the cursor to pass next."""
        rows = self.read_log_cursors(job_id, after=after, attempt=attempt, replica=replica, limit=limit,
                                     max_bytes=max_bytes)
        return [c for _, c in rows], (rows[-1][0] if rows else after)

    def read_log_cursors(
        self, job_id: str, *, after: int = 0, attempt: int | None = None, replica: int | None = None,
        limit: int = 1000, max_bytes: int = PAGE_BYTES,
    ) -> list[tuple[int, LogChunk]]:
        """At most ``limit`` chunks after cursor ``after``, oldest first, ending with the one that passes
        ``max_bytes`` of text, each with its own cursor: a stream that breaks mid-page resumes after the last
        chunk the client got, not after the page."""
        c = t.LogChunk.__table__.c
        q = _log_rows(job_id, attempt, replica).where(c.id > after)
        out, size = [], 0
        with self.read() as s:  # type: ignore[attr-defined]
            # streamed a few rows at a time (a server-side cursor on PostgreSQL): a page of a log of 1 MiB
            # reports stops at its bound without the rest of its thousand chunks read into memory
            for id_, attempt_no, replica_no, offset, data in s.execute(q.order_by(c.id).limit(limit),
                                                                       execution_options={"yield_per": 4}):
                out.append((id_, LogChunk(attempt=attempt_no, replica=replica_no, offset=offset, data=data)))
                size += len(data)
                if size >= max_bytes:
                    break
        return out

    def log_kept_from(self, job_id: str) -> dict[tuple[int, int], int]:
        """Where the kept end starts of each of the job's replica logs past the bound, by (attempt number,
        replica): the bytes from ``log_keep // 2`` up to there are gone."""
        keep = self.log_keep
        if not keep:
            return {}
        q = (select(_A.number, _R.index, _R.log_size).join_from(t.Replica.__table__, t.Attempt.__table__,
                                                               _R.attempt_id == _A.id)
             .where(_A.job_id == job_id, _R.log_size > keep))
        with self.read() as s:  # type: ignore[attr-defined]
            return {(number, index): log_bound.kept_from(size, keep) for number, index, size in s.execute(q)}

    def read_log_tail(self, job_id: str, lines: int, *, attempt: int | None = None,
                      replica: int | None = None) -> tuple[list[LogChunk], int]:
        """The chunks that hold the last ``lines`` lines, oldest first, and the cursor to follow from
        (:func:`trainyard.store.log_tail.last_lines`)."""
        q = _log_rows(job_id, attempt, replica).order_by(t.LogChunk.__table__.c.id.desc())
        with self.read() as s:  # type: ignore[attr-defined]
            rows = s.execute(q, execution_options={"yield_per": 4})
            return last_lines(((id_, LogChunk(attempt=a, replica=r, offset=o, data=d)) for id_, a, r, o, d in rows),
                              lines)

    def add_metrics(self, attempt_id: str, replica: int, offset: int, lines: list[str]) -> int:
        """Store metric lines (JSON from the in-job SDK) starting at byte ``offset``."""
        with self.write() as s:  # type: ignore[attr-defined]
            return self._add_metrics(s, *self._replica_row(s, attempt_id, replica), offset, lines)

    def _add_metrics(self, s, attempt: AttemptRow, rep: ReplicaRow, offset: int, lines: list[str]) -> int:  # noqa: ANN001
        have, pos, points = rep.metrics_offset, offset, []
        for line in lines:
            end = pos + len(line.encode("utf-8")) + 1
            if pos >= have:
                points.extend(_points(line))
            pos = end
        if pos <= have:
            return have
        if self._moved(s, rep, "metrics_offset", have, pos):
            self._record_usage(s, attempt, rep.index, points)  # type: ignore[attr-defined]
            if points and store_points(s, attempt.job_id, attempt.id, attempt.number, rep.index, points,
                                       self.metrics_keep):
                self._log_chunk(s, attempt, rep, -1, dropped_note().encode())
        return pos

    def metrics(self, job_id: str, system: bool = False, name: str | None = None) -> list[MetricPoint]:
        """What the job logged; with ``system``, also the launcher's ``system/…`` resource samples; with
        ``name``, that metric's points only."""
        with self.read() as s:  # type: ignore[attr-defined]
            q = select(t.Metric).where(t.Metric.job_id == job_id).order_by(t.Metric.id)
            if name is not None:
                q = q.where(t.Metric.name == name)
            elif not system:
                q = q.where(t.Metric.name.not_like("system/%"))
            return [MetricPoint(attempt=m.attempt, replica=m.replica, step=m.step, name=m.name, value=m.value, ts=m.ts)
                    for m in s.scalars(q)]

    def add_artifacts(self, job_id: str, attempt: int, outputs: Outputs) -> None:
        """Record uploaded outputs; repeats are ignored (see :meth:`_add_artifacts`)."""
        with self.write() as s:  # type: ignore[attr-defined]
            self._add_artifacts(s, job_id, attempt, outputs)

    def _add_artifacts(self, s, job_id: str, attempt: int, outputs: Outputs) -> None:  # noqa: ANN001
        """Record outputs whose records are sound and paths safe (see :mod:`trainyard.artifact_paths`).
        The service refuses a report with any other, so one here came from a result file: left out."""
        items = []
        for i in outputs.items:
            if output_record_problem(i) is None and is_artifact_path(outputs.prefix + i["path"]):
                items.append(i)
            else:
                logger.warning("job %s attempt %d: output %r left out: not a safe relative path with a size "
                               "and digest", job_id, attempt, i)
        have = set(s.scalars(select(t.Artifact.path).where(t.Artifact.job_id == job_id,
                                                           t.Artifact.attempt == attempt)))
        base = outputs.base_url.rstrip("/")
        s.add_all(t.Artifact(job_id=job_id, attempt=attempt, path=outputs.prefix + i["path"], size=int(i["size"]),
                             digest=str(i["digest"]), url=f"{base}/{i['path']}")
                  for i in items if outputs.prefix + i["path"] not in have)

    def artifacts(self, job_id: str, attempt: int | None = None) -> list[tuple[ArtifactInfo, str]]:
        """Outputs of attempt number ``attempt`` with their URLs; by default of the attempt :meth:`outputs_of` picks."""
        return self.outputs_of(job_id, attempt)[1]

    def outputs_of(self, job_id: str, attempt: int | None = None) -> tuple[int | None, list[tuple[ArtifactInfo, str]]]:
        """``(the attempt shown, its outputs with their URLs)``: attempt number ``attempt``'s, or by default the
        job's newest ended attempt's (its succeeded one once it succeeded; None while no attempt has ended).
        Not the newest that uploaded any: a retry that succeeds without writing outputs would show the
        failed attempt's as the job's result."""
        with self.read() as s:  # type: ignore[attr-defined]
            if attempt is None:
                ended = [st.value for st in AttemptStatus if st.is_terminal()]
                attempt = s.scalar(select(func.max(t.Attempt.number)).where(t.Attempt.job_id == job_id,
                                                                             t.Attempt.status.in_(ended)))
                if attempt is None:
                    return None, []
            q = (select(t.Artifact).where(t.Artifact.job_id == job_id, t.Artifact.attempt == attempt)
                 .order_by(t.Artifact.path))
            return attempt, [(ArtifactInfo(attempt=a.attempt, path=a.path, size=a.size, digest=a.digest), a.url)
                             for a in s.scalars(q)]

def _points(line: str) -> list[Point]:
    """A metric line's values; nothing, for a line that is torn or not one (skipped rather than lose the rest)."""
    try:
        item = json.loads(line)
        values, step, ts = item["values"], item.get("step"), float(item.get("ts") or 0)
        if not isinstance(values, dict):
            return []
        step = int(step) if isinstance(step, (int, float)) and math.isfinite(step) and abs(step) < 2**63 else None
    except (ValueError, KeyError, TypeError, AttributeError, OverflowError):  # an integer past a float's range too
        return []
    ts = ts if math.isfinite(ts) else 0.0
    return [Point(printable(str(name)[:255]), step, float(value), ts) for name, value in values.items()
            if name != "" and _finite(value)]


def _finite(value: object) -> bool:
    """A number a float holds, not inf or NaN (``10**400`` is an int JSON reads, and no float)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False
