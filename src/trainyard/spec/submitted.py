"""What a job spec's strings may hold beyond their types: an image, output globs, pip items, GPU types and
environment values that reach a command line, a path or a node selector are checked when a spec is submitted.

A spec read back from the database is validated with :data:`STORED` as its context, and these checks (and
any others written with :func:`submitting`) let it pass: a job or sweep stored before a check existed must
still load, or one old row would fail every listing and every scheduling cycle that reads it.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ValidationInfo

from trainyard.spec.params import render

STORED: dict[str, Any] = {"stored": True}  # model_validate(..., context=STORED) for a spec read from the database


def submitting(info: ValidationInfo | None) -> bool:
    """Whether a spec is being submitted (checked in full), not read back from the database."""
    return not (info is not None and isinstance(info.context, dict) and info.context.get("stored"))


def as_stored(model: type[BaseModel]) -> BeforeValidator:
    """For a record's ``spec`` (``Annotated[JobSpec, as_stored(JobSpec)]``): what the server answers is what it
    stored, so the SDK reads it as the store does."""
    return BeforeValidator(lambda v: model.model_validate(v, context=STORED) if isinstance(v, dict) else v)


# Docker's reference grammar, [registry[:port]/]path[:tag][@algorithm:hex], with upper case allowed where
# Docker's is lower only (podman and registries differ there, and a case slip is for the pull to report).
_COMPONENT = r"[A-Za-z0-9]+(?:(?:[._]|__|-+)[A-Za-z0-9]+)*"
_IMAGE = re.compile(rf"(?:{_COMPONENT}(?::[0-9]{{1,5}})?/)?{_COMPONENT}(?:/{_COMPONENT})*"
                    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[+._-][A-Za-z0-9]+)*"
                    r":[0-9a-fA-F]{32,})?")
MAX_IMAGE = 512  # Docker allows 255 for the name; a tag (128) and a digest come on top


def image_ref(v: str, info: ValidationInfo) -> str:
    # the image is one word of podman's and docker's argv: one that starts with '-' is read as an option there
    if submitting(info) and (len(v) > MAX_IMAGE or not _IMAGE.fullmatch(v)):
        raise ValueError(f"{v[:80]!r} is not an image reference: [registry[:port]/]name[:tag][@sha256:hex], "
                         "e.g. python:3.11 or ghcr.io/org/trainer:1.2 (no spaces, no leading '-')")
    return v


def output_glob(v: str, info: ValidationInfo) -> str:
    # the launcher skips these (it uploads only from the work dir); saying so at submit beats a silent skip
    if submitting(info) and (not v.strip() or v.startswith(("/", "~")) or _climbs(v)):
        raise ValueError(f"{v!r}: an output is a glob inside the work dir (e.g. model/*.pt): not empty, not an "
                         "absolute path, no '..'")
    return v


def pip_requirement(v: str, info: ValidationInfo) -> str:
    """A package requirement ("torch==2.3", "pkg[extra]>=1", "pkg @ https://…", a URL, or a path in the work
    dir such as ./mypkg); pip's options are refused, since the items are pip's own argv."""
    item = v.strip()
    if not submitting(info):
        return item
    if not item or any(word.startswith("-") for word in item.split()):
        raise ValueError(f"{v!r}: give package requirements (e.g. pandas>=2), not pip options")
    path = item.removeprefix("file:")
    if item.startswith(("/", "~", "file:")) or _climbs(path):
        raise ValueError(f"{v!r}: a local package is a path inside the work dir (e.g. ./mypkg), not an absolute "
                         "path or one with '..'")
    return item


# A Kubernetes label value (GPU types become node selectors and Ray resource names): A100, H100, RTX-4090, T4
_GPU_TYPE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?")


def gpu_type(v: str, info: ValidationInfo) -> str:
    if submitting(info) and not _GPU_TYPE.fullmatch(v):
        raise ValueError(f"{v[:80]!r}: a GPU type is 1 to 63 letters, digits, '-', '_' or '.', starting and "
                         "ending with a letter or digit (e.g. A100, H100, RTX-4090, T4)")
    return v


def env_value(v: Any) -> Any:
    """An environment variable's value as text: numbers and booleans are written for convenience
    (``true``/``false``, as YAML spells them); NaN, infinities, null, lists and mappings are refused,
    since their text ("nan", "None") is rarely what was meant."""
    if isinstance(v, str):
        return v
    if isinstance(v, bool) or isinstance(v, int) or (isinstance(v, float) and math.isfinite(v)):
        return render(v)
    what = "null" if v is None else repr(v) if isinstance(v, float) else type(v).__name__
    raise ValueError(f"{what} is not a value an environment variable holds: give a string, a number or true/false "
                     "(quote it to pass it as text, e.g. 'nan' or '')")


def _climbs(path: str) -> bool:
    """Whether ``path`` has a ``..`` among its parts (either slash)."""
    return ".." in re.split(r"[/\\]", path)


ImageRef = Annotated[str, AfterValidator(image_ref)]
OutputGlob = Annotated[str, AfterValidator(output_glob)]
PipRequirement = Annotated[str, AfterValidator(pip_requirement)]
EnvValue = Annotated[str, BeforeValidator(env_value)]
