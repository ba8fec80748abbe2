"""``{{params.x}}`` references: the one place that finds them and puts values in.

A value is one word of a command whatever it holds: in a string command (run by
a shell) it is shell-quoted, so ``-p 'x=a; touch f'`` cannot add a second
command; in a list (argv) command it is one element, as it is. Jobs, pipeline
steps, notebook steps and the SDK all substitute through here.
"""

from __future__ import annotations

import math
import re
import shlex
from typing import Any, Mapping

from trainyard.templates import PARAM_REF



def render(value: Any) -> str:
    """A param value as command-line text: booleans as ``true``/``false`` (YAML's spelling)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def word(value: Any, shell: bool) -> str:
    """``value`` as one word of a command: quoted for a shell, as it is in an argv element."""
    text = render(value)
    return shlex.quote(text) if shell else text


def refs(text: str) -> list[str]:
    """The names of the params ``text`` refers to, in order."""
    return PARAM_REF.findall(text)


def substitute(text: str, params: Mapping[str, Any], *, shell: bool = False, keep_unknown: bool = False) -> str:
    """``text`` with each ``{{params.x}}`` replaced by ``params["x"]`` (see :func:`word`).

    An unknown name raises KeyError, or stays as written with ``keep_unknown``
    (for a later pass that knows more params).
    """

    def one(m: re.Match) -> str:
        name = m.group(1)
        if name not in params and keep_unknown:
            return m.group(0)
        return word(params[name], shell)

    return PARAM_REF.sub(one, text)


def command_with(command: str | list[str], params: Mapping[str, Any]) -> str | list[str]:
    """A job's ``command`` with its params put in: a string (for a shell) stays one string, quoted
    words in it; a list (an argv) stays a list, one element per word."""
    if isinstance(command, str):
        return substitute(command, params, shell=True)
    return [substitute(p, params) for p in command]


# lists and mappings within lists and mappings a param may hold: far past any real one, and short of the 255 at which
# encoding it for the store fails (a 500 where a 422 belongs)
MAX_DEPTH = 64

def check_finite(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` as they are, or ValueError naming the first NaN or infinity in them (at any depth), or where
    they nest deeper than :data:`MAX_DEPTH`.

    JSON has neither: PostgreSQL refuses them, and they would come back as null.
    """

    def walk(value: Any, where: str, depth: int) -> None:
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{where}: {value} is not a number JSON can hold; give a finite number or a string")
        if isinstance(value, (dict, list, tuple)) and depth >= MAX_DEPTH:
            raise ValueError(f"{where}: nested more than {MAX_DEPTH} deep")
        if isinstance(value, dict):
            for k, x in value.items():
                walk(x, f"{where}.{k}", depth + 1)
        elif isinstance(value, (list, tuple)):
            for i, x in enumerate(value):
                walk(x, f"{where}[{i}]", depth + 1)

    for name, value in params.items():
        walk(value, str(name), 1)
    return params
