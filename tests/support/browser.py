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


def screenshot(page, name: str) -> Path:  # noqa: ANN001
    """A picture of a page: for the README (docs/screenshots/NAME.png) with ``TRAINYARD_SCREENSHOTS=1``,
    else in a temporary folder, so that a test run leaves the checkout as it found it."""
    folder = SCREENSHOTS if os.environ.get("TRAINYARD_SCREENSHOTS") == "1" else \
        Path(tempfile.gettempdir()) / "trainyard-screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    return path
