"""The jobs page in a real browser against a real server: jobs from the CLI listed, filters kept in the
address across a reload, cancel from the page stopping the process, the live running count, and deleting
ended jobs from the page."""

from __future__ import annotations

import json
import re
import sys

import psutil
import pytest

from tests.support.browser import open_signed_in, screenshot
from tests.support.waiting import until

pytestmark = pytest.mark.slow


def submit(server, tmp_path, name: str, code: str, extra: str = "") -> str:
    """A job run from the CLI (`trainyard run`), as a user would; its id."""
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(f"name: {name}\ncommand: [{sys.executable}, -c, {json.dumps(code)}]\n{extra}")
    r = server.cli("run", str(spec))
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()  # the id, alone on stdout


def rows(page) -> list[str]:
    return page.eval_on_selector_all("tbody tr[data-id]", "trs => trs.map(t => t.dataset.id)")


def test_a_cli_job_is_listed_and_filters_survive_a_reload(server, page, tmp_path):
    hello = submit(server, tmp_path, "hello-cli", "print(1)")
    other = submit(server, tmp_path, "other-job", "print(2)")
    broken = submit(server, tmp_path, "hello-broken", "raise SystemExit(3)")
    client = server.client()
    for job in (hello, other, broken):
        client.wait(job, timeout=60)

    open_signed_in(page, server.url, server.token, "/jobs")
    page.wait_for_selector(f"tr[data-id={hello}] >> text=hello-cli")
    assert set(rows(page)) == {hello, other, broken}
    assert page.get_attribute(f"tr[data-id={hello}] a", "href") == f"/jobs/{hello}"

    # when a status and a search are chosen
    page.check("input[name=status][value=succeeded]")
    page.wait_for_function("location.search.includes('status=succeeded')")
    page.fill("input[name=q]", "hello")
    page.press("input[name=q]", "Enter")
    page.wait_for_function("location.search.includes('q=hello')")
    page.wait_for_function(f"[...document.querySelectorAll('tbody tr[data-id]')].map(t => t.dataset.id).join() === '{hello}'")
    # then a reload shows the same rows and the same filter controls
    page.reload()
    page.wait_for_selector(f"tr[data-id={hello}]")
    assert rows(page) == [hello]
    assert page.is_checked("input[name=status][value=succeeded]")
    assert not page.is_checked("input[name=status][value=failed]")
    assert page.input_value("input[name=q]") == "hello"
    assert page.inner_text("#page-span") == "1–1 of 1"

    # and sorting by name is kept in the address too
    page.click("button:has-text('Clear')")
    page.wait_for_function("document.querySelectorAll('tbody tr[data-id]').length === 3")
    page.click("th[data-sort=name] a")
    page.wait_for_function("location.search.includes('sort=name')")
    # (newest first is broken, other, hello: the first row alone cannot tell the sorted table from the old one)
    page.wait_for_function("[...document.querySelectorAll('tbody tr[data-id]')].map(t => t.dataset.id).join() === "
                           f"'{broken},{hello},{other}'")
    assert rows(page) == [broken, hello, other]


def test_cancel_selected_stops_the_process_and_the_running_count_is_live(server, page, tmp_path):
    pid_file = tmp_path / "sleeper.pid"
    sleeper = submit(server, tmp_path, "sleeper",
                     f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(600)")
    done = submit(server, tmp_path, "quick", "print('ok')")
    failed = submit(server, tmp_path, "broken", "raise SystemExit(2)")
    server.client().wait(done, timeout=60)
    server.client().wait(failed, timeout=60)
    # the server has 2 cpus and the sleeper holds one: this one waits
    waiting = submit(server, tmp_path, "big", "print('big')", "resources: {cpu: 2, memory: 1Gi, gpu: 2, gpu_type: A100}\n")
    pid = int(until(lambda: pid_file.exists() and pid_file.read_text(), timeout=60))
    assert psutil.pid_exists(pid)

    open_signed_in(page, server.url, server.token, "/jobs")
    page.wait_for_function("document.getElementById('live-counts')?.textContent === '1 running · 1 pending'")
    page.wait_for_selector(f"tr[data-id={sleeper}] .badge[data-status=running]")
    page.wait_for_selector(f"tr[data-id={waiting}] .badge[data-status=pending]")
    assert "2 cpu · 1Gi · 2×A100" in page.inner_text(f"tr[data-id={waiting}]")
    screenshot(page, "jobs")

    # when the sleeper is selected and cancelled from the page (the confirm accepted)
    page.on("dialog", lambda d: d.accept())
    page.check(f"tr[data-id={sleeper}] input[type=checkbox]")
    page.click("#cancel-selected")
    page.wait_for_selector(".toast.info >> text=Cancel requested for 1 job")
    # then its process is gone, and the page shows it cancelled without a reload
    until(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, timeout=30)
    page.wait_for_selector(f"tr[data-id={sleeper}] .badge[data-status=cancelled]", timeout=20_000)
    page.wait_for_function("document.getElementById('live-counts')?.textContent !== '1 running · 1 pending'")
    # and ended jobs selected and deleted from the page leave the list, and the server
    page.check(f"tr[data-id={done}] input[type=checkbox]")
    page.check(f"tr[data-id={failed}] input[type=checkbox]")
    page.click("#delete-selected")
    page.wait_for_selector(".toast.info >> text=Deleted 2 jobs")
    page.wait_for_selector(f"tr[data-id={done}]", state="detached")
    assert not page.locator(f"tr[data-id={failed}]").count()
    assert {j.id for j in server.client().jobs(limit=100).items}.isdisjoint({done, failed})


def test_the_label_filter_keeps_the_jobs_with_every_label_typed_and_lives_in_the_address(server, page):
    c = server.client()
    ann = c.submit({"name": "lab-ann", "command": "true", "labels": {"exp": "ui-base", "owner": "ann"}}).id
    bob = c.submit({"name": "lab-bob", "command": "true", "labels": {"exp": "ui-base", "owner": "bob"}}).id
    c.submit({"name": "lab-other", "command": "true", "labels": {"exp": "ui-other"}})

    open_signed_in(page, server.url, server.token, "/jobs")
    page.fill("input[name=label]", "exp=ui-base")
    page.press("input[name=label]", "Enter")
    shown = "[...document.querySelectorAll('tbody tr[data-id]')].map(t => t.dataset.id).sort().join()"
    page.wait_for_function(f"{shown} === '{','.join(sorted([ann, bob]))}'")
    page.fill("input[name=label]", "exp=ui-base, owner=ann")
    page.press("input[name=label]", "Enter")
    page.wait_for_function(f"{shown} === '{ann}'")
    page.reload()
    page.wait_for_selector(f"tr[data-id={ann}]")
    assert rows(page) == [ann] and page.input_value("input[name=label]") == "exp=ui-base, owner=ann"
    page.fill("input[name=label]", "exp, owner in (bob, carl), !gone")  # a selector, as kubectl takes one
    page.press("input[name=label]", "Enter")
    page.wait_for_function(f"{shown} === '{bob}'")
    # each job's labels sit under its name; one clicked narrows the listing to the jobs that have it too
    page.fill("input[name=label]", "exp=ui-base")
    page.press("input[name=label]", "Enter")
    page.wait_for_function(f"{shown} === '{','.join(sorted([ann, bob]))}'")
    assert page.locator(f"tr[data-id={ann}] .label-chip").all_text_contents() == ["exp=ui-base", "owner=ann"]
    page.click(f"tr[data-id={ann}] .label-chip:text('owner=ann')")
    page.wait_for_function(f"{shown} === '{ann}'")
    assert page.input_value("input[name=label]") == "exp=ui-base,owner=ann"
    page.fill("input[name=label]", "owner in (bob")
    page.press("input[name=label]", "Enter")
    page.wait_for_selector("p.error:not([hidden])")
    assert "parentheses" in page.text_content("p.error")
