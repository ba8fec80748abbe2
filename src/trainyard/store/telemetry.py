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
    def _attempt_row(self, s, attempt_id: str) -> t.Attempt:  # noqa: ANN001
        row = s.get(t.Attempt, attempt_id, populate_existing=True)
        if row is None:
            raise AttemptNotFound(f"no such attempt: {attempt_id}", attempt_id=attempt_id)
        return row

    def append_log(self, attempt_id: str, offset: int, data: str) -> int:
        """Store ``data`` (bytes ``offset…`` of the attempt's log); returns the new size."""
        raw = data.encode("utf-8")
        with self.write() as s:  # type: ignore[attr-defined]
            row = self._attempt_row(s, attempt_id)
            have = row.log_size
            if offset + len(raw) <= have:
                return have
            skip = max(0, have - offset)
            text = raw[skip:].decode("utf-8", errors="replace")
            res = s.execute(update(t.Attempt).where(t.Attempt.id == attempt_id, t.Attempt.log_size == have)
                            .values(log_size=offset + len(raw)))
            if res.rowcount != 1:
                return have
            s.add(t.LogChunk(job_id=row.job_id, attempt_id=attempt_id, attempt=row.number,
                             offset=max(offset, have), data=text))
            return offset + len(raw)

    def read_logs(
        self, job_id: str, *, after: int = 0, attempt: int | None = None, limit: int = 1000,
    ) -> tuple[list[LogChunk], int]:
        """Chunks after cursor ``after``, oldest first, and the cursor to pass next."""
        q = select(t.LogChunk).where(t.LogChunk.job_id == job_id, t.LogChunk.id > after)
        if attempt is not None:
            q = q.where(t.LogChunk.attempt == attempt)
        with self.read() as s:  # type: ignore[attr-defined]
            rows = list(s.scalars(q.order_by(t.LogChunk.id).limit(limit)))
        cursor = rows[-1].id if rows else after
        return [LogChunk(attempt=r.attempt, offset=r.offset, data=r.data) for r in rows], cursor

    def add_metrics(self, attempt_id: str, offset: int, lines: list[str]) -> int:
        """Store metric lines (JSON from the in-job SDK) starting at byte ``offset``."""
        with self.write() as s:  # type: ignore[attr-defined]
            row = self._attempt_row(s, attempt_id)
            have, pos, new_rows = row.metrics_offset, offset, []
            for line in lines:
                end = pos + len(line.encode("utf-8")) + 1
                if pos >= have:
                    new_rows.extend(_metric_rows(row, line))
                pos = end
            if pos <= have:
                return have
            res = s.execute(update(t.Attempt).where(t.Attempt.id == attempt_id, t.Attempt.metrics_offset == have)
                            .values(metrics_offset=pos))
            if res.rowcount == 1:
                s.add_all(new_rows)
            return pos

    def metrics(self, job_id: str) -> list[MetricPoint]:
        with self.read() as s:  # type: ignore[attr-defined]
            q = select(t.Metric).where(t.Metric.job_id == job_id).order_by(t.Metric.id)
            return [MetricPoint(attempt=m.attempt, step=m.step, name=m.name, value=m.value, ts=m.ts)
                    for m in s.scalars(q)]

    def add_artifacts(self, job_id: str, attempt: int, base_url: str, items: list[dict[str, Any]]) -> None:
        with self.write() as s:  # type: ignore[attr-defined]
            done = s.scalar(select(func.count()).select_from(t.Artifact)
                            .where(t.Artifact.job_id == job_id, t.Artifact.attempt == attempt))
            if done:
                return
            s.add_all(t.Artifact(job_id=job_id, attempt=attempt, path=i["path"], size=int(i["size"]),
                                 digest=i["digest"], url=base_url.rstrip("/") + "/" + i["path"]) for i in items)

    def artifacts(self, job_id: str) -> list[tuple[ArtifactInfo, str]]:
        """Outputs of the newest attempt that uploaded any, with their URLs."""
        with self.read() as s:  # type: ignore[attr-defined]
            last = s.scalar(select(func.max(t.Artifact.attempt)).where(t.Artifact.job_id == job_id))
            if last is None:
                return []
            q = select(t.Artifact).where(t.Artifact.job_id == job_id, t.Artifact.attempt == last).order_by(t.Artifact.path)
            return [(ArtifactInfo(attempt=a.attempt, path=a.path, size=a.size, digest=a.digest), a.url)
                    for a in s.scalars(q)]


def _metric_rows(attempt: t.Attempt, line: str) -> list[t.Metric]:
    try:
        item = json.loads(line)
        values = item["values"]
    except (ValueError, KeyError, TypeError):
        return []  # a torn or foreign line: skip it rather than lose the rest
    step = item.get("step")
    rows = []
    for name, value in values.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            rows.append(t.Metric(job_id=attempt.job_id, attempt=attempt.number,
                                 step=int(step) if isinstance(step, (int, float)) else None,
                                 name=str(name)[:255], value=float(value), ts=float(item.get("ts") or 0)))
    return rows
