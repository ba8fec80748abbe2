"""A running job's stacks from the SDK: ``Client().stacks(job_id)`` (``trainyard stack JOB``).

```python
for d in Client().stacks("j-3f2a", timeout=20):
    print(d.replica, d.node, d.text or d.error)
```
"""

from __future__ import annotations

import time
from typing import Callable

from pydantic import TypeAdapter

from trainyard import errors
from trainyard.sdk.http import Http
from trainyard.spec.stacks import StackDump

_DUMPS = TypeAdapter(list[StackDump])
POLL = 0.25  # seconds between reads while launchers dump (each answers with a report, ≤ 3 s apart)


def dump(http: Http, job_id: str, replica: int | None, timeout: float,
         on_answer: Callable[[StackDump], None] | None = None, *, with_locals: bool = False,
         native: bool = False) -> list[StackDump]:
    """Ask for the stacks and wait until every replica asked has answered (or its request expired); each
    answer is passed to ``on_answer`` as it comes. :class:`~trainyard.errors.WaitTimeout` after ``timeout``."""
    body = {"locals": with_locals, "native": native, **({} if replica is None else {"replica": replica})}
    asked = _DUMPS.validate_json(http.json_call("POST", f"/api/v1/jobs/{job_id}/stacks", body=body))
    ids, told = {d.id for d in asked}, set()
    deadline = time.monotonic() + timeout
    while True:
        got = {d.id: d for d in _DUMPS.validate_json(http.json_call("GET", f"/api/v1/jobs/{job_id}/stacks"))
               if d.id in ids}
        for i in sorted(got):
            if got[i].status != "pending" and i not in told:
                told.add(i)
                if on_answer is not None:
                    on_answer(got[i])
        if len(told) == len(ids) or len(got) < len(ids):  # all answered, or some gone with the job
            return [got[i] for i in sorted(got)]
        if time.monotonic() >= deadline:
            waiting = sorted(got[i].replica for i in got if i not in told)
            raise errors.WaitTimeout(f"job {job_id}: replica(s) {', '.join(map(str, waiting))} did not answer "
                                     f"within {timeout:g}s", job_id=job_id)
        time.sleep(POLL)
