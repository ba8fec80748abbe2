"""Logs, metrics and artifacts of attempts.

The launcher resends by byte offset after any failure, so every append here
is idempotent: bytes (or metric lines) before what was already received are
dropped, and the received size moves with a compare-and-set.
"""

from __future__ import annotations

import json
import math
from typing import Any

from sqlalchemy import func, select, update

from trainyard.errors import AttemptNotFound
from trainyard.spec.records import ArtifactInfo, LogChunk, MetricPoint
from trainyard.store import tables as t


class TelemetryMixin:
    def _replica_row(self, s, attempt_id: str, replica: int) -> tuple[t.Attempt, t.Replica]:  # noqa: ANN001
        rep = s.get(t.Replica, (attempt_id, replica), populate_existing=True)
        if rep is None:
            raise AttemptNotFound(f"no such replica: {attempt_id}/{replica}", attempt_id=attempt_id)
        return s.get(t.Attempt, attempt_id), rep

    def _moved(self, s, attempt_id: str, replica: int, column: str, have: int, new: int) -> bool:  # noqa: ANN001
        col = getattr(t.Replica, column)
        res = s.execute(update(t.Replica).where(t.Replica.attempt_id == attempt_id, t.Replica.index == replica,
                                                col == have).values({column: new}))
        return res.rowcount == 1

    def append_log(self, attempt_id: str, replica: int, offset: int, data: str) -> int:
        """Store ``data`` (bytes ``offset…`` of the replica's log); returns the new size."""
        raw = data.encode("utf-8")
        with self.write() as s:  # type: ignore[attr-defined]
            attempt, rep = self._replica_row(s, attempt_id, replica)
            have = rep.log_size
            if offset + len(raw) <= have:
                return have
            text = raw[max(0, have - offset):].decode("utf-8", errors="replace")
            if not self._moved(s, attempt_id, replica, "log_size", have, offset + len(raw)):
                return have
            s.add(t.LogChunk(job_id=attempt.job_id, attempt_id=attempt_id, attempt=attempt.number, replica=replica,
                             offset=max(offset, have), data=text))
            return offset + len(raw)

    def read_logs(
        self, job_id: str, *, after: int = 0, attempt: int | None = None, replica: int | None = None,
        limit: int = 1000,
    ) -> tuple[list[LogChunk], int]:
        """Chunks after cursor ``after``, oldest first, and the cursor to pass next."""
        q = select(t.LogChunk).where(t.LogChunk.job_id == job_id, t.LogChunk.id > after)
        if attempt is not None:
            q = q.where(t.LogChunk.attempt == attempt)
        if replica is not None:
            q = q.where(t.LogChunk.replica == replica)
        with self.read() as s:  # type: ignore[attr-defined]
            rows = list(s.scalars(q.order_by(t.LogChunk.id).limit(limit)))
        cursor = rows[-1].id if rows else after
        return [LogChunk(attempt=r.attempt, replica=r.replica, offset=r.offset, data=r.data) for r in rows], cursor

    def add_metrics(self, attempt_id: str, replica: int, offset: int, lines: list[str]) -> int:
        """Store metric lines (JSON from the in-job SDK) starting at byte ``offset``."""
        with self.write() as s:  # type: ignore[attr-defined]
            attempt, rep = self._replica_row(s, attempt_id, replica)
            have, pos, new_rows = rep.metrics_offset, offset, []
            for line in lines:
                end = pos + len(line.encode("utf-8")) + 1
                if pos >= have:
                    new_rows.extend(_metric_rows(attempt, replica, line))
                pos = end
            if pos <= have:
                return have
            if self._moved(s, attempt_id, replica, "metrics_offset", have, pos):
                s.add_all(new_rows)
            return pos

    def metrics(self, job_id: str) -> list[MetricPoint]:
        with self.read() as s:  # type: ignore[attr-defined]
            q = select(t.Metric).where(t.Metric.job_id == job_id).order_by(t.Metric.id)
            return [MetricPoint(attempt=m.attempt, replica=m.replica, step=m.step, name=m.name, value=m.value, ts=m.ts)
                    for m in s.scalars(q)]

    def add_artifacts(self, job_id: str, attempt: int, base_url: str, items: list[dict[str, Any]],
                      prefix: str = "") -> None:
        """Record uploaded outputs (``path`` relative to ``base_url``, shown under ``prefix``); repeats are ignored."""
        with self.write() as s:  # type: ignore[attr-defined]
            have = set(s.scalars(select(t.Artifact.path).where(t.Artifact.job_id == job_id,
                                                               t.Artifact.attempt == attempt)))
            s.add_all(t.Artifact(job_id=job_id, attempt=attempt, path=prefix + i["path"], size=int(i["size"]),
                                 digest=i["digest"], url=base_url.rstrip("/") + "/" + i["path"])
                      for i in items if prefix + i["path"] not in have)

    def artifacts(self, job_id: str) -> list[tuple[ArtifactInfo, str]]:
        """Outputs of the newest attempt that uploaded any, with their URLs."""
        with self.read() as s:  # type: ignore[attr-defined]
            last = s.scalar(select(func.max(t.Artifact.attempt)).where(t.Artifact.job_id == job_id))
            if last is None:
                return []
            q = select(t.Artifact).where(t.Artifact.job_id == job_id, t.Artifact.attempt == last).order_by(t.Artifact.path)
            return [(ArtifactInfo(attempt=a.attempt, path=a.path, size=a.size, digest=a.digest), a.url)
                    for a in s.scalars(q)]


def _metric_rows(attempt: t.Attempt, replica: int, line: str) -> list[t.Metric]:
    try:
        item = json.loads(line)
        values = item["values"]
    except (ValueError, KeyError, TypeError):
        return []  # a torn or foreign line: skip it rather than lose the rest
    step = item.get("step")
    rows = []
    for name, value in values.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            rows.append(t.Metric(job_id=attempt.job_id, attempt=attempt.number, replica=replica,
                                 step=int(step) if isinstance(step, (int, float)) else None,
                                 name=str(name)[:255], value=float(value), ts=float(item.get("ts") or 0)))
    return rows
