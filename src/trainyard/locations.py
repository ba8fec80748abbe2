"""Where a client finds things: the home, the server and the token it was told to use.

Standard library only: :mod:`trainyard.home` and the CLI's quick path (:mod:`trainyard.sdk.quick`)
read these without loading the settings' pydantic models in :mod:`trainyard.config`, which
re-exports them.
"""

from __future__ import annotations

import os
from pathlib import Path

from trainyard import envvars

ADDRESS_FILE = "server.json"


def home() -> Path:
    """``$TRAINYARD_HOME``, default ``~/.trainyard``."""
    return Path(os.environ.get(envvars.HOME) or Path.home() / ".trainyard").expanduser()


def server_url() -> str | None:
    """``$TRAINYARD_SERVER``: the server the SDK and CLI talk to; None for the home's local server."""
    return os.environ.get(envvars.SERVER) or None


def leader_file() -> Path | None:
    """``$TRAINYARD_SERVER_FILE`` (set in a job): where the servers announce their leader; None when
    unset or not an absolute path (a relative one would depend on the job's working folder)."""
    path = os.environ.get(envvars.SERVER_FILE)
    return Path(path) if path and os.path.isabs(path) else None


def client_token() -> str | None:
    """``$TRAINYARD_TOKEN``: the bearer token the SDK and CLI send."""
    return os.environ.get(envvars.TOKEN) or None
