"""Schedules over HTTP: ``Client().schedule("nightly.yaml")``, a job submitted again and again on a cron.

```python
import trainyard
c = trainyard.Client()
s = c.schedule("nightly.yaml")            # its job's workdir is uploaded once, for every fire
print(s.explain, s.next_at)               # "At 03:00 every day", the next fire (Unix time)
run = c.schedules.trigger(s.id)           # fire now, out of the cron: run.job_id, or run.message saying why none
c.schedules.pause(s.name)                 # by id or by name
```
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

from pydantic import ValidationError

from trainyard.sdk import paging
from trainyard import errors
from trainyard.sdk.http import Http
from trainyard.spec.lines import error_entry, validation_errors
from trainyard.spec.schedule import PLACEHOLDER, SCHEDULED_AT, ScheduleInfo, ScheduleRun, ScheduleSpec



def load_schedule(spec: ScheduleSpec | dict[str, Any] | str | Path) -> ScheduleSpec:
    """A schedule spec from a YAML file, a dict or itself; errors name the field (and the file's line)."""
    if isinstance(spec, ScheduleSpec):
        return spec
    if isinstance(spec, (str, Path)):
        from trainyard.spec.lines import Written, compose
        from trainyard.spec.loader import read_model

        try:
            schedule = read_model(ScheduleSpec, spec)
        except errors.InvalidSpec as e:
            fields = {err.get("field") for err in e.errors}
            for key, kind in (("command", "job"), ("steps", "pipeline")):  # a job's or pipeline's file, not a schedule
                if key in fields and "cron" in fields:
                    e.errors.append(error_entry(str(spec), None, kind, f"this is a {kind} spec: schedule it with "
                                                f"`trainyard schedule create {spec} --cron '0 3 * * *'`"))
            raise errors.InvalidSpec(errors=e.errors) from None
        return schedule.read_from(Written(str(spec), compose(Path(spec).read_text(), str(spec))[1]))
    try:
        return ScheduleSpec.model_validate(spec)
    except ValidationError as e:
        raise errors.InvalidSpec(errors=validation_errors(e, {}, "<schedule>", ScheduleSpec)) from None


def job_schedule(path: str | Path, cron: str, *, name: str | None = None, timezone: str | None = None,
                 concurrency: str | None = None) -> ScheduleSpec:
    """A schedule of the job spec file ``path`` on ``cron`` (named as the job, unless ``name``); errors in
    the job name its line. The job's command may use ``{{params.scheduled_at}}`` without declaring it."""
    from trainyard.spec.lines import compose

    source = str(path)
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise errors.InvalidSpec(errors=[error_entry(source, None, "", f"cannot read: {e.strerror}")]) from None
    job, lines = compose(text, source)
    if not isinstance(job, dict):
        raise errors.InvalidSpec(errors=[error_entry(source, 1, "", "expected a job spec: a mapping of fields")])
    given = {"timezone": timezone, "concurrency": concurrency}
    data = {"name": name or job.get("name", "job"), "cron": cron, **{k: v for k, v in given.items() if v is not None},
            "job": job}
    if "steps" in job:  # a pipeline file: read and checked as a run of it is, when the schedule is created
        data = {**data, "name": name or job.get("name", "pipeline"), "job": None, "pipeline": str(Path(path).resolve())}
    try:
        return ScheduleSpec.model_validate(data)
    except ValidationError as e:
        at = {("job", *loc): line for loc, line in lines.items()}  # the job's lines, under `job`
        said = validation_errors(e, at, source, ScheduleSpec)
        # what the caller gave (trainyard schedule create --cron …) is no line of the file: named as a flag is
        flags = {"cron", *(k for k, v in given.items() if v is not None), *(["name"] if name else [])}
        for err in said:
            if err["field"] in flags and err["line"] is None:
                err["where"] = f"command line --{err['field']} ({err['field']})"
        raise errors.InvalidSpec(errors=said) from None


class Schedules:
    def __init__(self, http: Http) -> None:
        self.http = http

    def create(self, spec: ScheduleSpec | dict[str, Any] | str | Path,
               base_dir: str | Path | None = None) -> ScheduleInfo:
        """Create a schedule; its job's ``workdir`` (relative to the file's folder, or ``base_dir``) is
        packed and uploaded once, for every fire."""
        from trainyard.sdk.prepare import prepare

        if base_dir is None and isinstance(spec, (str, Path)):
            base_dir = Path(spec).resolve().parent
        schedule = load_schedule(spec)
        if schedule.pipeline is not None:
            return self._create_pipeline(schedule, Path(base_dir or Path.cwd()))
        assert schedule.job is not None
        # the job holds a placeholder `scheduled_at` (its command may name it): each fire is given its own
        job, blob, digest = prepare(schedule.job.with_params({SCHEDULED_AT: PLACEHOLDER}), Path(base_dir or Path.cwd()))
        if digest is not None:
            self.http.upload_snapshot(blob, digest)
        data = job.model_dump(mode="json")
        data["params"] = {k: v for k, v in data["params"].items() if k != SCHEDULED_AT}
        body = {"spec": {**schedule.model_dump(mode="json"), "job": data}, "snapshot": digest}
        return ScheduleInfo.model_validate_json(self.http.json_call("POST", "/api/v1/schedules", body=body))

    def _create_pipeline(self, schedule: ScheduleSpec, base_dir: Path) -> ScheduleInfo:
        """A pipeline's schedule: the pipeline read, checked and its workdirs uploaded as for a run of it."""
        from trainyard.sdk.pipelines import Pipelines

        target = schedule.pipeline
        run = Pipelines(self.http).prepare(base_dir / target if isinstance(target, str) else target,
                                           schedule.params or None, base_dir=base_dir, params_written=schedule.written)
        spec = {**schedule.model_dump(mode="json"), "pipeline": run["spec"], "params": run["params"]}
        body = {"spec": spec, "workdirs": run["workdirs"], "source": run["source"]}
        return ScheduleInfo.model_validate_json(self.http.json_call("POST", "/api/v1/schedules", body=body))

    def list(self, limit: int | None = None) -> list[ScheduleInfo]:
        """The schedules the caller may see, newest first, each with its latest few fires: all of them, or the
        first ``limit`` (read a page at a time)."""
        return paging.every(self.http, "/api/v1/schedules", ScheduleInfo, limit=limit)

    def page(self, limit: int = paging.LIST_LIMIT, cursor: str | None = None) -> paging.Page[ScheduleInfo]:
        """One page of schedules, newest first; its ``next_cursor`` as ``cursor`` gives the next."""
        return paging.page(self.http, "/api/v1/schedules", ScheduleInfo, limit=limit, cursor=cursor)

    def get(self, key: str) -> ScheduleInfo:
        """One schedule by id (``sc-…``) or name, with its latest fires, newest first."""
        return ScheduleInfo.model_validate_json(self.http.request("GET", _path(key)).content)

    def pause(self, key: str) -> ScheduleInfo:
        """No fire until resumed; the jobs it started go on."""
        return ScheduleInfo.model_validate_json(self.http.request("POST", _path(key, "pause")).content)

    def resume(self, key: str) -> ScheduleInfo:
        """Fires from now on; those due while it was paused are not made up."""
        return ScheduleInfo.model_validate_json(self.http.request("POST", _path(key, "resume")).content)

    def trigger(self, key: str) -> ScheduleRun:
        """Fire now, out of the cron (paused or not), as its concurrency policy allows: the job it started,
        or the outcome (skipped, failed) and a message saying why none was."""
        return ScheduleRun.model_validate_json(self.http.request("POST", _path(key, "trigger")).content)

    def delete(self, key: str) -> None:
        """Forget the schedule and its fires; the jobs it started are left as they are."""
        self.http.request("DELETE", _path(key))


def _path(key: str, action: str | None = None) -> str:
    return f"/api/v1/schedules/{quote(key, safe='')}" + (f"/{action}" if action else "")
