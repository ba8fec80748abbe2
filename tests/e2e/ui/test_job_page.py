"""The job page in a real browser against a real server: live logs while the job runs, its metric
chart, cancel from the page (the process is gone) then delete, a large log (the view holds only what is on screen,
the download holds every line), and compare (params side by side, the differing one marked)."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import psutil
import pytest
from playwright.sync_api import expect

from tests.e2e.helpers import py_job
from tests.support.browser import open_signed_in, screenshot
from tests.support.waiting import until
from trainyard.errors import JobNotFound

LIVE = """
import os, sys, time, trainyard
print("first-marker", flush=True)
for step in range(1, 6):
    trainyard.log_metrics(step=step, loss=1.0 / step)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
print("second-marker", flush=True)
"""


def open_job(page, server, job_id: str) -> None:
    open_signed_in(page, server.url, server.token, f"/jobs/{job_id}")
    page.wait_for_selector(".logview")


@pytest.mark.slow
def test_a_running_job_streams_its_log_and_shows_its_metric_chart(server, page, tmp_path):
    go = tmp_path / "go"
    job = server.client().submit({**py_job(LIVE, name="live"), "command": py_job(LIVE)["command"] + [str(go)]})
    open_job(page, server, job.id)
    expect(page.locator(".log-line", has_text="first-marker")).to_be_visible(timeout=30_000)
    expect(page.locator("h1 [data-status=running]")).to_be_visible()
    # the chart: one per metric, its legend naming the metric's series
    chart = page.locator(".chart[data-metric=loss]")
    expect(chart.locator("canvas")).to_have_count(1, timeout=30_000)
    expect(chart.locator(".u-title")).to_have_text("loss")
    over = chart.locator(".u-over")
    box = over.bounding_box()
    over.hover(position={"x": box["width"] - 2, "y": box["height"] / 2})  # hover: the legend reads the value
    expect(chart.locator(".u-legend .u-series").nth(1).locator(".u-value")).to_have_text(re.compile(r"\d"))
    go.write_text("")
    expect(page.locator(".log-line", has_text="second-marker")).to_be_visible(timeout=30_000)
    expect(page.locator("h1 [data-status=succeeded]")).to_be_visible(timeout=30_000)
    assert "first-marker" in page.inner_text(".logview")  # without a reload: the first line is still there
    # the picture: the log and the chart, below the sticky top bar
    page.evaluate("window.scrollTo(0, document.querySelector('.logbox').getBoundingClientRect().top + scrollY - 110)")
    screenshot(page, "job")


@pytest.mark.slow
def test_cancel_from_the_job_page_stops_the_process(server, page, tmp_path):
    pid_file = tmp_path / "pid"
    code = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); print('up', flush=True); time.sleep(120)"
    job = server.client().submit(py_job(code, name="sleeper", grace_period=1, resources={"cpu": 1}))
    pid = int(until(lambda: pid_file.exists() and pid_file.read_text()))
    assert psutil.pid_exists(pid)
    # a job that waits for it says why, and where it stands in line
    waiter = server.client().submit(py_job("print('ran')", name="waiter", resources={"cpu": 2}))
    open_job(page, server, waiter.id)
    expect(page.locator(".facts")).to_contain_text("waiting because", timeout=30_000)
    expect(page.locator(".facts")).to_contain_text("needs 2 cores")
    expect(page.locator(".facts")).to_contain_text("position in line")
    open_job(page, server, job.id)
    expect(page.locator("h1 [data-status=running]")).to_be_visible(timeout=30_000)
    expect(page.locator("button[name=delete]")).to_be_disabled()  # only an ended job may be deleted
    page.once("dialog", lambda d: d.accept())
    page.click("button[name=cancel]")
    expect(page.locator("h1 [data-status=cancelled]")).to_be_visible(timeout=30_000)
    until(lambda: not _alive(pid), timeout=30)
    assert job.refresh().status.value == "cancelled"
    # once ended, it may be deleted from its page, which then goes back to the list
    page.once("dialog", lambda d: d.accept())
    page.click("button[name=delete]")
    expect(page).to_have_url(re.compile(r"/jobs$"), timeout=10_000)
    with pytest.raises(JobNotFound):
        job.refresh()


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.slow
def test_a_large_log_stays_responsive_and_downloads_whole(server, page):
    n = 50_000
    job = server.client().submit(py_job(f"for i in range({n}): print(f'line {{i}} of the log')", name="chatty"))
    assert job.wait(timeout=120).status.value == "succeeded"
    r = httpx.get(f"{server.url}/api/v1/jobs/{job.id}/logs.txt", headers=server.headers, timeout=60)
    assert r.status_code == 200 and "attachment" in r.headers["content-disposition"]
    assert r.text.splitlines() == [f"line {i} of the log" for i in range(n)]
    open_job(page, server, job.id)
    expect(page.locator(".count")).to_have_text(f"{n:,} lines · ended", timeout=60_000)
    assert page.locator(".log-line").count() < 500  # only the rows on screen are in the DOM
    expect(page.locator(".log-line", has_text=f"line {n - 1} of the log")).to_be_visible()  # it follows
    # search over everything loaded, not only what is on screen: jump to a line far above
    page.fill("input[name=search]", "line 123 of")
    page.press("input[name=search]", "Enter")
    expect(page.locator(".log-line.current")).to_contain_text("line 123 of the log")
    expect(page.locator(".matches")).to_have_text("1 / 1")
    expect(page.locator(".log-tools input[type=checkbox]")).not_to_be_checked()  # a jump stops following
    assert page.locator(".log-line").count() < 500
    page.locator(".logview").evaluate("e => { e.scrollTop = 0; }")
    expect(page.locator(".log-line[data-line='1']")).to_contain_text("line 0 of the log")
    with page.expect_download() as dl:
        page.click(".log-tools button:text('Download')")
    lines = Path(dl.value.path()).read_text().splitlines()
    assert len(lines) == n and lines[-1] == f"line {n - 1} of the log"


@pytest.mark.slow
def test_compare_shows_params_side_by_side_and_marks_the_difference(server, page):
    c = server.client()
    code = "import trainyard; [trainyard.log_metrics(step=s, acc=s * p) for s in range(3) for p in [trainyard.params()['lr']]]"
    a = c.submit(py_job(code, name="run-a", params={"lr": 0.1, "epochs": 3}))
    b = c.submit(py_job(code, name="run-b", params={"lr": 0.2, "epochs": 3}))
    for j in (a, b):
        assert j.wait(timeout=60).status.value == "succeeded"
    open_signed_in(page, server.url, server.token, f"/compare?jobs={a.id},{b.id}")
    expect(page.locator("tr[data-param=lr] td.differs")).to_have_count(2, timeout=30_000)
    expect(page.locator("tr[data-param=epochs] td.differs")).to_have_count(0)
    expect(page.locator("tr[data-param=lr]")).to_contain_text("0.2")
    chart = page.locator(".chart[data-metric=acc]")
    expect(chart.locator("canvas")).to_have_count(1)
    expect(chart.locator(".u-legend")).to_contain_text("run-a")
    expect(chart.locator(".u-legend")).to_contain_text("run-b")
    screenshot(page, "compare")


def test_the_jobs_a_label_picks_or_the_ones_ticked_are_compared_from_the_jobs_list(server, page):
    c = server.client()
    made = (("cmp-a", 0.1, "cmp-label"), ("cmp-b", 0.3, "cmp-label"), ("cmp-c", 0.5, "cmp-x"))
    a, b, other = (c.submit({"name": n, "command": "true", "params": {"lr": lr}, "labels": {"exp": exp}})
                   for n, lr, exp in made)
    open_signed_in(page, server.url, server.token, "/jobs?label=exp%3Dcmp-label")
    page.wait_for_selector(f"tr[data-id={a.id}]")
    expect(page.locator("#compare-selected")).to_have_text("Compare these")
    page.click("#compare-selected")
    page.wait_for_url(re.compile(r"/compare\?label=exp%3Dcmp-label$"))
    expect(page.locator("p.by-label")).to_have_text("The jobs labelled exp=cmp-label.")
    expect(page.locator("tr[data-param=lr] td.differs")).to_have_count(2, timeout=30_000)
    assert page.input_value("textarea[name=jobs]") == f"{a.id}, {b.id}"  # oldest first, as submitted
    # ticked rows are compared whatever the filter; one alone is not a comparison
    open_signed_in(page, server.url, server.token, "/jobs")
    page.check(f"tr[data-id={other.id}] input[type=checkbox]")
    expect(page.locator("#compare-selected")).to_be_disabled()
    page.check(f"tr[data-id={a.id}] input[type=checkbox]")
    expect(page.locator("#compare-selected")).to_have_text("Compare selected (2)")
    page.click("#compare-selected")
    page.wait_for_url(re.compile(r"/compare\?jobs="))
    expect(page.locator("tr[data-param=lr] td.differs")).to_have_count(2, timeout=30_000)
    assert sorted(page.input_value("textarea[name=jobs]").split(", ")) == sorted([a.id, other.id])


@pytest.mark.slow
def test_resubmit_with_other_params_submits_a_copy_with_the_new_values(server, page):
    c = server.client()  # a pipeline step's job: the copy is the user's, without the run's own labels
    step = {"command": py_job("print('hi')")["command"], "params": {"lr": 0.1, "tag": "base"}, "labels": {"exp": "a"}}
    run = c.pipelines.wait(c.pipelines.run({"steps": {"tune": step}}).id, timeout=120)
    assert run.status.value == "succeeded", run.reason
    job = c.job(run.steps[0].job_id)
    assert job.info.spec.labels == {"exp": "a", "trainyard.io/pipeline-run": run.id, "trainyard.io/step": "tune"}
    open_job(page, server, job.id)
    page.click("button[name=resubmit-params]")
    page.fill("input[name=param-lr]", "not a number")
    page.click("form.params button[type=submit]")
    expect(page.locator("form.params .error")).to_contain_text("params.lr")
    page.fill("input[name=param-lr]", "0.5")
    page.click("form.params button[type=submit]")
    page.wait_for_url(re.compile(r"/jobs/(?!" + re.escape(job.id) + ")"))
    copy = c.get(page.url.rsplit("/", 1)[-1])
    assert copy.spec.params == {"lr": 0.5, "tag": "base"} and copy.spec.labels == {"exp": "a"}
    assert copy.spec.command == job.info.spec.command and copy.name == job.info.name


@pytest.mark.slow
def test_compare_takes_a_pipelines_step_jobs(server, page, tmp_path):
    (tmp_path / "train.py").write_text("import sys, trainyard\nfor s in range(3): trainyard.log_metrics(step=s, acc=s * float(sys.argv[1]))\n")
    (tmp_path / "p.yaml").write_text(
        "name: sweep\nsteps:\n  train:\n    foreach: [1, 2]\n    command: python train.py {{item}}\n")
    run = server.client().pipelines.run(tmp_path / "p.yaml")
    info = server.client().pipelines.wait(run.id, timeout=120)
    assert info.status.value == "succeeded", info.reason
    open_signed_in(page, server.url, server.token, f"/compare?pipeline={run.id}")
    legend = page.locator(".chart[data-metric=acc] .u-legend")
    expect(legend).to_contain_text("train-0", timeout=30_000)
    expect(legend).to_contain_text("train-1")
    assert sorted(page.locator("textarea[name=jobs]").input_value().split(", ")) == sorted(s.job_id for s in info.steps)


@pytest.mark.slow
def test_a_job_that_waits_for_another_names_it_links_it_and_starts_after_it(server, page, tmp_path):
    go = tmp_path / "go"
    first = server.client().submit(py_job(f"import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.05)",
                                          name="first"))
    second = server.client().submit({**py_job("print('second ran')", name="second"), "after": [first.id]})
    open_job(page, server, second.id)
    after = page.locator(".facts .after")
    expect(after).to_have_text(f"{first.id} succeeded")
    expect(page.locator(".facts .reason")).to_contain_text(f"waits for {first.id}")
    go.write_text("")
    expect(page.locator("h1 [data-status=succeeded]")).to_be_visible(timeout=30_000)  # live: no reload
    after.locator(f"a[data-job='{first.id}']").click()
    page.wait_for_url(f"**/jobs/{first.id}")


@pytest.mark.slow
def test_a_log_drawn_before_its_stylesheet_arrives_still_holds_only_a_screenful(server, page):
    n = 5_000
    job = server.client().submit(py_job(f"for i in range({n}): print(f'line {{i}}')", name="early"))
    assert job.wait(timeout=60).status.value == "succeeded"
    held = []  # the page's stylesheet, kept back as a slow network (or a loaded machine) would
    page.route("**/ui/views.css", lambda route: held.append(route))
    open_signed_in(page, server.url, server.token, f"/jobs/{job.id}")
    expect(page.locator(".count")).to_have_text(f"{n:,} lines · ended", timeout=30_000)
    assert held and page.locator(".log-line").count() < 500  # drawn with no height of its own yet
    held[0].continue_()
    expect(page.locator(".logview")).to_have_css("height", "380px")
    expect(page.locator(".log-line", has_text=f"line {n - 1}")).to_be_visible()  # redrawn at its height
    assert page.locator(".log-line").count() < 40


def test_a_jobs_labels_show_among_its_facts(server, page):
    job = server.client().submit({"name": "tagged", "command": "true",
                                  "labels": {"experiment": "baseline", "team.example.com/owner": "ann"}})
    open_job(page, server, job.id)
    expect(page.locator(".facts .labels code")).to_have_text(["experiment=baseline", "team.example.com/owner=ann"])


def test_labels_are_changed_from_the_job_page_and_a_refusal_is_shown_there(server, page):
    job = server.client().submit({"name": "relabelled", "command": "true", "labels": {"stage": "dev"}})
    open_job(page, server, job.id)
    page.locator("button[name=edit-labels]").click()
    box, said = page.locator("input[name=labels]"), page.locator(".labels-error")

    box.fill("best=yes stage-")
    page.locator("button[name=apply-labels]").click()

    expect(page.locator(".facts .labels code")).to_have_text(["best=yes"])
    assert server.client().get(job.id).spec.labels == {"best": "yes"}
    box.fill("best=no")  # set to another value: only with overwrite
    page.locator("button[name=apply-labels]").click()
    expect(said).to_contain_text("already has label best=yes")
    page.locator("input[name=overwrite]").check()
    page.locator("button[name=apply-labels]").click()
    expect(page.locator(".facts .labels code")).to_have_text(["best=no"])
    expect(said).to_have_text("")
    box.fill("trainyard.io/sweep=s-1")  # refused by the server, naming why
    page.locator("button[name=apply-labels]").click()
    expect(said).to_contain_text("trainyard's own")
    box.fill("oops")  # neither form: said before asking
    page.locator("button[name=apply-labels]").click()
    expect(said).to_have_text("oops: write key=value to set a label, key- to remove it")
    box.fill("constructor=1 constructor-")
    page.locator("button[name=apply-labels]").click()
    expect(said).to_have_text("constructor-: label constructor is given twice")
    screenshot(page, "job-labels")
    assert server.client().get(job.id).spec.labels == {"best": "no"}
