"""What a database URL names, without loading SQLAlchemy: the server reads it before it holds its home
(:func:`trainyard.server.serve`), and every moment before that lock is one a CLI could start a rival in."""

from __future__ import annotations

import os
from pathlib import Path


def normalize_url(url: str) -> str:
    """``postgresql://`` means psycopg 3 here; a bare path means a SQLite file."""
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    if "://" not in url:
        return f"sqlite:///{Path(url).expanduser().resolve()}"
    return url


def database_name(url: str) -> str:
    """Which database ``url`` opens, without credentials (user, password, query options): what the
    server records in ``server.json``, where `trainyard admin bootstrap` checks it opens the same one."""
    from sqlalchemy.engine import make_url

    parsed = make_url(normalize_url(url))
    name = parsed.database or ""
    if parsed.get_backend_name() == "sqlite":
        return f"sqlite:///{name if name in ('', ':memory:') else os.path.realpath(name)}"
    host = parsed.host or parsed.query.get("host") or ""  # ?host=/run/postgresql: a Unix socket's folder
    port = f":{parsed.port}" if parsed.port else ""
    return f"{parsed.get_backend_name()}://{host if isinstance(host, str) else ''}{port}/{name}"
