"""A sweep: a hyperparameter search whose trials are jobs, and whose bad trials stop early.

```yaml
name: digits-search
job:                                   # each trial runs this job with the sampled params
  command: python train.py --lr {{params.lr}} --depth {{params.depth}}
  workdir: .
  resources: {cpu: 1}
parameters:
  lr: {min: 0.0001, max: 0.1, log: true}   # a float range (log: sampled on a log scale)
  depth: {values: [2, 4, 8]}               # one of these
  layers: {min: 1, max: 4}                 # whole numbers when both ends are
  seed: 7                                  # the same in every trial
metric: {name: val_acc, goal: maximize}   # what each trial logs (trainyard.log_metrics); its last value counts
method: tpe                                # tpe (Optuna's default), random, or grid (every combination of values)
trials: 20                                 # at most this many
parallel: 2                                # at most this many at once
early_stopping: {type: median, warmup_steps: 2, min_trials: 3}
```

The parameter forms are Weights & Biases' (``values``, ``min``/``max``), the search and the
early stopping Optuna's (TPE, random; median and Hyperband pruning).
"""

from __future__ import annotations

import itertools
import math
from enum import Enum
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, Field, ValidationInfo, field_validator, model_validator

from trainyard.spec.job import JobSpec, Strict, check_name
from trainyard.spec.labels import room_for_own, with_own
from trainyard.spec.params import check_finite
from trainyard.spec.records import Digest
from trainyard.spec.submitted import STORED, as_stored, submitting
from trainyard.spec.units import Count

Scalar = Union[str, int, float, bool, None]
MAX_TRIALS = 10_000  # each trial is a job: a row, a place in line
MAX_VALUES = 1000  # of one ``values`` list
# A stepped range is a grid; more points than a float's 53-bit mantissa can count apart is no grid at all, and a
# seed searched over 0 … 2**32 - 1 still fits
MAX_STEPS = 2**53
MAX_EXACT = 2**53  # a range's ends are floats: whole numbers past this are not held exactly


class Param(Strict):
    """One searched parameter: ``values`` to choose from, or a ``min``…``max`` range."""

    values: list[Scalar] | None = Field(None, description="choose one of these")
    min: float | None = Field(None, description="the range's low end (whole numbers when both ends are)")
    max: float | None = Field(None, description="the range's high end, included")
    log: bool = Field(False, description="sample the range on a log scale (both ends > 0)")
    step: float | None = Field(None, gt=0, description="only values min + k × step")
    integer: bool = False  # set from the ends as written: 1 and 4 are a range of whole numbers

    @model_validator(mode="before")
    @classmethod
    def _ints(cls, data: Any) -> Any:
        if isinstance(data, dict) and "integer" not in data:
            ends = [data.get("min"), data.get("max")]
            step = data.get("step")
            data = {**data, "integer": all(isinstance(x, int) and not isinstance(x, bool) for x in ends)
                    and (step is None or (isinstance(step, int) and not isinstance(step, bool)))}
        return data

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> "Param":
        ranged = self.min is not None or self.max is not None
        if self.values is not None:
            if ranged or self.log or self.step is not None:
                raise ValueError("give values, or min and max, not both")
            if not self.values or len(self.values) > MAX_VALUES:
                raise ValueError(f"values: give 1 to {MAX_VALUES} of them")
            if any(isinstance(v, float) and not math.isfinite(v) for v in self.values):
                raise ValueError("values: every number must be finite")
            return self
        if self.min is None or self.max is None:
            raise ValueError("give values: [...], or both min and max")
        if not (math.isfinite(self.min) and math.isfinite(self.max)) or self.min > self.max:
            raise ValueError(f"min {self.min:g} must be a finite number at most max {self.max:g}")
        if self.log and self.min <= 0:
            raise ValueError("log: a log-scale range needs min > 0")
        if self.log and self.step is not None:
            raise ValueError("step and log cannot go together")
        if submitting(info):  # a sweep stored before these checks loads, and its loop fails it with the reason
            self._samplable()
        return self

    def _samplable(self) -> None:
        """ValueError unless Optuna can sample the range: it works out a stepped range's grid in decimals (which
        give out near 1e28 steps) and draws a float range across max - min (which must be a float itself)."""
        assert self.min is not None and self.max is not None
        if self.integer and max(abs(self.min), abs(self.max)) > MAX_EXACT:
            raise ValueError(f"a range of whole numbers must lie within ±{MAX_EXACT:,} (2**53): beyond that a "
                             "number is not held exactly")
        if not math.isfinite(self.max - self.min):
            raise ValueError(f"max - min ({self.max:g} - {self.min:g}) is too large a span for a float; narrow it or "
                             "give log: true")
        if self.step is not None and not math.isfinite(self.step):
            raise ValueError("step must be a finite number")
        step = self.step or (1 if self.integer else None)
        if step is not None and (self.max - self.min) / step > MAX_STEPS:
            raise ValueError(f"the range has {(self.max - self.min) / step:.3g} steps of {step:g}; at most "
                             f"{MAX_STEPS:,}: give a larger step, or none for a float range")

    def placeholder(self) -> Any:
        """A value of this parameter (to check the trial job's spec before any trial is sampled)."""
        if self.values is not None:
            return self.values[0]
        return int(self.min) if self.integer else self.min  # type: ignore[arg-type]


class Metric(Strict):
    name: str = Field(min_length=1, max_length=255, description="a metric each trial logs")
    goal: Literal["maximize", "minimize"] = "maximize"
    use: Literal["last", "best"] = Field("last", description="a trial's value: its last logged, or its best")


class EarlyStopping(Strict):
    """Optuna's pruners, fed each trial's ``metric`` by step as it logs it."""

    type: Literal["median", "hyperband"]
    warmup_steps: Count = Field(0, description="median: steps a trial runs before it can be stopped")
    min_trials: Count = Field(1, description="median: trials that must have finished before any is stopped")
    min_steps: Count = Field(1, ge=1, description="hyperband: the fewest steps a trial gets")
    max_steps: Count = Field(100, ge=1, description="hyperband: the steps of a whole trial")
    reduction_factor: Count = Field(3, ge=2, description="hyperband: 1 in this many trials go on at each rung")

    @field_validator("warmup_steps", "min_trials", "min_steps", "max_steps", "reduction_factor")
    @classmethod
    def _of_its_type(cls, v: int, info: ValidationInfo) -> int:
        # a field of the other rule was ignored: not the early stopping asked for. Its default passes: the SDK
        # sends a spec dumped whole
        kind = "hyperband" if info.field_name in ("min_steps", "max_steps", "reduction_factor") else "median"
        default = cls.model_fields[info.field_name or ""].default
        if submitting(info) and info.data.get("type") not in (None, kind) and v != default:
            raise ValueError(f"{info.field_name} is a {kind} setting; this rule is type {info.data['type']}")
        return v

    @field_validator("max_steps")
    @classmethod
    def _past_min(cls, v: int, info: ValidationInfo) -> int:
        # Optuna's Hyperband makes no bracket when max_steps < min_steps: it silently stopped no trial at all
        low = info.data.get("min_steps")
        if submitting(info) and low is not None and v < low:
            raise ValueError(f"max_steps {v} is under min_steps {low}: a trial runs from min_steps up to max_steps")
        return v


class SweepSpec(Strict):
    name: str = "sweep"
    job: JobSpec
    parameters: dict[str, Param | Scalar] = Field(description="searched: {values} or {min, max}; else the same "
                                                  "value in every trial")
    metric: Metric
    method: Literal["tpe", "random", "grid"] = "tpe"
    trials: Count | None = Field(None, ge=1, le=MAX_TRIALS, description="at most; default 10 (grid: every "
                                 "combination)")
    parallel: Count = Field(1, ge=1, le=1000, description="trials running at once")
    max_failures: Count | None = Field(None, description="the sweep fails once this many trials have failed; "
                                       "default: when every one of the first `parallel` + 2 has")
    early_stopping: EarlyStopping | None = None
    seed: int | None = Field(None, ge=0, le=2**32 - 1, description="the sampler's seed: the same trials again")

    @model_validator(mode="before")
    @classmethod
    def _job_params(cls, data: Any) -> Any:
        """The trial job is checked with each parameter given (its command may name them), as a trial will be."""
        if isinstance(data, dict) and isinstance(data.get("job"), dict) and isinstance(data.get("parameters"), dict):
            given = {}
            for k, v in data["parameters"].items():
                try:
                    given[k] = Param.model_validate(v).placeholder() if isinstance(v, dict) else v
                except ValueError:
                    given[k] = 0  # the parameter's own error is reported at its field
                if isinstance(given[k], float) and not math.isfinite(given[k]):
                    given[k] = 0  # … as is a constant that is no number JSON can hold
            data = {**data, "job": {**data["job"], "params": {**(data["job"].get("params") or {}), **given}}}
        return data

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return check_name(v)  # type: ignore[return-value]

    @field_validator("parameters")
    @classmethod
    def _parameters(cls, v: dict[str, Any]) -> dict[str, Any]:
        if not any(isinstance(p, Param) for p in v.values()):
            raise ValueError("give at least one searched parameter ({values: [...]} or {min: …, max: …})")
        check_finite({k: p for k, p in v.items() if not isinstance(p, Param)})
        return v

    @field_validator("early_stopping")
    @classmethod
    def _prunable(cls, v: EarlyStopping | None, info: ValidationInfo) -> EarlyStopping | None:
        # Optuna's median rule stops no trial until min_trials have finished: at max_trials or more, none ever is
        if v is None or v.type != "median" or not submitting(info) or "parameters" not in info.data:
            return v
        params = info.data["parameters"]
        grid = math.prod(len(p.values or ()) for p in params.values() if isinstance(p, Param))
        most = trials_at_most(info.data.get("method", "tpe"), info.data.get("trials"), grid)
        if most and v.min_trials >= most:  # (0: a grid over a range, refused at its own check)
            raise ValueError(f"min_trials {v.min_trials}: the sweep runs at most {most} trials, so none would ever "
                             "be stopped; give fewer")
        return v

    @field_validator("job")
    @classmethod
    def _room(cls, v: JobSpec, info: ValidationInfo) -> JobSpec:
        room_for_own(v.labels, 2, "each trial also gets trainyard.io/sweep and trainyard.io/trial", submitting(info))
        return v

    @model_validator(mode="after")
    def _grid(self) -> "SweepSpec":
        for k in self.parameters:  # given to every trial by the sweep: the placeholders above are not kept
            self.job.params.pop(k, None)
        if self.method == "grid":
            ranged = [k for k, p in self.searched().items() if p.values is None]
            if ranged:
                raise ValueError(f"method grid tries every combination of values: give {', '.join(ranged)} as "
                                 "values: [...]")
            if self.grid_size() > MAX_TRIALS:
                raise ValueError(f"the grid has {self.grid_size():,} combinations; at most {MAX_TRIALS:,}")
        return self

    def searched(self) -> dict[str, Param]:
        return {k: p for k, p in self.parameters.items() if isinstance(p, Param)}

    def constants(self) -> dict[str, Any]:
        return {k: p for k, p in self.parameters.items() if not isinstance(p, Param)}

    def grid_size(self) -> int:
        return math.prod(len(p.values or ()) for p in self.searched().values())

    def grid(self) -> list[dict[str, Any]]:
        """Every combination of the searched values, in order (method grid)."""
        names = list(self.searched())
        return [dict(zip(names, combo)) for combo in itertools.product(*(self.parameters[n].values for n in names))]

    @property
    def max_trials(self) -> int:
        return trials_at_most(self.method, self.trials, self.grid_size())

    @property
    def failures_allowed(self) -> int:
        return self.max_failures if self.max_failures is not None else self.parallel + 2

    def trial_job(self, number: int, params: dict[str, Any], sweep_id: str = "", stored: bool = False) -> JobSpec:
        """Trial ``number``'s job: the job with the constants and the sampled ``params``, labelled with the
        sweep's id and its number (``trainyard.io/sweep``, ``trainyard.io/trial``). ``stored``: of a sweep read
        back (checked when it was made, under the rules of then: a bound added since must not fail it)."""
        data = self.job.model_dump(mode="json", exclude_unset=True)
        data["name"] = f"{self.name}-{number}"[:63]
        data["params"] = {**self.job.params, **self.constants(), **params}
        data["labels"] = with_own(self.job.labels, sweep=sweep_id, trial=str(number))
        return JobSpec.model_validate(data, context=STORED if stored else None)


def trials_at_most(method: str, trials: int | None, grid_size: int) -> int:
    """How many trials a sweep runs at most: ``trials`` (default 10), and a grid's combinations."""
    if method == "grid":
        return min(trials or MAX_TRIALS, grid_size)
    return trials or 10


class SweepStatus(str, Enum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"  # every trial ended, at least one with a value
    FAILED = "failed"  # too many trials failed, or none gave a value
    CANCELLED = "cancelled"

    def is_terminal(self) -> bool:
        return self is not SweepStatus.RUNNING


class TrialState(str, Enum):
    RUNNING = "running"
    COMPLETE = "complete"  # ended, with a value
    PRUNED = "pruned"  # stopped early: worse than the others at the same step
    FAILED = "failed"  # its job failed, or it logged no value of the metric
    CANCELLED = "cancelled"  # the sweep was cancelled, or ended, while it ran

    def is_terminal(self) -> bool:
        return self is not TrialState.RUNNING


class TrialInfo(BaseModel):
    number: int
    job_id: str
    params: dict[str, Any]
    state: TrialState
    value: float | None = None
    step: int | None = None  # the last step of the metric seen
    reason: str | None = None
    created_at: float
    ended_at: float | None = None


class SweepInfo(BaseModel):
    id: str
    name: str
    status: SweepStatus
    reason: str | None = None
    spec: Annotated[SweepSpec, as_stored(SweepSpec)]
    owner: str | None = None
    team: str | None = None
    best: TrialInfo | None = None
    counts: dict[TrialState, int] = Field(default_factory=dict, description="trials started, by state")
    trials: list[TrialInfo] = Field(default_factory=list, description="every trial (left out of the list)")
    created_at: float
    updated_at: float
    ended_at: float | None = None


class SweepCreate(BaseModel):
    """``POST /api/v1/sweeps``: the spec, and the trial job's code snapshot if it has a ``workdir``."""

    spec: SweepSpec
    snapshot: Digest | None = None
