"""The engine interface: what places and runs attempts.

An engine is narrow on purpose — nodes, validate, launch, cancel, reconcile —
so the scheduler and services never learn where a process actually runs.

The contract below is checked for every engine by
``tests/contract/test_engine_contract.py``; an engine that cannot keep a
promise says so in its own docstring. Names, not memory, are the source of
truth: an engine object made anew over the same home or cluster (a restarted
server) must find every attempt an earlier one launched.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from trainyard.engines.leftovers import Leftover
from trainyard.launch.config import LaunchConfig
from trainyard.spec.reports import LaunchResult
from trainyard.spec.job import JobSpec
from trainyard.spec.records import AttemptInfo, NodeInfo


@dataclass
class Observation:
    """What an engine found out about one replica of an attempt the store thinks is active."""

    attempt_id: str
    replica: int
    # alive: running (or still delivering its logs); exited: ended, ``result`` says how;
    # lost: launched, gone, and nobody knows how it ended; not_launched: no trace of a launch;
    # placing: launched, but the engine has not found it room yet (Ray has not placed its placement group):
    # no launcher runs, so its silence is no launcher's
    state: Literal["alive", "exited", "lost", "not_launched", "placing"]
    result: LaunchResult | None = None  # when "exited": the launcher's result.json, or the engine's word for it
    detail: str = ""  # when "lost": why the engine thinks so; when "placing": why it waits, once it is worth saying


class Launch(NamedTuple):
    """One attempt to start, as :meth:`Engine.launch` takes it."""

    attempt: AttemptInfo
    spec: JobSpec
    configs: list[LaunchConfig]


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

        The handle is JSON the store keeps with the attempt; it is for people
        and for the engine, never read by the scheduler.

        Launching an attempt that was already launched — by this object or by
        an earlier one over the same home or cluster — is a no-op: nothing new
        starts, and the same handle comes back. So a control plane that died
        between launching and recording the handle simply calls it again.
        Replicas of a gang that had not started yet are started then.

        Raise when the attempt cannot start at all (no such node, no container
        engine): the caller ends the attempt as ``SetupFailed`` with the message.
        """

    def launch_many(self, launches: list[Launch]) -> list[dict[str, Any] | Exception]:
        """:meth:`launch` for each of ``launches``, in order: its handle, or the exception that launch
        raised (the others still start). The scheduler hands over a cycle's admissions at once, so an
        engine that starts several for less than one at a time each overrides this."""
        out: list[dict[str, Any] | Exception] = []
        for launch in launches:
            try:
                out.append(self.launch(*launch))
            except Exception as e:  # the caller ends this attempt, with why
                out.append(e)
        return out

    @abstractmethod
    def cancel(self, attempt: AttemptInfo) -> None:
        """Ask every replica of the attempt to stop (each launcher gets SIGTERM, then its grace period).

        Returns at once; the end shows in a later :meth:`reconcile`, as
        ``exited`` with reason ``Cancelled`` (the launcher's own report), or as
        whatever the replica ended with if it ended first.

        Idempotent: a second cancel changes nothing. Never raises for an
        attempt that has ended, was never launched, or that this engine has
        never heard of.
        """

    @abstractmethod
    def reconcile(self, attempts: list[AttemptInfo]) -> list[Observation]:
        """One observation per replica the store believes live, in order; replicas already terminal are skipped.

        ``attempts`` is every attempt the caller believes live, each time (the
        scheduler passes all the store's active attempts): an engine may forget
        what it keeps for an attempt left out, as ended (the Ray engine drops
        the results it collected), so a caller that reconciles a few at a time
        can see an ended replica of another read ``not_launched``.

        - ``alive``: its launcher still runs (even after writing its result:
          it may still be delivering logs).
        - ``exited``: it ended; ``result`` is the launcher's ``result.json``
          (``exit_code``, ``reason``, ``message``, ``outputs``) or one the
          engine wrote for it (``Cancelled`` before it ran, ``NodeLost``).
        - ``lost``: it was launched but is gone without a result.
        - ``not_launched``: the engine has no trace of it — the answer for an
          attempt it has never heard of, so the caller launches it (again).
          One cancelled before it was ever launched may read either way:
          ``not_launched`` (local) or ``exited`` with ``Cancelled`` (fake;
          Ray while the same engine object lives).
        - ``placing``: launched, but the engine has not found it room yet, so no
          launcher runs (Ray: its placement group is pending, another user may
          hold the node). ``detail``, once it is worth saying, says why, for the
          job's reason. Engines that place at once never answer it.

        Works the same on an engine object made after a restart: it finds
        replicas an earlier one launched, running or ended. Never raises for
        unknown attempts; it is called every second and must stay cheap.
        """

    def kill(self, attempt: AttemptInfo, replica: int) -> bool:
        """Stop one replica now, with no grace period: its launcher stopped reporting (hung, or cut off
        from the server), so it would neither hear a cancel nor enforce the job's timeout.

        Returns whether nothing of the replica runs any more (then the caller ends it ``LostContact``);
        False: it is being killed, ask again later. Never raises. This default, for an engine that can
        do no more (Ray), stops the attempt as :meth:`cancel` does and leaves it to :meth:`reconcile` to say when
        it is gone: a replica cut off from the server with its node is not retried while it may still run.
        """
        self.cancel(attempt)
        return False

    def remove_leftovers(self, items: list[Leftover]) -> tuple[int, int]:
        """Remove folders ended attempts left on their nodes (:mod:`trainyard.engines.leftovers`); (removed,
        failed). Folders on nodes that are not in the cluster now are left; the default engine keeps none."""
        return 0, 0

    def close(self) -> None:
        """Release engine resources; running attempts keep running."""
