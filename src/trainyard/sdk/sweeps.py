"""Sweeps over HTTP: ``Client().sweep("sweep.yaml")``, then ``client.sweeps.wait(id)`` for the best trial.

```python
import trainyard
c = trainyard.Client()
s = c.sweep("sweep.yaml")                 # its trial job's workdir is uploaded once, as a job's is
done = c.sweeps.wait(s.id, timeout=3600)
print(done.status, done.best.params, done.best.value)
```
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trainyard import errors
from trainyard.sdk import paging
from trainyard.sdk.http import Http
from trainyard.spec.lines import validation_errors
from trainyard.spec.sweep import SweepInfo, SweepSpec


def load_sweep(spec: SweepSpec | dict[str, Any] | str | Path) -> SweepSpec:
    """A sweep spec from a YAML file, a dict or itself; errors name the field (and the file's line)."""
    if isinstance(spec, SweepSpec):
        return spec
    if isinstance(spec, (str, Path)):
        from trainyard.spec.loader import read_model

        return read_model(SweepSpec, spec)
    try:
        return SweepSpec.model_validate(spec)
    except ValidationError as e:
        raise errors.InvalidSpec(errors=validation_errors(e, {}, "<sweep>", SweepSpec)) from None


class Sweeps:
    def __init__(self, http: Http) -> None:
        self.http = http

    def create(self, spec: SweepSpec | dict[str, Any] | str | Path, base_dir: str | Path | None = None) -> SweepInfo:
        """Start a sweep; the trial job's ``workdir`` (relative to the file's folder, or ``base_dir``) is
        packed and uploaded once, for every trial."""
        from trainyard.sdk.prepare import prepare

        if base_dir is None and isinstance(spec, (str, Path)):
            base_dir = Path(spec).resolve().parent
        sweep = load_sweep(spec)
        # packed as a trial's job would be (its command may name the searched params)
        first = {k: p.placeholder() for k, p in sweep.searched().items()}
        job, blob, digest = prepare(sweep.job.with_params({**sweep.constants(), **first}), Path(base_dir or Path.cwd()))
        if digest is not None:
            self.http.upload_snapshot(blob, digest)
        data = job.model_dump(mode="json")
        data["params"] = {k: v for k, v in data["params"].items() if k not in sweep.parameters}
        body = {"spec": {**sweep.model_dump(mode="json"), "job": data}, "snapshot": digest}
        return SweepInfo.model_validate_json(self.http.json_call("POST", "/api/v1/sweeps", body=body))

    def list(self, include_ended: bool = True, limit: int | None = None) -> list[SweepInfo]:
        """Sweeps, newest first: all of them, or the first ``limit`` (read a page at a time)."""
        return paging.every(self.http, "/api/v1/sweeps", SweepInfo, limit=limit, all=include_ended)

    def page(self, limit: int = paging.LIST_LIMIT, cursor: str | None = None,
             include_ended: bool = True) -> paging.Page[SweepInfo]:
        """One page of sweeps, newest first; its ``next_cursor`` as ``cursor`` gives the next."""
        return paging.page(self.http, "/api/v1/sweeps", SweepInfo, limit=limit, cursor=cursor, all=include_ended)

    def get(self, key: str) -> SweepInfo:
        return SweepInfo.model_validate_json(self.http.request("GET", f"/api/v1/sweeps/{key}").content)

    def cancel(self, key: str) -> SweepInfo:
        return SweepInfo.model_validate_json(self.http.request("POST", f"/api/v1/sweeps/{key}/cancel").content)

    def delete(self, key: str) -> None:
        """An ended sweep with its trials' jobs (records and files); their usage stays counted."""
        self.http.request("DELETE", f"/api/v1/sweeps/{key}")

    def wait(self, key: str, timeout: float | None = None, every: float = 1.0) -> SweepInfo:
        """The sweep once it has ended; WaitTimeout after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            info = self.get(key)
            if info.status.is_terminal():
                return info
            if deadline is not None and time.monotonic() >= deadline:
                raise errors.WaitTimeout(f"sweep {key} still {info.status.value} after {timeout:g}s: {info.reason}")
            time.sleep(every)
