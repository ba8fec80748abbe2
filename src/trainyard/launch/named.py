"""Named inputs and outputs of a pipeline step, as its command sees them.

``{{inputs.NAME}}`` becomes the local path of input NAME, ``{{outputs.NAME}}``
the path to write output NAME at (``$TRAINYARD_OUTPUT_DIR/NAME``, a file or a
folder). A step lists the outputs it must write in ``TRAINYARD_OUTPUT_NAMES``;
one missing after the command succeeded fails the attempt, naming it.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from trainyard import envvars
from trainyard.templates import IO_REF


def substitute(command: list[str], inputs: dict[str, str], outputs_dir: Path) -> list[str]:
    """The command with declared inputs and any output names replaced by paths.

    In a shell command (``bash -c TEXT``) the paths are quoted where they need it.
    """
    shell = len(command) >= 3 and command[1] == "-c" and Path(command[0]).name in ("bash", "sh", "zsh", "dash")

    def path(m: re.Match) -> str:
        kind, name = m.group(1), m.group(2)
        if kind == "inputs":
            if name not in inputs:
                return m.group(0)
            value = inputs[name]
        else:
            value = str(outputs_dir / name)
        return shlex.quote(value) if shell else value

    if not any("{{" in part for part in command):
        return command
    return [IO_REF.sub(path, part) for part in command]


def missing_outputs(env: dict[str, str], outputs_dir: Path) -> list[str]:
    names = [n for n in env.get(envvars.OUTPUT_NAMES, "").split(",") if n]
    return [n for n in names if not (outputs_dir / n).exists()]
