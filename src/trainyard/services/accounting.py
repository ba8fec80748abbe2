"""GPU-, CPU- and memory-hours per team, user, queue or GPU type, from attempt records, and their cost.

Every attempt counts, however it ended: time lost to preemption and to
failures is part of the total and also shown apart, as those are the hours a
team lead wants to see shrink.
"""

from __future__ import annotations

import time
from typing import Callable

from trainyard.auth.permissions import Visible
from trainyard.config import Prices
from trainyard.spec.monitoring import UsageBy, UsageReport, UsageRow
from trainyard.status import AttemptStatus, Reason
from trainyard.store import Store
from trainyard.store.usage import Span

HOUR = 3600.0
GIB = float(1 << 30)
NO_GPU = "-"


class Accounting:
    def __init__(self, store: Store, prices: Prices | None, gpu_types: Callable[[], dict[str, str]]) -> None:
        """``gpu_types``: node name -> its GPU type, for attempts whose spec names none."""
        self.store = store
        self.prices = prices
        self.gpu_types = gpu_types

    def report(self, by: UsageBy, since: float, until: float | None = None,
               visible: Visible | None = None) -> UsageReport:
        """``visible``: only the jobs a caller may see (:func:`trainyard.auth.permissions.visible`); all without."""
        until = time.time() if until is None else until
        nodes = self.gpu_types()
        rows: dict[str, UsageRow] = {}
        priced = self._priced()
        for span in self.store.attempt_spans(since, until, visible):
            gpu_type = _gpu_type(span, nodes)
            key = {UsageBy.team: span.team, UsageBy.user: span.user, UsageBy.queue: span.queue,
                   UsageBy.gpu_type: gpu_type}[by]
            row = rows.get(key) or rows.setdefault(key, UsageRow(key=key, cost=0.0 if priced else None))
            hours = (span.end - span.start) / HOUR * span.replicas
            res = span.resources
            gpu = hours * int(res.get("gpu") or 0)
            cpu = hours * float(res.get("cpu") or 0)
            mem = hours * int(res.get("memory") or 0) / GIB
            row.attempts += 1
            row.gpu_hours += gpu
            row.cpu_hours += cpu
            row.memory_gib_hours += mem
            part = _part(span)
            if part:
                setattr(row, f"gpu_hours_{part}", getattr(row, f"gpu_hours_{part}") + gpu)
                setattr(row, f"cpu_hours_{part}", getattr(row, f"cpu_hours_{part}") + cpu)
                setattr(row, f"memory_gib_hours_{part}", getattr(row, f"memory_gib_hours_{part}") + mem)
            if priced:
                row.cost = (row.cost or 0.0) + self._cost(gpu_type, gpu, cpu, mem)
        ordered = sorted(rows.values(), key=lambda r: (-r.gpu_hours, -r.cpu_hours, r.key))
        return UsageReport(by=by, since=since, until=until, currency=self.prices.currency if priced else None,
                           rows=ordered)

    def _priced(self) -> bool:
        p = self.prices
        return p is not None and bool(p.gpu_hour or p.cpu_hour or p.memory_gib_hour)

    def _cost(self, gpu_type: str, gpu: float, cpu: float, mem: float) -> float:
        p = self.prices
        assert p is not None
        per_gpu = p.gpu_hour.get(gpu_type, p.gpu_hour.get("*", 0.0)) if gpu else 0.0
        return gpu * per_gpu + cpu * p.cpu_hour + mem * p.memory_gib_hour


def _part(span: Span) -> str | None:
    """Which lost time an attempt's hours also count as: preempted, failed, or neither."""
    if Reason.of(span.reason) in (Reason.PREEMPTED, Reason.DRAINED):  # stopped and requeued by the platform
        return "preempted"
    if span.status == AttemptStatus.FAILED.value:
        return "failed"
    return None


def _gpu_type(span: Span, nodes: dict[str, str]) -> str:
    if not span.resources.get("gpu"):
        return NO_GPU
    named = span.resources.get("gpu_type")
    if isinstance(named, list):
        named = named[0] if len(named) == 1 else None
    return named or nodes.get(span.node or "") or "GPU"
