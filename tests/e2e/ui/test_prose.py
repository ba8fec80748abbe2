"""Commands the pages suggest (`trainyard token create`, `trainyard serve …`) show as code, not as text between
backticks."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.support.browser import open_signed_in

pytestmark = pytest.mark.slow

SUGGESTS = {"/login": "trainyard token create", "/services": "trainyard serve JOB --name NAME",
            "/secrets": "trainyard secret set NAME", "/notifications": "trainyard notify add WEBHOOK --on failed",
            "/submit": "trainyard run FILE"}


def test_the_commands_a_page_suggests_show_as_code(server, page):
    open_signed_in(page, server.url, server.token, "/jobs")
    for path, command in SUGGESTS.items():
        page.goto(server.url + path)
        expect(page.locator("main code", has_text=command).first).to_be_visible()
        assert "`" not in page.inner_text("main"), path
