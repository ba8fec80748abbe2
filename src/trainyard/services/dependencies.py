"""Jobs that start only once others have ended (their spec's ``after``; Slurm's ``--dependency``).

At submit, each job named must exist and be one the caller may see; one that has already ended the wrong
way is refused (the job could never start). A job with some still to end is stored *blocked*: pending, out
of the scheduler's line, its reason naming what it waits for. The leader's loop looks every second: a
blocked job whose every dependency is met joins the line; one with a dependency that ended the wrong way
is cancelled, saying which (and those waiting for it follow on the next look).
"""

from __future__ import annotations

import logging

from trainyard.auth.permissions import LOCAL_ADMIN, Caller
from trainyard.errors import InvalidSpec
from trainyard.services.notify import Notifier
from trainyard.services.scheduling import Scheduler
from trainyard.services.ticker import Ticker
from trainyard.spec.job import Dependency, JobSpec
from trainyard.store import Store
from trainyard.store.dependencies import DependencyStore

log = logging.getLogger("trainyard.dependencies")
LOOK = 1.0  # seconds between the leader's looks at blocked jobs (one query when there are none)
_WORD = {"succeeded": "succeed", "failed": "fail", "ended": "end"}


def waits_for(deps: list[Dependency], statuses: dict[str, str]) -> str | None:
    """Why a job with ``deps`` waits, given each one's status; None if none is left to wait for."""
    left = [d for d in deps if d.met_by(statuses.get(d.job, "")) is None]
    if not left:
        return None
    shown = ", ".join(f"{d.job} ({statuses.get(d.job, 'gone')}) to {_WORD[d.when]}" for d in left[:3])
    return f"waits for {shown}" + (f" and {len(left) - 3} more" if len(left) > 3 else "")


def never(deps: list[Dependency], statuses: dict[str, str]) -> tuple[int, str] | None:
    """(index, why) of the first dependency that ended so that it can never be met."""
    for i, d in enumerate(deps):
        if d.job not in statuses:  # deleted after this one was submitted (rm refuses while one waits)
            return i, f"job {d.job} was deleted; this one was to start only once it {d.on_words()}"
        if d.met_by(statuses[d.job]) is False:
            return i, f"job {d.job} {statuses[d.job]}; this one was to start only once it {d.on_words()}"
    return None


class Dependencies:
    def __init__(self, store: Store, notifier: Notifier, scheduler: Scheduler) -> None:
        self.rows = DependencyStore(store)
        self.store = store
        self.notifier = notifier
        self.scheduler = scheduler

    def check(self, spec: JobSpec, caller: Caller = LOCAL_ADMIN) -> str | None:
        """Why a job of ``spec`` would wait (None: it need not); InvalidSpec naming ``after[i].job`` for a job
        that is not there, not the caller's to see, or ended so that this one could never start."""
        if not spec.after:
            return None
        found = self.rows.seen([d.job for d in spec.after])
        for i, d in enumerate(spec.after):
            if d.job not in found or not caller.sees(*found[d.job][1:]):  # another team's is as if not there
                raise _bad(i, f"no such job: {d.job}")
        statuses = {k: v[0] for k, v in found.items()}
        if (bad := never(spec.after, statuses)) is not None:
            raise _bad(bad[0], bad[1] + ", so it could never start")
        return waits_for(spec.after, statuses)

    def look(self) -> None:
        """Release the blocked jobs whose dependencies are all met; cancel those that can never start."""
        blocked = self.rows.blocked()
        if not blocked:
            return
        statuses = {k: v[0] for k, v in self.rows.seen(sorted({d.job for b in blocked for d in b.after})).items()}
        released = False
        for b in blocked:
            if (bad := never(b.after, statuses)) is not None:
                self.store.request_cancel(b.id, by="system", why=f"never started: {bad[1]}")
                self.notifier.notify(b.id)
                log.info("%s cancelled: %s", b.id, bad[1])
            elif (why := waits_for(b.after, statuses)) is None:
                released |= self.rows.release(b.id)
            elif why != b.reason:
                self.rows.set_reason(b.id, why)
        if released:
            self.scheduler.wake()


class DependencyLoop(Ticker):
    name = "trainyard-dependencies"
    log = log

    def __init__(self, dependencies: Dependencies) -> None:
        super().__init__()
        self.dependencies = dependencies

    def pause(self) -> float:
        return LOOK

    def cycle(self) -> None:
        self.dependencies.look()


def _bad(i: int, message: str) -> InvalidSpec:
    return InvalidSpec(errors=[{"field": f"after.{i}.job", "line": None, "where": f"after[{i}].job",
                                "message": message}])
