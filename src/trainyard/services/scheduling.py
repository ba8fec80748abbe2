"""The scheduler loop as the services see it: a handle made before the loop, bound to it once.

The loop needs the services (live attempts, nodes, queues, what ends an attempt)
and the services need the loop (wake it, stop an attempt, hand it a new job's
spec). The handle is that second half: services take it at construction, and
the platform binds it when the loop exists, so no service is patched afterwards.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trainyard.scheduler.loop import SchedulerLoop
    from trainyard.spec.records import AttemptInfo, JobInfo


class Scheduler:
    def __init__(self) -> None:
        self._loop: SchedulerLoop | None = None

    def bind(self, loop: SchedulerLoop) -> None:
        """Attach the loop; once, while the platform is being built (before anything can call in)."""
        if self._loop is not None:
            raise RuntimeError("the scheduler handle is already bound")
        self._loop = loop

    def wake(self) -> None:
        """Plan again soon: something changed (a submission, an end, a cancel, a new quota)."""
        self._loop.wake()

    def freed(self) -> None:
        """A job ended for good: plan again if some job may be waiting for the room it leaves."""
        self._loop.freed()

    def stop_attempt(self, attempt: AttemptInfo) -> None:
        """Ask the engine to stop every replica of ``attempt`` (once per attempt from this process)."""
        self._loop.stop_attempt(attempt)

    def remember(self, job: JobInfo) -> None:
        """A job just submitted: the loop keeps its spec so it need not read it back to plan it."""
        self._loop.remember(job)
