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
from trainyard.spec.reports import LaunchResult
from trainyard.spec.records import AttemptInfo, NodeInfo
from trainyard.status import Reason


class FakeEngine(Engine):
    name = "fake"

    def __init__(self, nodes: list[NodeInfo]) -> None:
        self._nodes = list(nodes)
        self.launched: dict[str, list[LaunchConfig]] = {}  # attempt id -> one config per replica
        self.cancelled: list[str] = []
        self._results: dict[tuple[str, int], LaunchResult] = {}
        self._lost: set[tuple[str, int]] = set()

    def nodes(self) -> list[NodeInfo]:
        return [n.model_copy(deep=True) for n in self._nodes]

    def rendezvous(self, attempt: AttemptInfo) -> tuple[str, int]:
        return "127.0.0.1", 29500

    def launch(self, attempt: AttemptInfo, spec: JobSpec, configs: list[LaunchConfig]) -> dict[str, Any]:
        self.launched.setdefault(attempt.id, configs)
        return {"fake": attempt.id}

    def launcher_headers(self, attempt_id: str) -> dict[str, str]:
        """What the launchers of a launched attempt send with their reports: its own credential."""
        return {"Authorization": f"Bearer {self.launched[attempt_id][0].token}"}

    def cancel(self, attempt: AttemptInfo) -> None:
        if attempt.id not in self.cancelled:
            self.cancelled.append(attempt.id)
        for r in attempt.replicas:
            self._results.setdefault((attempt.id, r.index), LaunchResult(exit_code=-15, reason=Reason.CANCELLED))

    def finish(self, attempt_id: str, exit_code: int = 0, reason: str | None = None, replica: int = 0) -> None:
        """Make a replica exit; the next reconcile reports it."""
        reason = reason or (Reason.SUCCEEDED if exit_code == 0 else Reason.error(exit_code))
        self._results[(attempt_id, replica)] = LaunchResult(exit_code=exit_code, reason=reason)

    def lose(self, attempt_id: str, replica: int = 0) -> None:
        """Make a replica vanish without a result, as a dead node would."""
        self._lost.add((attempt_id, replica))

    def reconcile(self, attempts: list[AttemptInfo]) -> list[Observation]:
        out = []
        for a in attempts:
            for r in a.replicas:
                key = (a.id, r.index)
                if r.status.is_terminal():
                    continue
                if key in self._results:
                    out.append(Observation(a.id, r.index, "exited", self._results[key]))
                elif key in self._lost:
                    out.append(Observation(a.id, r.index, "lost", detail="lost by the fake engine"))
                elif a.id in self.launched:
                    out.append(Observation(a.id, r.index, "alive"))
                else:
                    out.append(Observation(a.id, r.index, "not_launched"))
        return out
