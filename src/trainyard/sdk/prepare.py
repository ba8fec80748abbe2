"""Client-side preparation of a spec: paths resolved against the spec's folder,
requirements read in, the work dir packed. What reaches the server is self-contained."""

from __future__ import annotations

from pathlib import Path

from trainyard.errors import InvalidSpec
from trainyard.sdk.snapshot import pack
from trainyard.spec.job import Env, JobSpec


def _error(field: str, message: str) -> InvalidSpec:
    return InvalidSpec(errors=[{"field": field, "line": None, "where": field, "message": message}])


def prepare(spec: JobSpec, base_dir: Path) -> tuple[JobSpec, bytes | None, str | None]:
    """``(spec to send, snapshot bytes, snapshot digest)``."""
    if spec.workdir is None and not (spec.env and spec.env.requirements) \
            and all("://" in value for value in spec.inputs.values()):
        return spec, None, None  # nothing to resolve or pack: no dump and validation round trip
    data = spec.model_dump()
    blob = digest = None
    if spec.workdir is not None:
        folder = (base_dir / spec.workdir).resolve()
        try:
            blob, digest = pack(folder)
        except ValueError as e:
            raise _error("workdir", str(e)) from None
        data["workdir"] = str(folder)
    if spec.env and spec.env.requirements:
        req = base_dir / spec.env.requirements
        try:
            lines = [ln.split("#")[0].strip() for ln in req.read_text().splitlines()]
        except OSError as e:
            raise _error("env.requirements", f"cannot read {req}: {e.strerror}") from None
        data["env"] = Env(pip=[*spec.env.pip, *(ln for ln in lines if ln)]).model_dump()
    inputs = {}
    for name, value in spec.inputs.items():
        if "://" in value:
            inputs[name] = value
            continue
        path = (base_dir / value).resolve()
        if not path.exists():
            raise _error(f"inputs.{name}", f"{value!r} does not exist (looked in {path})")
        inputs[name] = str(path)
    data["inputs"] = inputs
    return JobSpec.model_validate(data), blob, digest
