"""The open-file limit: the server raises its own to the hard limit, and the jobs it starts get back the one it was
given.

Every connection the server holds is a file descriptor: its callers' (a browser tab, a ``--follow``, a long poll),
the kept-alive ones to each replica in the ``/serve/`` pool (up to 100 a replica), the store's, the launchers'
reports. Linux starts most processes with a soft limit of 1,024 (the hard limit is often 524,288): past it,
``accept()`` fails and callers find the server refusing connections while it has room for thousands more. As Go's
runtime (since 1.19), nginx (``worker_rlimit_nofile``) and Ray do, the server raises its soft limit to the hard one
when it starts. As Go does for the programs it executes, what runs jobs gets the soft limit back (through
:data:`~trainyard.envvars.NOFILE_SOFT`): a job's program that uses ``select()`` breaks on descriptors past 1,024,
and its limits are the user's to set, not the server's.
"""

from __future__ import annotations

import os

from trainyard import envvars

CEILING = 1 << 20  # Linux's default nr_open: a soft limit above it is refused even where the hard one is unlimited


def raise_limit() -> tuple[int, int] | None:
    """Raise this process's soft limit on open files to its hard limit (at most :data:`CEILING`), noting the one it
    had for the processes it starts; (before, after) when it changed, None when it could not or need not."""
    try:
        import resource
    except ImportError:  # not POSIX
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = CEILING if hard == resource.RLIM_INFINITY else min(hard, CEILING)
    if soft == resource.RLIM_INFINITY or soft >= target:
        return None
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):  # a platform that caps it lower (macOS: OPEN_MAX): the limit stays as it was
        return None
    os.environ[envvars.NOFILE_SOFT] = str(soft)
    return soft, target


def restore_limit() -> None:
    """In a process the server started to run jobs: put back the soft limit the server was given, and forget it."""
    value = os.environ.pop(envvars.NOFILE_SOFT, None)
    if value is None:
        return
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (int(value), resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    except (ImportError, ValueError, OSError):  # lowering a soft limit is always allowed; a garbled value is ignored
        pass
