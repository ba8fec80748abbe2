"""A schedule: a job submitted again and again on a cron schedule (retrain every night, evaluate every hour).

```yaml
name: nightly-retrain
cron: "0 3 * * *"           # five fields (minute hour day month weekday), or @daily
timezone: Europe/Paris      # the cron's clock (IANA name); default UTC
concurrency: forbid         # forbid: skip a fire while the last run still runs; allow; replace: cancel it
starting_deadline: 1h       # a fire the server could not make within this (it was down) is missed, not late
job:                        # an ordinary job spec; {{params.scheduled_at}} is the fire's time (ISO 8601)
  command: python train.py --until {{params.scheduled_at}}
  workdir: .
```

Or a pipeline, as Kubeflow's recurring runs (``pipeline:`` a pipeline file next to the schedule's,
read and sent by the CLI or SDK as a pipeline run's is, with ``params:`` for it; a pipeline that
declares a ``scheduled_at`` param is given the fire's time in it).

The forms are Kubernetes CronJob's (``concurrencyPolicy``, ``startingDeadlineSeconds``,
``suspend``, ``timeZone``); the cron syntax is Debian cron's, read by ``cronsim``.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from enum import Enum
from functools import lru_cache
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, PrivateAttr, ValidationInfo, field_validator, model_validator

from trainyard.spec.job import JobSpec, Strict, check_name
from trainyard.spec.labels import room_for_own, with_own
from trainyard.spec.lines import Written
from trainyard.spec.params import check_finite
from trainyard.spec.records import Digest
from trainyard.spec.units import Seconds, parse_duration
from trainyard.spec.submitted import as_stored, submitting

ALIASES = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
           "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}
SCHEDULED_AT = "scheduled_at"  # the param each run is given: the time it was due, ISO 8601 in the schedule's zone
PLACEHOLDER = "1970-01-01T00:00:00+00:00"  # its value while the spec is checked
MAX_CRON = 200  # characters of a cron expression
COUNT_CAP = 1000  # missed fires counted one by one at most (an every-second cron down for a day: "1000 or more")


class Concurrency(str, Enum):
    FORBID = "forbid"  # a fire while the last run has not ended is skipped
    ALLOW = "allow"    # runs may overlap
    REPLACE = "replace"  # the runs still going are cancelled, then the new one is submitted


def expand(cron: str) -> str:
    """The expression with an ``@daily``-style alias written out."""
    return ALIASES.get(cron.strip().lower(), cron.strip())


@lru_cache(maxsize=256)
def zone(name: str) -> Any:
    """The time zone named ``name`` (``UTC``, ``Europe/Paris``); ValueError naming it otherwise."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    if not name or len(name) > 64:
        raise ValueError("name a time zone such as UTC or Europe/Paris")
    try:  # ZoneInfo refuses absolute and ../ keys itself: no file outside the zone database is read
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError(f"{name!r} is not a time zone this server knows (e.g. UTC, Europe/Paris)") from None


def _fires(cron: str, tz: str, at: float, reverse: bool = False) -> Any:
    from cronsim import CronSim

    return CronSim(expand(cron), datetime.fromtimestamp(at, zone(tz)), reverse=reverse)


def next_fire(cron: str, tz: str, after: float) -> float | None:
    """The first time the schedule is due strictly after ``after`` (seconds since the epoch); None if never.

    Checked against ``after`` itself: in the hour a clock going back repeats, cronsim (by Debian cron's
    rule, a fixed-time job is not run twice) may name the first pass's fire, which is already past."""
    for n, when in enumerate(_fires(cron, tz, math.floor(after) + 0.5)):  # +.5: not ``after``'s own second
        if when.timestamp() > after:
            return when.timestamp()
        if n >= COUNT_CAP:
            break
    return None


def last_fire(cron: str, tz: str, at: float) -> float | None:
    """The latest time the schedule was due at or before ``at``; None if never (consistent with
    :func:`next_fire`: the fire after it is later than ``at``)."""
    try:
        latest = next(_fires(cron, tz, math.floor(at) + 0.5, reverse=True)).timestamp()
    except StopIteration:
        return None
    for _ in range(COUNT_CAP):
        later = next_fire(cron, tz, latest)
        if later is None or later > at:
            break
        latest = later
    return latest


def fires_between(cron: str, tz: str, start: float, end: float) -> int:
    """How many times the schedule was due strictly between ``start`` and ``end``, counted up to COUNT_CAP."""
    n, it = 0, _fires(cron, tz, math.floor(start) + 0.5)
    for when in it:
        if when.timestamp() >= end or n >= COUNT_CAP:
            break
        n += 1
    return n


def cron_problem(cron: str) -> str | None:
    """Why ``cron`` is no cron a schedule may have now (other than five fields), or None.

    cronsim reads a sixth field as seconds first: an every-second schedule nobody who knows cron or a CronJob
    expects. Submits are refused with this; a schedule stored with one before is held paused with it."""
    fields = len(cron.split())
    if cron.strip().startswith("@") or fields == 5:
        return None
    return (f"{cron!r} has {fields} field{'s' * (fields != 1)}; a cron has five: minute hour day-of-month month "
            "day-of-week (e.g. '0 3 * * *'), or @hourly, @daily, @weekly, @monthly, @yearly")


def explain(cron: str) -> str:
    """``At 03:00 every day``; the expression itself where cronsim cannot say it in words."""
    try:
        from cronsim.explain import explain as words

        return words(expand(cron))
    except Exception:  # noqa: BLE001  (words are a courtesy; the expression was checked already)
        return cron


def iso(at: float, tz: str) -> str:
    return datetime.fromtimestamp(at, zone(tz)).isoformat()


class ScheduleSpec(Strict):
    name: str = Field(description="unique in its team; `trainyard schedule pause NAME`")
    cron: str = Field(description="five fields: minute hour day-of-month month day-of-week; or @hourly, @daily, "
                      "@weekly, @monthly, @yearly")
    timezone: str = Field("UTC", description="the cron's clock, an IANA name such as Europe/Paris")
    concurrency: Concurrency = Field(Concurrency.FORBID, description="forbid (skip while the last run runs), "
                                     "allow, or replace (cancel it)")
    starting_deadline: Seconds = Field(3600.0, description="a fire not made within this (the server was down) "
                                       "is recorded as missed; seconds or e.g. 10m")
    suspend: bool = Field(False, description="created paused: no fire until resumed")
    job: JobSpec | None = Field(None, description="the job each fire submits")
    pipeline: dict[str, Any] | str | None = Field(None, description="or the pipeline each fire runs: its file, "
                                                  "beside the schedule's (the CLI and SDK send it read)")
    params: dict[str, Any] = Field(default_factory=dict, description="with pipeline: overrides of its params")
    # the file it was read from, with each key's line: a param its pipeline does not declare is found only once
    # that is read, and is said at the schedule's own line
    _written: Written | None = PrivateAttr(None)

    @property
    def written(self) -> Written | None:
        """The file this spec was read from and the line of each key in it; None for one not read from a file."""
        return self._written

    def read_from(self, written: Written) -> ScheduleSpec:
        """This spec, as read from ``written``."""
        self._written = written
        return self

    @field_validator("params")
    @classmethod
    def _params(cls, v: dict[str, Any]) -> dict[str, Any]:
        return check_finite(v)

    @field_validator("pipeline")
    @classmethod
    def _pipeline(cls, v: dict[str, Any] | str | None) -> dict[str, Any] | str | None:
        # stored as written and read at each fire: a NaN became null there, and every fire failed
        return check_finite(v) if isinstance(v, dict) else v

    @field_validator("job")
    @classmethod
    def _room(cls, v: JobSpec | None, info: ValidationInfo) -> JobSpec | None:
        if v is not None:
            room_for_own(v.labels, 1, "each run also gets trainyard.io/schedule", submitting(info))
        return v

    @model_validator(mode="after")
    def _one_target(self) -> "ScheduleSpec":
        if (self.job is None) == (self.pipeline is None):
            raise ValueError("give a job spec under job:, or a pipeline file under pipeline: (one of them)")
        if self.params and self.pipeline is None:
            raise ValueError("params: are a pipeline's (a job's go under job.params)")
        return self

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return check_name(v)  # type: ignore[return-value]

    @field_validator("starting_deadline", mode="before")
    @classmethod
    def _deadline(cls, v: Any) -> Any:
        return parse_duration(v) if isinstance(v, str) else v

    @field_validator("starting_deadline")
    @classmethod
    def _deadline_room(cls, v: float) -> float:
        if v < 1:  # the loop wakes a moment after a fire is due: under a second, every fire would be missed
            raise ValueError("at least 1s")
        return v

    @field_validator("cron")
    @classmethod
    def _cron(cls, v: str, info: ValidationInfo) -> str:
        if len(v) > MAX_CRON:
            raise ValueError(f"at most {MAX_CRON} characters")
        # a schedule stored with other than five fields before this check still loads (one old row must not
        # fail every listing), and the loop holds it paused instead (cron_problem)
        if submitting(info) and (problem := cron_problem(v)) is not None:
            raise ValueError(problem)
        from cronsim import CronSimError

        try:
            _fires(v, "UTC", 0.0)
        except CronSimError as e:
            raise ValueError(f"{v!r} is not a cron expression ({e}); e.g. '0 3 * * *' or @daily") from None
        return v.strip()

    @field_validator("timezone")
    @classmethod
    def _zone(cls, v: str) -> str:
        zone(v)
        return v

    @model_validator(mode="before")
    @classmethod
    def _job_params(cls, data: Any) -> Any:
        """The job is checked with ``scheduled_at`` given (its command may name it), as each run will be."""
        if isinstance(data, dict) and isinstance(data.get("job"), dict):
            params = data["job"].get("params")
            if params is not None and not isinstance(params, dict):
                return data  # the job's own check names it
            given = {**(params or {})}
            given.setdefault(SCHEDULED_AT, PLACEHOLDER)
            data = {**data, "job": {**data["job"], "params": given}}
        return data

    @model_validator(mode="after")
    def _fires_at_all(self) -> "ScheduleSpec":
        if next_fire(self.cron, self.timezone, 0.0) is None:
            raise ValueError(f"cron {self.cron!r} never fires")
        if self.job is not None and self.job.params.get(SCHEDULED_AT) == PLACEHOLDER:
            del self.job.params[SCHEDULED_AT]  # checked with it; kept (and shown) without: each fire gives its own
        return self

    def run_job(self, at: float) -> JobSpec:
        """The job of the fire due at ``at``, labelled with the schedule's name (``trainyard.io/schedule``)."""
        assert self.job is not None
        job = self.job.with_params({SCHEDULED_AT: iso(at, self.timezone)})
        return job.model_copy(update={"labels": with_own(job.labels, schedule=self.name)})

    def run_params(self, at: float) -> dict[str, Any]:
        """The pipeline's param overrides for the fire due at ``at``: ``scheduled_at`` where it declares it."""
        declared = self.pipeline.get("params") if isinstance(self.pipeline, dict) else None
        if isinstance(declared, dict) and SCHEDULED_AT in declared:
            return {**self.params, SCHEDULED_AT: iso(at, self.timezone)}
        return dict(self.params)


class ScheduleCreate(BaseModel):
    """``POST /api/v1/schedules``: the spec, and its job's code snapshot if it has a ``workdir`` (for a
    pipeline: its steps' snapshots by workdir, and where the file came from), uploaded once for every fire."""

    spec: ScheduleSpec
    snapshot: Digest | None = None
    workdirs: dict[str, Digest] = Field(default_factory=dict)
    source: str | None = Field(None, max_length=1000, pattern=r"^[^\x00]*$")  # no NUL: PostgreSQL refuses it


Outcome = Literal["started", "skipped", "missed", "failed"]
OUTCOMES: tuple[str, ...] = Outcome.__args__  # type: ignore[attr-defined]


class ScheduleRun(BaseModel):
    """One fire: the job it started, or why none was."""

    at: float = Field(description="when it was due")
    fired_at: float
    outcome: Outcome
    job_id: str | None = None
    run_id: str | None = Field(None, description="the pipeline run it started")
    message: str | None = None
    manual: bool = False  # `trainyard schedule trigger`, not the cron
    gone: bool = Field(False, description="its job or pipeline run was deleted since (rm, or the jobs retention)")


class ScheduleInfo(BaseModel):
    id: str
    name: str
    team: str | None = None
    owner: str | None = None
    spec: Annotated[ScheduleSpec, as_stored(ScheduleSpec)]
    suspended: bool
    held: str | None = Field(None, description="why the server holds it paused, whatever it was asked: its "
                             "stored cron is no longer one a schedule may have (created again with a right one, "
                             "it fires)")
    next_at: float | None = Field(None, description="the next fire; None while suspended")
    last_at: float | None = None
    explain: str = Field("", description="the cron in words")
    active: list[str] = Field(default_factory=list, description="jobs (or pipeline runs) it started that have not "
                                "ended")
    runs: list[ScheduleRun] = Field(default_factory=list, description="the latest fires, newest first")
    created_at: float
    updated_at: float


def after_deadline(spec: ScheduleSpec, due: float, now: float) -> bool:
    return now - due > spec.starting_deadline


def describe_gap(seconds: float) -> str:
    return str(timedelta(seconds=round(seconds)))
