"""What a running job's launchers do on request, from the SDK: ``Client().stacks(job_id)`` (``trainyard stack
JOB``) and ``Client().exec(job_id, argv)`` (``trainyard exec JOB -- CMD``).

```python
for d in Client().stacks("j-3f2a", timeout=20):
    print(d.replica, d.node, d.text or d.error)
print(Client().exec("j-3f2a", ["nvidia-smi"]).output)
```
"""

from __future__ import annotations

import time
from typing import Callable

from pydantic import TypeAdapter

from trainyard import errors
from trainyard.sdk.http import Http
from trainyard.spec.execs import ExecResult
from trainyard.spec.stacks import StackDump

_DUMPS = TypeAdapter(list[StackDump])
POLL = 0.25  # seconds between reads while launchers work (each answers with a report, ≤ 3 s apart)
PICKUP = 15.0  # seconds past a command's own timeout its launcher may take to pick it up and answer


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


def execute(http: Http, job_id: str, argv: list[str], replica: int, timeout: float) -> ExecResult:
    """Run ``argv`` beside the replica's command and wait for its end (see :meth:`Client.exec`)."""
    body = {"argv": argv, "replica": replica, "timeout": timeout}
    made = ExecResult.model_validate_json(http.json_call("POST", f"/api/v1/jobs/{job_id}/exec", body=body))
    deadline = time.monotonic() + timeout + PICKUP
    while True:
        got = ExecResult.model_validate_json(http.json_call("GET", f"/api/v1/jobs/{job_id}/exec/{made.id}"))
        if got.status != "pending":
            return got
        if time.monotonic() >= deadline:
            raise errors.WaitTimeout(f"job {job_id}: replica {replica} did not answer within "
                                     f"{timeout + PICKUP:g}s", job_id=job_id)
        time.sleep(POLL)
