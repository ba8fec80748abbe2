"""A job's own ``OPTIND``, past the shells that may stand between its launcher and its command.

Dash and bash set an ``OPTIND`` they inherit to 1 as they start (it is their ``getopts`` counter, and they
export it on as 1), and dash refuses one that is not a number ("Illegal number", exit 2), in its
environment as in an ``export``. A job whose env says ``OPTIND`` got 1, or did not start, wherever a shell of
ours ran before its command: the cgroup shim (:mod:`trainyard.launch.cgroup`), the seat's shell
(:mod:`trainyard.launch.seat`), the read-only mounts' script (:mod:`trainyard.launch.readonly`), the drop's
``sh`` (:mod:`trainyard.launch.runas`); without them it got its own. Those shells now start without it, and
env(1), run last, right before the command, gives it back. Only a job whose env has ``OPTIND`` pays that one
exec; the others' chain is as it was.
"""

from __future__ import annotations

import shutil

NAME = "OPTIND"


def past_shells(prefix: list[str], command: list[str], value: str,
                start_env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """``(argv, start_env)`` to run ``command`` behind ``prefix`` (or in a seat's shell) with ``OPTIND=value``,
    where ``prefix + command`` was to run with ``start_env``; what runs as an account (after a drop in
    ``prefix``) may run env(1) and nice(1) too: they are named by path, never looked up on the job's PATH."""
    from trainyard.launch.runas import ROOT_PATH

    hop = [shutil.which("env", path=ROOT_PATH) or "/usr/bin/env", f"{NAME}={value}"]
    if "=" in command[0]:
        # env(1) would take the name as one more assignment, and a shell's exec would reset OPTIND:
        # nice, adjusting by nothing, execs it by name as it is (argv and pid the command's)
        hop += [shutil.which("nice", path=ROOT_PATH) or "/usr/bin/nice", "-n", "0", "--"]
    return [*prefix, *hop, *command], {k: v for k, v in start_env.items() if k != NAME}
