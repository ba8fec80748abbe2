"""`trainyard ui`: the web UI of the server this CLI talks to, opened signed in."""

from __future__ import annotations

import webbrowser
from typing import Annotated
from urllib.parse import quote

import typer

from trainyard.cli.common import client, console, handled


def ui(
    no_browser: Annotated[bool, typer.Option("--no-browser", help="print the address instead of opening a browser")]
    = False,
) -> None:
    """Open the web UI (starting the local server if none runs), signed in with this CLI's token.

    The token travels in the address's #fragment, which browsers never send to a server; the page
    keeps it in the browser's local storage and takes it out of the address bar."""
    with handled():
        c = client()
        c.health()  # starts the local server, and fails clearly when the server cannot be reached
        url = c.server + "/" + (f"#token={quote(c.http.token, safe='')}" if c.http.token else "")
        if no_browser or not webbrowser.open(url):
            console.print(url, soft_wrap=True, markup=False, highlight=False)
