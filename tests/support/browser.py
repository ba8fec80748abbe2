"""A real browser for the web UI's tests: Debian's Chromium driven by Playwright.

Playwright's own browser download cannot run here, so it drives ``/usr/bin/chromium``
(``apt-get install chromium``; `.ci/run` installs it). ``TRAINYARD_TEST_CHROMIUM`` names another.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from urllib.parse import quote

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def chromium_path() -> str | None:
    path = os.environ.get("TRAINYARD_TEST_CHROMIUM") or "/usr/bin/chromium"
    return path if Path(path).exists() else shutil.which("chromium")


def signed_in(url: str, token: str | None, path: str = "/") -> str:
    """The address that opens ``path`` of the UI at ``url`` signed in, as `trainyard ui` does."""
    return url.rstrip("/") + path + (f"#token={quote(token, safe='')}" if token else "")


LINK_SIGNIN = "dialog.link-signin"  # the page's question before it keeps a link's token


def open_signed_in(page, url: str, token: str | None, path: str = "/") -> None:  # noqa: ANN001
    """Open ``path`` of the UI at ``url`` from the link `trainyard ui` gives, and take the one click it asks for:
    the page keeps a link's token only once the person confirms whose it is (it asks nothing when this browser
    holds that token already)."""
    held = held_token(page, url)
    page.goto(signed_in(url, token, path))
    if token and token != held:
        page.locator(f"{LINK_SIGNIN} button[value=confirm]").click()
        page.locator(LINK_SIGNIN).wait_for(state="detached")


def serve_cookie(page, path: str = "/serve/") -> list[dict]:  # noqa: ANN001
    """Wait for the cookie a signed-in UI asks for (``/serve/`` pages' and the dashboards' sign-in): the UI sets it
    after it shows, so a test that goes on to such a page at once would race it."""
    from tests.support.waiting import until

    def held() -> list[dict]:
        return [c for c in page.context.cookies() if c["name"] == "trainyard_serve" and c["path"].rstrip("/") ==
                path.rstrip("/")]
    return until(held, show=page.context.cookies)


def named_frame(page, name: str, timeout: float = 60.0):  # noqa: ANN001, ANN201
    """The frame an ``iframe[name=NAME]`` holds: Playwright learns of a frame a moment after the element shows."""
    from tests.support.waiting import until

    page.wait_for_selector(f"iframe[name={name}]", timeout=timeout * 1000)
    return until(lambda: page.frame(name=name), timeout=timeout, show=lambda: [f.name for f in page.frames])


def held_token(page, url: str) -> str | None:  # noqa: ANN001
    """The token the UI at ``url`` keeps in this browser (read from outside the page: it may show another site)."""
    for origin in page.context.storage_state()["origins"]:
        if origin["origin"] == url.rstrip("/"):
            return next((e["value"] for e in origin["localStorage"] if e["name"] == "trainyard.token"), None)
    return None


def legend_step(page, chart) -> int:  # noqa: ANN001
    """The step under the pointer at the right edge of a chart's plot (``.chart``), as its legend reads it."""
    over = chart.locator(".u-over")
    box = over.bounding_box()
    page.mouse.move(box["x"] + 5, box["y"] + 5)
    page.mouse.move(box["x"] + box["width"] - 2, box["y"] + box["height"] / 2)
    return int(chart.locator(".u-legend .u-series").first.locator(".u-value").inner_text())


def drag_zoom(page, chart) -> None:  # noqa: ANN001
    """Zoom a chart (``.chart``) into its plot's second tenth to its fourth, as a user drags across it."""
    box = chart.locator(".u-over").bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * 0.1, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.4, y, steps=5)
    page.mouse.up()


def screenshot(page, name: str) -> Path:  # noqa: ANN001
    """A picture of a page: for the README (docs/screenshots/NAME.png) with ``TRAINYARD_SCREENSHOTS=1``,
    else in a temporary folder, so that a test run leaves the checkout as it found it."""
    folder = SCREENSHOTS if os.environ.get("TRAINYARD_SCREENSHOTS") == "1" else \
        Path(tempfile.gettempdir()) / "trainyard-screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    return path
