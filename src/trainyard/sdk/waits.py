"""Waiting for jobs to end: one (``Client.wait``), or several at once (``Client.wait_all``, ``trainyard wait
JOB...``: long polls in parallel, each ending told as it comes)."""

from __future__ import annotations

import time
from typing import Callable

from trainyard import errors
from trainyard.sdk.http import Http
from trainyard.spec.records import JobInfo

WAIT_AT_ONCE = 16  # long polls open at once
POLL_MAX = 60.0  # seconds one long poll waits at most


def until_ended(poll: Callable[[float], bytes], deadline: float | None) -> JobInfo:
    """A job's record once it ends or ``deadline`` (monotonic) passes, from long polls: ``poll(seconds)``
    answers the JSON of ``GET …/wait?timeout=seconds``."""
    while True:
        left = POLL_MAX if deadline is None else max(0.0, min(POLL_MAX, deadline - time.monotonic()))
        info = JobInfo.model_validate_json(poll(left))
        if info.status.is_terminal() or (deadline is not None and time.monotonic() >= deadline):
            return info


def wait_all(http: Http, get: Callable[[str], JobInfo], job_ids: list[str], timeout: float | None,
             on_end: Callable[[JobInfo], None] | None) -> list[JobInfo]:
    """See :meth:`trainyard.sdk.client.Client.wait_all`; ``get`` reads one job."""
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    ids = list(dict.fromkeys(job_ids))
    deadline = None if timeout is None else time.monotonic() + timeout
    ended: dict[str, JobInfo] = {}
    going: list[JobInfo] = []

    def seen(info: JobInfo) -> None:
        if not info.status.is_terminal():
            going.append(info)
            return
        ended[info.id] = info
        if on_end is not None:
            on_end(info)

    def polled(job_id: str) -> JobInfo:
        # the client's kept plain connection is one request at a time: these go through httpx's pool
        return until_ended(lambda left: http.request("GET", f"/api/v1/jobs/{job_id}/wait", params={"timeout": left},
                                                     timeout=left + 10).content, deadline)

    # each read once first: an unknown id fails here, before any long poll is open, and what has
    # ended already is said in the order given
    waiting = []
    for job_id in ids:
        info = get(job_id)
        if info.status.is_terminal():
            seen(info)
        else:
            waiting.append(job_id)
    if waiting:
        with ThreadPoolExecutor(min(WAIT_AT_ONCE, len(waiting)), thread_name_prefix="wait") as pool:
            todo = {pool.submit(polled, job_id) for job_id in waiting}
            while todo:
                done, todo = wait(todo, return_when=FIRST_COMPLETED)
                for f in done:
                    seen(f.result())
    if going:
        order = {job_id: i for i, job_id in enumerate(ids)}
        going.sort(key=lambda info: order[info.id])
        named = ", ".join(f"{i.id} ({i.status.value})" for i in going)
        raise errors.WaitTimeout(f"{len(going)} of {len(ids)} jobs not ended after {timeout}s: {named}",
                                 job_id=going[0].id)
    return [ended[job_id] for job_id in ids]
