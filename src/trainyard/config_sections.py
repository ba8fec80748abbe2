"""The sections of a server's ``--config`` file that are models of their own (cli/server_config.py reads the file):
prices, the planner's options, retention and webhooks. :mod:`trainyard.config` re-exports them."""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, field_validator, model_validator

PRICE_MAX = 1e9


class Prices(BaseModel):
    """What an hour of each resource costs, for ``trainyard usage`` in money."""

    # a NaN or an infinity would make every sum of `trainyard usage` one; past a billion an hour is a typo
    model_config = {"extra": "forbid", "allow_inf_nan": False}
    currency: str = "USD"
    gpu_hour: dict[str, float] = Field(default_factory=dict,
                                       description="per GPU type; '*' for types not named")
    cpu_hour: float = Field(0.0, ge=0, le=PRICE_MAX, description="per core-hour")
    memory_gib_hour: float = Field(0.0, ge=0, le=PRICE_MAX, description="per GiB-hour")

    @model_validator(mode="after")
    def _no_negative(self) -> "Prices":
        bad = [k for k, v in self.gpu_hour.items() if not 0 <= v <= PRICE_MAX]
        if bad:
            raise ValueError(f"prices.gpu_hour.{bad[0]}: must be ≥ 0 and at most {PRICE_MAX:.0e}")
        return self


class SchedulerSettings(BaseModel):
    """The planner's options (``trainyard.scheduler.cycle.Options``, where each is explained with what it did on
    the simulated days of bench/scheduler.py) that a server's ``--config`` may set under ``scheduler:``; the
    defaults are the planner's (a unit test keeps them equal). Durations in seconds; None turns one off."""

    model_config = {"extra": "forbid", "allow_inf_nan": False}
    max_reservations: int = Field(1, ge=0, le=1000, description="jobs at the head of the line that hold nodes")
    reserve_after: float | None = Field(None, ge=0, description="a job holds nodes once it has waited this long")
    fair_share_wait: float | None = Field(4 * 3600.0, ge=0, description="waiting longer goes ahead of fair share")
    preempt_within: float | None = Field(300.0, ge=0, description="priority stops timed work only this young")
    stop_untimed_after: float | None = Field(4 * 3600.0, ge=0, description="... and untimed work only for a job "
                                             "waiting this long")
    reclaim_within: float | None = Field(300.0, ge=0, description="a lender stops borrowed work only this young")
    reclaim_after: float | None = Field(3600.0, ge=0, description="... and any borrowed work once its job has "
                                        "waited this long")
    starve_after: float | None = Field(None, ge=0, description="waiting longer goes first in line")
    max_starved: int = Field(4, ge=0, le=1000, description="starved jobs put first in one cycle")
    reserve_borrowing_after: float | None = Field(None, ge=0, description="a borrowing whole-node job holds "
                                                  "nodes once it has waited this long")


class RetentionSettings(BaseModel):
    """How long what ended attempts leave on their nodes, and ended jobs themselves, are kept (``retention:`` in
    the server's ``--config``). Seconds; None keeps it for ever."""

    model_config = {"extra": "forbid", "allow_inf_nan": False}
    work_dirs: float | None = Field(3 * 86400.0, ge=0, description="an ended attempt's folders on its nodes but "
                                    "their records (log, metrics, result): the work dir with what the job wrote "
                                    "there, the outputs as written (uploaded when it ended), its own virtualenv")
    checkpoints: float | None = Field(None, ge=0, description="an ended job's checkpoints (its folder on each "
                                      "node, and its sets in an object store); a job retried later starts over")
    jobs: float | None = Field(None, ge=0, description="an ended job itself, as `trainyard rm` deletes it: its "
                               "records (attempts, logs, metrics, events), its files on the nodes and in the "
                               "artifact store; what it used stays in `trainyard usage`. An ended sweep goes "
                               "with its trials' jobs, an ended pipeline run with its steps' jobs (once no newer "
                               "run reuses its outputs); replicas of services are kept")
    snapshots: float | None = Field(7 * 86400.0, ge=0, description="a code snapshot that nothing names (no "
                                    "job, sweep, service, schedule or pipeline run), this long after it was "
                                    "uploaded: one a job was refused with, or whose jobs were deleted")
    keep: str | None = Field("keep=true", max_length=1024, description="a label selector (`keep=true`, "
                             "`tier in (gold,silver)`): an ended job whose labels match it is never deleted by "
                             "the `jobs` retention, nor the sweep or pipeline run it belongs to "
                             "(`trainyard label JOB keep=true` pins one); empty or null: none is kept so")
    every: float = Field(600.0, gt=0, le=86400, description="seconds between the leader's sweeps")


class WebhookSettings(BaseModel):
    """One webhook of the server's config."""

    model_config = {"extra": "forbid", "allow_inf_nan": False}

    url: str = Field(description="http:// or https:// address the events are POSTed to")
    format: Literal["json", "slack"] = Field("json", description="json: the event; slack: {text} for an "
                                             "incoming webhook (Slack, Mattermost, Rocket.Chat)")
    teams: list[str] | None = Field(None, description="the teams whose users may subscribe it; default all")
    timeout: float = Field(5.0, gt=0, le=60, description="seconds to wait for its answer")

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        parts = urlsplit(v)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("an http:// or https:// address")
        return v
