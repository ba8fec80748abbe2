"""``python -m trainyard.pipelines.kfp_exec --value NAME=FILE ... -- ARGV``: run a component's command
with each ``@@kfp:NAME@@`` replaced by the text of FILE.

A KFP ``inputValue`` fed by another step's output is only known when this step runs; the output is a
file, so its text goes in here. One trailing newline is dropped (``echo`` writes one). Stdlib only:
this runs in the job's environment.
"""

from __future__ import annotations

import os
import sys


def expand(argv: list[str]) -> list[str]:
    values: dict[str, str] = {}
    args = list(argv)
    while args and args[0] == "--value":
        name, _, path = args[1].partition("=")
        with open(path, encoding="utf-8") as f:
            text = f.read()
        values[f"@@kfp:{name}@@"] = text[:-1] if text.endswith("\n") else text
        args = args[2:]
    if not args or args[0] != "--":
        raise SystemExit("usage: python -m trainyard.pipelines.kfp_exec --value NAME=FILE ... -- COMMAND ...")
    out = []
    for arg in args[1:]:
        for token, text in values.items():
            arg = arg.replace(token, text)
        out.append(arg)
    if not out:
        raise SystemExit("kfp_exec: no command")
    return out


def main() -> None:
    argv = expand(sys.argv[1:])
    try:
        os.execvp(argv[0], argv)
    except OSError as e:
        print(f"cannot run {argv[0]!r}: {e.strerror}", file=sys.stderr)
        raise SystemExit(127) from None


if __name__ == "__main__":
    main()
