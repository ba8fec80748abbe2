"""The leader's look at the database for the ends of the jobs its long polls wait on.

The leader hears in-process every end it writes (a launcher's last report, an
engine's observation, its own cancels), but not one that another server sharing
its database writes: a follower cancels a pending job at once, in its own
process. Followers' long polls re-read the database every ``FOLLOWER_POLL``
(:attr:`Notifier.max_wait`); the leader's, thousands of them beside the
scheduler, do not: this loop reads for all of them at once, one query per
``FOLLOWER_POLL`` while any waits, and wakes those whose job has ended. A job the
leader ended itself was notified then, and its waiters are gone by the time this
looks, so it wakes no one twice (or at worst once more, to read the job again).
"""

from __future__ import annotations

import logging

from trainyard.services.notify import FOLLOWER_POLL, Notifier
from trainyard.services.ticker import Ticker
from trainyard.store import Store


class EndWatch(Ticker):
    name = "trainyard-end-watch"
    log = logging.getLogger("trainyard.end_watch")

    def __init__(self, store: Store, notifier: Notifier, every: float = FOLLOWER_POLL) -> None:
        super().__init__()  # it hears nothing: what it looks for is what no notify told
        self.store = store
        self.waiters = notifier
        self.every = every

    def pause(self) -> float:
        return self.every

    def cycle(self) -> None:
        # keys of pipeline runs are waited on too: no job has their id, so the read leaves them out
        waited = self.waiters.waited()
        if waited:
            for job_id in self.store.ended_among(waited):
                self.waiters.notify(job_id)
