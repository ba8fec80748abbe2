"""What ``execve`` takes: a job whose command or environment is past Linux's limits passed submit and failed at
launch with "Argument list too long". Checked when a spec is submitted (:func:`exec_size_errors`).

Linux counts each argument and each ``NAME=value`` of the environment with its terminating NUL, at most
MAX_ARG_STRLEN bytes each; and all of them, with a pointer to each, at most ARG_MAX (a quarter of the stack
limit: ``getconf ARG_MAX`` says 2 MiB under the default 8 MiB stack).

The spec alone is checked wherever it is read (the SDK too); the server checks it again with the sizes of the
secrets the launcher will add (:func:`exec_size_problems` with ``secrets``), which only it knows.
"""

from __future__ import annotations

import json
import os
from typing import Any

from pydantic_core import InitErrorDetails, PydanticCustomError

from trainyard.spec.params import command_with

MAX_ARG_STRLEN = 131072  # one argument or NAME=value, NUL included: 32 pages, fixed in the kernel
# all of them: `getconf ARG_MAX` under the default 8 MiB stack. Assumed where the check cannot ask the node that
# execs (the SDK; a server whose jobs run on Ray or Kubernetes nodes): those are Linux hosts with the default stack
# limit as a rule, and a node with a smaller one still refuses at exec, naming E2BIG. See node_arg_max.
ARG_MAX = 2 * 1024 * 1024
# what the launcher adds to the job's own (TRAINYARD_* variables, inputs' paths, PATH and the rest of the node's
# environment, bash -c for a string command) is a few KiB; this leaves room for a node's large environment too
RESERVED = 512 * 1024
POINTER = 8  # the kernel counts a pointer to each argument and variable too
ADVICE = "put large values in a file (an input, or the work dir) and pass its path"


Problem = tuple[tuple[str | int, ...], str]  # (where in the spec, what is wrong)


def node_arg_max() -> int:
    """ARG_MAX of this machine, for a check made where the job will exec (the local engine's server): less than
    the assumed one under a lowered stack limit; never more, so that what the spec's own check let through
    (the SDK's, at ARG_MAX) is what the server's lets through."""
    try:
        found = os.sysconf("SC_ARG_MAX")
    except (AttributeError, ValueError, OSError):  # not a POSIX system: as assumed
        return ARG_MAX
    return min(ARG_MAX, found) if found > 0 else ARG_MAX


def exec_size_errors(command: str | list[str], params: dict[str, Any], env: dict[str, str]) -> list[InitErrorDetails]:
    """:func:`exec_size_problems` of a spec alone, as pydantic's errors (for its validator)."""
    return [_error(loc, message) for loc, message in exec_size_problems(command, params, env)]


def exec_size_problems(command: str | list[str], params: dict[str, Any], env: dict[str, str],
                       secrets: dict[str, int] | None = None, arg_max: int = ARG_MAX) -> list[Problem]:
    """Where the job's command (``{{params.x}}`` put in) or environment (``env_vars``, ``params`` as the job's
    TRAINYARD_PARAMS, and ``secrets``: variable -> its value's size in bytes) is past what one ``execve`` takes
    (``arg_max`` in all); empty when it fits. A secret is named by its variable, never shown."""
    found: list[Problem] = []
    total = 0

    def one(loc: tuple[str | int, ...], size: int, what: str) -> None:
        nonlocal total
        total += size + POINTER
        if size > MAX_ARG_STRLEN:
            found.append((loc, f"{what} is {size - 1:,} bytes; Linux takes at most {MAX_ARG_STRLEN - 1:,} in one "
                               f"(MAX_ARG_STRLEN): {ADVICE}"))

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
    for var, size in (secrets or {}).items():  # the launcher puts them in the command's environment
        one(("secrets", var), len(var.encode()) + size + 2, f"{var}=… (the value of the secret it names)")
    if not found and total > arg_max - RESERVED:
        # the spec alone was checked first: past the limit with secrets, they are what to change
        what, loc = ("command, env_vars, params and secrets", ("secrets",)) if secrets else \
            ("command, env_vars and params", ())
        found.append((loc, f"the {what} together are {total:,} bytes; at most {arg_max - RESERVED:,} "
                           f"(Linux's ARG_MAX {arg_max:,}, less room for what trainyard adds): {ADVICE}"))
    return found


def _given(substituted: bool) -> str:
    return " with its params put in" if substituted else ""


def _error(loc: tuple[str | int, ...], message: str) -> InitErrorDetails:
    return InitErrorDetails(type=PydanticCustomError("too_long_for_exec", message), loc=loc, input=None)
