"""`trainyard ui`: the web UI of the server this CLI talks to, opened signed in."""

from __future__ import annotations

import html
import os
import webbrowser
from pathlib import Path
from typing import Annotated
from urllib.parse import quote

import typer

from trainyard.cli.common import client, console, handled
from trainyard.locations import home


def ui(
    no_browser: Annotated[bool, typer.Option("--no-browser", help="print the address instead of opening a browser")]
    = False,
) -> None:
    """Open the web UI (starting the local server if none runs), signed in with this CLI's token.

    The token travels in the address's #fragment, which browsers never send to a server; the page takes it out
    of the address bar and the history, asks the server whose it is, and keeps it (in the browser's local storage)
    once the person clicks "Sign in as NAME": any site can link to the UI with a token of its writer's, so a
    link's token is never kept unseen. The browser is given a file of this user's that leads there, not the
    address itself: a program's arguments are readable by every user of the machine (/proc/PID/cmdline)."""
    with handled():
        c = client()
        c.health()  # starts the local server, and fails clearly when the server cannot be reached
        url = c.server + "/" + (f"#token={quote(c.http.token, safe='')}" if c.http.token else "")
        if no_browser or not webbrowser.open(leading_to(url).as_uri()):
            console.print(url, soft_wrap=True, markup=False, highlight=False)


def leading_to(url: str) -> Path:
    """A page, readable by this user only, that sends the browser on to ``url`` (Jupyter's way)."""
    page = home() / "ui-open.html"
    page.parent.mkdir(parents=True, exist_ok=True)
    target = html.escape(url, quote=True)
    fd = os.open(page, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(f'<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0;url={target}">'
                f'<title>trainyard</title><a href="{target}">Open trainyard</a>\n')
    return page
