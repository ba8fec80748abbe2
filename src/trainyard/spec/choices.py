"""Fixed sets of names, with no pydantic here: the CLI offers them as option choices and help text
without loading the models (which costs it hundreds of milliseconds per command)."""

from __future__ import annotations

from enum import Enum
from typing import Literal

ROLES = ("admin", "maintainer", "member", "viewer")
RoleName = Literal["admin", "maintainer", "member", "viewer"]


class UsageBy(str, Enum):
    team = "team"
    user = "user"
    queue = "queue"
    gpu_type = "gpu_type"

LOG_TAIL_MAX = 100_000  # lines a log's tail may ask for (logs --tail): more is a download (GET …/logs.txt)
