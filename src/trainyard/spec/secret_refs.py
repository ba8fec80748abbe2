"""A job's ``secrets:`` — which environment variable holds which of its team's secrets — checked.

Apart from :mod:`trainyard.spec.secrets` (the API's models), which imports the job spec that uses this.
"""

from __future__ import annotations

import re
from typing import Any

from trainyard.envvars import LOADS_CODE, LOADS_CODE_NAMES
from trainyard.spec.names import check_name

MAX_PER_JOB = 100
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# what a job's launcher or runtime sets itself: a secret by that name would be overwritten, or would change how
# trainyard runs the job rather than what the job reads
RESERVED = ("TRAINYARD_", "CUDA_VISIBLE_DEVICES", "PATH", "PYTHONPATH", "HOME", "LD_PRELOAD", "LD_LIBRARY_PATH",
            "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "NODE_RANK")


def check_env_name(name: Any) -> str:
    if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
        raise ValueError(f"environment variable name {name!r}: use letters, digits and '_', not starting with a digit")
    if any(name == r or (r.endswith("_") and name.startswith(r)) for r in RESERVED):
        raise ValueError(f"environment variable {name} is set by trainyard itself; name the variable otherwise")
    if name in LOADS_CODE_NAMES or name.startswith(LOADS_CODE):  # it would reach the command through env(1)'s
        # arguments, which any user of the node may read while they run (launch/runas.py)
        raise ValueError(f"environment variable {name} is one the loader or shell reads; name the variable otherwise")
    return name


def job_secrets(v: Any) -> Any:
    """``secrets:`` of a job as {variable: secret name}; a list names secrets read under their own names."""
    if v is None:
        return {}
    if isinstance(v, (list, tuple)):
        if len(set(map(str, v))) != len(v):
            raise ValueError("a secret is named twice")
        v = {name: name for name in v}
    if not isinstance(v, dict):
        raise ValueError("give a list of secret names, or a mapping of environment variable to secret name")
    if len(v) > MAX_PER_JOB:
        raise ValueError(f"at most {MAX_PER_JOB} secrets a job")
    out = {}
    for var, name in v.items():
        check_env_name(var)
        if not isinstance(name, str):
            raise ValueError(f"{var}: a secret's name is a string")
        try:
            check_name(name)
        except ValueError as e:
            raise ValueError(f"{var}: secret name {name!r}: {e}") from None
        out[var] = name
    return out
