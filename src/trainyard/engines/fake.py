"""An engine that runs nothing: for tests and the scheduler benchmark.

Like dramatiq's ``StubBroker``, it ships with the package. Declare any number
of nodes; launched attempts stay "alive" until a test calls :meth:`finish`
(or :meth:`lose`, or the platform cancels them), and the next reconcile
reports what happened. :meth:`join` waits until the platform has taken that
in, so tests never poll.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

from trainyard.engines.base import Engine, Observation
from trainyard.engines.leftovers import Leftover
from trainyard.launch.config import LaunchConfig
from trainyard.spec.job import JobSpec
from trainyard.spec.reports import LaunchResult
from trainyard.spec.records import AttemptInfo, NodeInfo
from trainyard.status import Reason


class EngineMisuse(AssertionError):
    """The platform asked the fake engine for something no real engine could do."""


class FakeEngine(Engine):
    name = "fake"

    def __init__(self, nodes: list[NodeInfo]) -> None:
        self._nodes = list(nodes)
        self.launched: dict[str, list[LaunchConfig]] = {}  # attempt id -> one config per replica
        self.cancelled: list[str] = []
        self.killed: list[tuple[str, int]] = []  # replicas killed for their silence (kill)
        self.failures: list[BaseException] = []  # raised inside calls from the platform; join re-raises them
        self._results: dict[tuple[str, int], LaunchResult] = {}
        self._lost: set[tuple[str, int]] = set()
        self.unplaced: dict[str, str] = {}  # attempt id -> why the engine has not placed it (see place)
        self.kill_by_cancel = False  # kill as the base Engine's does (Ray's): a cancel, the end seen later
        self.cancel_ends = True  # False: a cancel is only asked (a real engine's SIGTERM); the replica's report ends it
        # join's bookkeeping: every reconcile call is numbered; an attempt has ended "as far as the platform
        # knows" once a reconcile that began after its launch no longer lists it as live
        self._changed = threading.Condition()
        self._reconciles = 0
        self._running: dict[str, int] = {}  # launched, end not yet known -> number of reconciles before launch
        self._ended: set[str] = set()
        self.removed: list[Leftover] = []  # what the retention sweeps removed, in order (tests may clear it)
        self._gone: set[Leftover] = set()

    def nodes(self) -> list[NodeInfo]:
        return [n.fresh() for n in self._nodes]

    def remove_leftovers(self, items: list[Leftover]) -> tuple[int, int]:
        """As a node would: a folder removed before is gone, so asking again removes nothing."""
        here = {n.name for n in self._nodes}
        new = [i for i in dict.fromkeys(items) if i.node in here and i not in self._gone]
        self._gone.update(new)
        self.removed += new
        return len(new), 0

    def rendezvous(self, attempt: AttemptInfo) -> tuple[str, int]:
        return "127.0.0.1", 29500

    def launch(self, attempt: AttemptInfo, spec: JobSpec, configs: list[LaunchConfig]) -> dict[str, Any]:
        with self._recorded():
            self._check_launch(attempt, configs)
        with self._changed:
            if attempt.id not in self.launched:
                self._running[attempt.id] = self._reconciles
                self._ended.discard(attempt.id)
            self.launched.setdefault(attempt.id, configs)
        return {"fake": attempt.id}

    def _check_launch(self, attempt: AttemptInfo, configs: list[LaunchConfig]) -> None:
        if len(configs) != len(attempt.replicas):
            raise EngineMisuse(f"{attempt.id}: {len(configs)} launch configs for {len(attempt.replicas)} replicas")
        names = {n.name for n in self._nodes}
        if unknown := sorted({r.node for r in attempt.replicas} - names):
            raise EngineMisuse(f"{attempt.id}: placed on {unknown}, which the fake engine does not have")

    def launcher_headers(self, attempt_id: str) -> dict[str, str]:
        """What the launchers of a launched attempt send with their reports: its own credential."""
        return {"Authorization": f"Bearer {self.launched[attempt_id][0].token}"}

    def kill(self, attempt: AttemptInfo, replica: int) -> bool:
        """Gone at once, as the local engine's kill of a hung launcher leaves nothing: the test says it ended.
        With ``kill_by_cancel``, as an engine that can only cancel (Ray): stopped, ending Cancelled."""
        self.killed.append((attempt.id, replica))
        return True if not self.kill_by_cancel else super().kill(attempt, replica)

    def cancel(self, attempt: AttemptInfo) -> None:
        with self._changed:
            if attempt.id not in self.cancelled:
                self.cancelled.append(attempt.id)
            for r in attempt.replicas if self.cancel_ends else ():
                self._results.setdefault((attempt.id, r.index), LaunchResult(exit_code=-15, reason=Reason.CANCELLED))

    def finish(self, attempt_id: str, exit_code: int = 0, reason: str | None = None, replica: int = 0) -> None:
        """Make a replica exit; the next reconcile reports it."""
        reason = reason or (Reason.SUCCEEDED if exit_code == 0 else Reason.error(exit_code))
        with self._changed:
            self._results[(attempt_id, replica)] = LaunchResult(exit_code=exit_code, reason=reason)

    def lose(self, attempt_id: str, replica: int = 0) -> None:
        """Make a replica vanish without a result, as a dead node would."""
        with self._changed:
            self._lost.add((attempt_id, replica))

    def hold(self, attempt_id: str, why: str = "") -> None:
        """Leave an attempt unplaced, as Ray leaves a placement group it cannot place: its replicas read
        ``placing`` with ``why`` until :meth:`place`."""
        with self._changed:
            self.unplaced[attempt_id] = why

    def place(self, attempt_id: str) -> None:
        with self._changed:
            self.unplaced.pop(attempt_id, None)

    def reconcile(self, attempts: list[AttemptInfo]) -> list[Observation]:
        with self._changed:
            self._reconciles += 1
            out = [self._observe(a.id, r.index) for a in attempts for r in a.replicas if not r.status.is_terminal()]
            live = {o.attempt_id for o in out}
            for attempt_id in [a for a, at in self._running.items() if at < self._reconciles and a not in live]:
                del self._running[attempt_id]
                self._ended.add(attempt_id)
            self._changed.notify_all()
        return out

    def _observe(self, attempt_id: str, replica: int) -> Observation:
        key = (attempt_id, replica)
        if key in self._results:
            return Observation(attempt_id, replica, "exited", self._results[key])
        if key in self._lost:
            return Observation(attempt_id, replica, "lost", detail="lost by the fake engine")
        if attempt_id in self.unplaced:
            return Observation(attempt_id, replica, "placing", detail=self.unplaced[attempt_id])
        if attempt_id in self.launched:
            return Observation(attempt_id, replica, "alive")
        return Observation(attempt_id, replica, "not_launched")

    def join(self, attempt_id: str | None = None, timeout: float = 10.0) -> None:
        """Wait until the platform knows that ``attempt_id`` has ended; re-raise what went wrong meanwhile.

        "Knows" means a reconcile that began after the attempt's launch no
        longer lists it as live: the platform has recorded its end, whether it
        came from :meth:`finish`, :meth:`lose`, a cancel, or a launcher's exit
        report through the API. Without ``attempt_id``: every launched attempt
        that was given an outcome here (finished, lost or cancelled), as
        dramatiq's ``StubBroker.join`` waits for a queue to drain.

        Raises the first of :attr:`failures` (an error inside a call from the
        platform, which its loop would only log), and ``TimeoutError`` naming
        the attempts still waited for after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                if self.failures:
                    raise self.failures[0]
                waiting = self._waited_for(attempt_id)
                if not waiting:
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"the platform did not see {sorted(waiting)} end within {timeout}s")
                self._changed.wait(left)

    def _waited_for(self, attempt_id: str | None) -> set[str]:
        if attempt_id is not None:
            return set() if attempt_id in self._ended else {attempt_id}
        given = {a for a, _ in self._results} | {a for a, _ in self._lost}
        return {a for a in given if a in self.launched and a not in self._ended}

    @contextmanager
    def _recorded(self) -> Iterator[None]:
        """Keep an error raised inside a call from the platform for :meth:`join`, and let it go on."""
        try:
            yield
        except BaseException as e:
            with self._changed:
                self.failures.append(e)
                self._changed.notify_all()
            raise
