"""The engine interface: what places and runs attempts.

An engine is narrow on purpose — nodes, validate, launch, cancel, reconcile —
so the scheduler and services never learn where a process actually runs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Literal

from trainyard.launch.config import LaunchConfig
from trainyard.spec.reports import LaunchResult
from trainyard.spec.job import JobSpec
from trainyard.spec.records import AttemptInfo, NodeInfo


@dataclass
class Observation:
    """What an engine found out about one replica of an attempt the store thinks is active."""

    attempt_id: str
    replica: int
    state: Literal["alive", "exited", "lost", "not_launched"]
    result: LaunchResult | None = None  # when "exited": the launcher's result.json, or the engine's word for it
    detail: str = ""


class Engine(ABC):
    name: str = "engine"

    @abstractmethod
    def nodes(self) -> list[NodeInfo]:
        """Allocatable capacity of every node now (usage is filled in by the caller)."""

    def validate(self, spec: JobSpec) -> None:
        """Raise :class:`trainyard.errors.Unsupported` for a spec this engine can never run.

        Called at submit time, so the user hears about it before anything is stored.
        """

    def rendezvous(self, attempt: AttemptInfo) -> tuple[str, int]:
        """``(MASTER_ADDR, MASTER_PORT)`` for a distributed attempt: replica 0's node address
        and a port free there, chosen per attempt so two jobs never meet."""
        raise NotImplementedError(f"the {self.name} engine cannot run distributed jobs")

    @abstractmethod
    def launch(self, attempt: AttemptInfo, spec: JobSpec, configs: list[LaunchConfig]) -> dict[str, Any]:
        """Start one launcher per replica (``configs[i]`` on ``attempt.replicas[i].node``); return a handle.

        Launching an attempt that was already launched is a no-op that returns
        the existing handle, so a control plane that died between launching and
        recording the handle can simply call it again.
        """

    @abstractmethod
    def cancel(self, attempt: AttemptInfo) -> None:
        """Ask every replica of the attempt to stop (each launcher gets SIGTERM, then its grace period).

        Idempotent; must not raise when the attempt is already gone.
        """

    @abstractmethod
    def reconcile(self, attempts: list[AttemptInfo]) -> list[Observation]:
        """Observe each live replica of the attempts the store believes active. Must not raise for unknown ones."""

    def close(self) -> None:
        """Release engine resources; running attempts keep running."""
