"""What ``execve`` takes: a job whose command or environment is past Linux's limits passed submit and failed at
launch with "Argument list too long". Checked when a spec is submitted (:func:`exec_size_errors`).

Linux counts each argument and each ``NAME=value`` of the environment with its terminating NUL, at most
MAX_ARG_STRLEN bytes each; and all of them, with a pointer to each, at most ARG_MAX (a quarter of the stack
limit: ``getconf ARG_MAX`` says 2 MiB under the default 8 MiB stack).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic_core import InitErrorDetails, PydanticCustomError

from trainyard.spec.params import command_with

MAX_ARG_STRLEN = 131072  # one argument or NAME=value, NUL included: 32 pages, fixed in the kernel
ARG_MAX = 2 * 1024 * 1024  # all of them: `getconf ARG_MAX` under the default 8 MiB stack
# what the launcher adds to the job's own (TRAINYARD_* variables, inputs' paths, PATH and the rest of the node's
# environment, bash -c for a string command) is a few KiB; this leaves room for a node's large environment too
RESERVED = 512 * 1024
POINTER = 8  # the kernel counts a pointer to each argument and variable too
ADVICE = "put large values in a file (an input, or the work dir) and pass its path"


def exec_size_errors(command: str | list[str], params: dict[str, Any], env: dict[str, str]) -> list[InitErrorDetails]:
    """Where the job's command (``{{params.x}}`` put in) or environment (``env_vars``, and ``params`` as the
    job's TRAINYARD_PARAMS) is past what one ``execve`` takes; empty when it fits."""
    found: list[InitErrorDetails] = []
    total = 0

    def one(loc: tuple[str | int, ...], size: int, what: str) -> None:
        nonlocal total
        total += size + POINTER
        if size > MAX_ARG_STRLEN:
            found.append(_error(loc, f"{what} is {size - 1:,} bytes; Linux takes at most {MAX_ARG_STRLEN - 1:,} in "
                                     f"one (MAX_ARG_STRLEN): {ADVICE}"))

    words = command_with(command, params)
    if isinstance(words, str):
        one(("command",), len(words.encode()) + 1, "the command" + _given(words != command))
    else:
        for i, w in enumerate(words):
            one(("command", i), len(w.encode()) + 1, f"command[{i}]" + _given(w != command[i]))
    for name, value in env.items():
        one(("env_vars", name), len(name.encode()) + len(value.encode()) + 2, f"{name}=…")
    if params:  # the launcher gives them to the job as TRAINYARD_PARAMS=<JSON>
        one(("params",), len("TRAINYARD_PARAMS=") + len(json.dumps(params).encode()) + 1,
            "TRAINYARD_PARAMS (the params as JSON)")
    if not found and total > ARG_MAX - RESERVED:
        found.append(_error((), f"the command, env_vars and params together are {total:,} bytes; at most "
                                f"{ARG_MAX - RESERVED:,} (Linux's ARG_MAX {ARG_MAX:,}, less room for what trainyard "
                                f"adds): {ADVICE}"))
    return found


def _given(substituted: bool) -> str:
    return " with its params put in" if substituted else ""


def _error(loc: tuple[str | int, ...], message: str) -> InitErrorDetails:
    return InitErrorDetails(type=PydanticCustomError("too_long_for_exec", message), loc=loc, input=None)
