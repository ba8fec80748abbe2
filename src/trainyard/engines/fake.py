"""An engine that runs nothing: for tests and the scheduler benchmark.

Like dramatiq's ``StubBroker``, it ships with the package. Declare any number
of nodes; launched attempts stay "alive" until a test calls :meth:`finish`
(or :meth:`lose`), and the next reconcile reports what happened.
"""

from __future__ import annotations

from typing import Any

from trainyard.engines.base import Engine, Observation
from trainyard.launch.config import LaunchConfig
from trainyard.spec.job import JobSpec
from trainyard.spec.records import AttemptInfo, NodeInfo
from trainyard.status import Reason


class FakeEngine(Engine):
    name = "fake"

    def __init__(self, nodes: list[NodeInfo]) -> None:
        self._nodes = list(nodes)
        self.launched: dict[str, LaunchConfig] = {}
        self.cancelled: list[str] = []
        self._results: dict[str, dict[str, Any]] = {}
        self._lost: set[str] = set()

    def nodes(self) -> list[NodeInfo]:
        return list(self._nodes)

    def launch(self, attempt: AttemptInfo, spec: JobSpec, config: LaunchConfig) -> dict[str, Any]:
        self.launched.setdefault(attempt.id, config)
        return {"fake": attempt.id}

    def cancel(self, attempt: AttemptInfo) -> None:
        if attempt.id not in self.cancelled:
            self.cancelled.append(attempt.id)
        self._results.setdefault(attempt.id, {"exit_code": -15, "reason": Reason.CANCELLED, "outputs": []})

    def finish(self, attempt_id: str, exit_code: int = 0, reason: str | None = None) -> None:
        """Make the attempt exit; the next reconcile reports it."""
        reason = reason or (Reason.SUCCEEDED if exit_code == 0 else Reason.error(exit_code))
        self._results[attempt_id] = {"exit_code": exit_code, "reason": reason, "outputs": []}

    def lose(self, attempt_id: str) -> None:
        """Make the attempt vanish without a result, as a dead node would."""
        self._lost.add(attempt_id)

    def reconcile(self, attempts: list[AttemptInfo]) -> list[Observation]:
        out = []
        for a in attempts:
            if a.id in self._results:
                out.append(Observation(a.id, "exited", self._results[a.id]))
            elif a.id in self._lost:
                out.append(Observation(a.id, "lost", detail="lost by the fake engine"))
            elif a.id in self.launched:
                out.append(Observation(a.id, "alive"))
            else:
                out.append(Observation(a.id, "not_launched"))
        return out
