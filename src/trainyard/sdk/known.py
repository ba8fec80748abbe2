"""The server a short command may talk to without the full SDK: one already known, whose process lives.

Finding or starting the local server (health checks, waiting for one that is starting, starting one in
the background) is :func:`trainyard.sdk.discovery.resolve_server`'s, on httpx; the quick paths
(:mod:`trainyard.sdk.quick` for ``run --wait``, :mod:`trainyard.sdk.reads` for ``ls``, ``show`` and
``logs``) take a server only where that work is already done, and raise :class:`NotQuick` otherwise.
"""

from __future__ import annotations

import os
from typing import Any

from trainyard.home import read_address, read_login, token_for
from trainyard.locations import ADDRESS_FILE, client_token, home, server_url


class NotQuick(Exception):
    """This command is for the full SDK; nothing was done that it would not do again."""


def known_server() -> tuple[str, str | None]:
    """The server to use and its token, as the full SDK finds them, if it is known and its process lives."""
    url = server_url() or (read_login() or {}).get("server")
    if not url:
        info = read_address(home() / ADDRESS_FILE)
        if info is None or not alive(info.get("pid")):
            raise NotQuick("no local server running: the full SDK finds or starts one")
        url = info["url"]
    url = url.rstrip("/")
    return url, client_token() or token_for(url)


def alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's: alive
        return True
    return True
