"""The web UI: static pages (no build step, shipped in the package) reading the same ``/api/v1``.

Every path the API does not own serves the one page shell (``index.html``); the browser's router
(``static/app.js``) picks the page from the path, so a link to ``/jobs/ID?…`` can be shared and
reloaded. The shell and its assets carry no data, so they are served without a token; every
request the pages make for data carries the browser's token like any other client.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, HTTPException
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

STATIC = Path(__file__).parent / "static"
ASSETS = "/ui/"
# what the API, the launchers and the tools own: never answered with the page shell
SHELL_HEADERS = {"Cache-Control": "no-cache", "X-Frame-Options": "DENY",
                 "Content-Security-Policy": "frame-ancestors 'none'"}
NOT_PAGES = ("/api/", "/internal/", "/serve/", "/metrics", "/healthz", "/docs", "/redoc", "/openapi.json")


def is_page(path: str) -> bool:
    """A path the UI answers without a token: its assets and the page shell."""
    return path.startswith(ASSETS) or not any(path == p.rstrip("/") or path.startswith(p) for p in NOT_PAGES)


def mount(app: FastAPI) -> None:
    """Serve the assets under ``/ui/`` and the shell at every other path the API does not own; call
    after the routers, so theirs match first."""
    app.mount(ASSETS, StaticFiles(directory=STATIC), name="ui")
    shell = STATIC / "index.html"

    @app.get("/{path:path}", include_in_schema=False)
    def page(path: str) -> FileResponse:
        if not is_page("/" + path):
            raise HTTPException(404)
        # the shell names its assets by path; no-cache so an upgraded server is picked up on reload. Framed by no
        # page (a page of another port of this host is same-site, and would be shown the UI signed in)
        return FileResponse(shell, media_type="text/html", headers=SHELL_HEADERS)
