"""Labels: ``key: value`` pairs a user tags jobs with (``experiment: baseline``), listed and filtered on.

Shaped as Kubernetes labels are, so a key or value copied from one fits the other: a key is a name of up
to 63 characters (letters, digits, ``.``, ``_``, ``-``; a letter or digit first), with an optional prefix
and ``/`` (``team.example.com/owner``); a value is at most 63 such characters, or empty.
"""

from __future__ import annotations

import re
from typing import Annotated, Iterable

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

MAX_LABELS = 32
OWN = "trainyard.io/"  # the prefix of the labels trainyard puts on the jobs it submits (a sweep's trials…)
_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?"
# \Z, not $: $ also matches before a last newline, which a key or value must not end with
KEY = re.compile(rf"^(?:[a-z0-9](?:[a-z0-9.-]{{0,251}}[a-z0-9])?/)?{_NAME}\Z")
VALUE = re.compile(rf"^(?:{_NAME})?\Z")


def check_key(k: str) -> str:
    if not KEY.match(k):
        raise ValueError(f"label key {k!r}: up to 63 letters, digits, '.', '_' or '-', starting and ending with a "
                         "letter or digit, after an optional 'prefix/'")
    return k


def check_value(v: str) -> str:
    if not VALUE.match(v):
        raise ValueError(f"label value {v!r}: empty, or up to 63 letters, digits, '.', '_' or '-', starting and "
                         "ending with a letter or digit")
    return v


LabelKey = Annotated[str, AfterValidator(check_key)]
LabelValue = Annotated[str, AfterValidator(check_value)]


class LabelChange(BaseModel):
    """A change of a job's labels after submit (``trainyard label``, ``PATCH /api/v1/jobs/{id}/labels``): each
    key of ``labels`` set to its value, or removed where it is null; a label already set to another value
    changes only with ``overwrite`` (as ``kubectl label --overwrite``). trainyard's own (``trainyard.io/``)
    stay as it set them: the sweep, pipeline run or service a job belongs to is found by them."""

    model_config = ConfigDict(extra="forbid")
    labels: dict[LabelKey, LabelValue | None] = Field(min_length=1, max_length=2 * MAX_LABELS)
    overwrite: bool = Field(False, strict=True)

    @field_validator("labels")
    @classmethod
    def _not_own(cls, labels: dict[str, str | None]) -> dict[str, str | None]:
        if (key := own_key(labels)) is not None:
            raise ValueError(f"{key}: labels under {OWN} are trainyard's own and stay as it set them")
        return labels


class LabelsNow(BaseModel):
    """A job's labels after a change."""

    job_id: str
    labels: dict[str, str]


def with_own(labels: dict[str, str], **own: str) -> dict[str, str]:
    """``labels`` and trainyard's own over them (``sweep="s-1"`` as ``trainyard.io/sweep: s-1``), so that
    ``trainyard ls -l trainyard.io/sweep=s-1`` lists a sweep's trials. A value no label may hold is left out, and
    so are those past ``MAX_LABELS`` (a spec kept from before :func:`room_for_own` checked it)."""
    out = dict(labels)
    for k, v in own.items():
        key = own_label(k)
        if VALUE.match(v) and (key in out or len(out) < MAX_LABELS):
            out[key] = v
    return out


def own_label(name: str) -> str:
    """The key of trainyard's own label ``name`` (``dask_cluster`` as ``trainyard.io/dask-cluster``)."""
    return OWN + name.replace("_", "-")


def own_key(labels: Iterable[str]) -> str | None:
    """The first of ``labels``' keys under trainyard's own prefix, if any."""
    return next((k for k in labels if k.startswith(OWN)), None)


def not_own(labels: Iterable[str]) -> str | None:
    """What to say of a user's labels that take trainyard's own prefix (None when none does): the sweep, pipeline
    run or service a job belongs to is found by those, so a job of the user's own must not claim one."""
    key = own_key(labels)
    return None if key is None else (f"{key}: labels under {OWN} are trainyard's own; it sets them on the jobs it "
                                     "submits (a sweep's trials, a run's steps, a service's replicas)")


def room_for_own(labels: dict[str, str], n: int, what: str, submitted: bool = True) -> None:
    """ValueError unless ``labels`` (a template's) leave room for ``n`` of trainyard's own (``what`` says whose)
    and, when ``submitted`` (not read back from the database), claim none of them."""
    if submitted and (why := not_own(labels)) is not None:
        raise ValueError(why)
    if len(labels) > MAX_LABELS - n:
        raise ValueError(f"at most {MAX_LABELS - n} labels here: {what}")
