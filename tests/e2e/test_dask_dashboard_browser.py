"""A cluster's Dask dashboard opened in a real browser through the trainyard server: signed in by the UI's cookie,
its live plots drawn over the WebSocket the server relays to the scheduler (mutual TLS on that side); on a server
with users, from the port `trainyard cluster dashboard` opens on this machine."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect as ws_connect

from tests.conftest import need_module
from tests.support.browser import open_signed_in, screenshot, serve_cookie
from tests.e2e.helpers import until
from tests.support.servers import ServerProcess

pytestmark = pytest.mark.slow
need_module("dask.array", "pip install 'trainyard[dask]'")


def running(tmp_path_factory, *flags: str):  # noqa: ANN201
    from trainyard.dask import new_cluster

    srv = ServerProcess(tmp_path_factory.mktemp("dask-dashboard") / "home", [*flags, "--cpus", "4", "--memory", "8Gi"])
    srv.start()
    try:
        with new_cluster(client=srv.client(), workers=1, worker_cpu="500m", worker_memory="1Gi") as made:
            made.get_client().wait_for_workers(1, timeout=60)
            yield srv, made
    finally:
        srv.stop_all()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from running(tmp_path_factory)


@pytest.fixture(scope="module")
def users_cluster(tmp_path_factory):
    yield from running(tmp_path_factory, "--auth")


def test_a_browser_signed_in_to_the_ui_sees_the_dashboards_live_plots(cluster, page):
    server, made = cluster
    dashboard = made.info.dashboard  # /api/v1/clusters/ID/dashboard/status
    # given a browser that has not signed in: sent to the UI's sign-in page
    answer = httpx.get(server.url + dashboard, headers={"Accept": "text/html"})
    assert answer.status_code == 303 and answer.headers["location"] == "/login?next=" + dashboard
    seen: list[str] = []
    page.on("websocket", lambda ws: seen.append(ws.url))
    page.goto(server.url + dashboard)
    page.wait_for_url("**/login?next=**")
    # when it signs in there
    page.fill("input[name=token]", server.token)
    page.click("form.login button[type=submit]")
    # then it is back on the dashboard, where Bokeh draws the live plots, their document over the relayed WebSocket
    page.wait_for_url(server.url + dashboard)
    page.wait_for_selector("canvas", timeout=60_000)
    assert any(url.startswith(server.url.replace("http", "ws", 1) + dashboard) for url in seen), seen
    screenshot(page, "dask-dashboard")


def test_through_the_nginx_front_the_live_plots_draw_too(tmp_path_factory, page):
    from tests.e2e.test_front_nginx import nginx_installed

    nginx_installed()
    # given a server behind its nginx front, whose fast path takes /serve/ only: a dashboard's pages and WebSocket go
    # through nginx's other location to the Python server
    for server, made in running(tmp_path_factory, "--front", "nginx", "--container-runtime", "none"):
        seen: list[str] = []
        page.on("websocket", lambda ws: seen.append(ws.url))
        open_signed_in(page, server.url, server.token, "/")
        serve_cookie(page, "/api/v1/clusters/")
        # when the signed-in browser opens the dashboard, then Bokeh draws over the relayed WebSocket
        page.goto(server.url + made.info.dashboard)
        page.wait_for_selector("canvas", timeout=60_000)
        assert any(url.startswith(server.url.replace("http", "ws", 1) + made.info.dashboard) for url in seen), seen


def test_the_websocket_takes_the_cookie_only_from_this_origin_and_no_stranger(cluster):
    server, made = cluster
    url = server.url.replace("http", "ws", 1) + made.info.dashboard + "/ws"
    cookie = httpx.post(server.url + "/api/v1/serve-session", headers=server.headers).headers.get_list("set-cookie")
    jar = {"Cookie": next(c for c in cookie if "Path=/api/v1/clusters/" in c).split(";")[0]}
    for headers in ({}, {**jar, "Origin": "http://evil.example"}, {"Authorization": "Bearer nope"}):
        with pytest.raises(InvalidStatus) as refused:
            ws_connect(url, additional_headers=headers, open_timeout=10)
        assert refused.value.response.status_code in (401, 403), headers
    # the cookie from this origin gets through, to Bokeh itself, which closes a connection without its session token
    with ws_connect(url, additional_headers={**jar, "Origin": server.url}, open_timeout=10) as ws:
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=30)
    assert closed.value.rcvd.code == 1000  # the scheduler's close, passed on (a broken relay closes with 1014)


def test_bokehs_session_token_travels_in_the_subprotocols_and_its_protocol_answers(cluster):
    server, made = cluster
    page = httpx.get(server.url + made.info.dashboard, headers=server.headers, timeout=30).text
    token = re.search(r'"token":\s*"([^"]+)"', page)
    assert token, page[:2000]
    url = server.url.replace("http", "ws", 1) + made.info.dashboard + "/ws"
    with ws_connect(url, additional_headers=server.headers, subprotocols=["bokeh", token[1]], open_timeout=10) as ws:
        assert ws.subprotocol == "bokeh"
        header = json.loads(ws.recv(timeout=30))  # a Bokeh message is its header, metadata and content
        assert header["msgtype"] == "ACK", header


def test_with_users_a_browser_is_sent_to_a_port_of_its_own_where_the_plots_draw(users_cluster, page):
    server, made = users_cluster
    # given a server with users, where the scheduler's pages would act as their visitor: a browser signed in to the UI
    # is told of `trainyard cluster dashboard`, not given a sandboxed page that draws nothing
    open_signed_in(page, server.url, server.token, "/")
    serve_cookie(page, "/api/v1/clusters/")
    told = page.goto(server.url + made.info.dashboard)
    assert told.status == 403 and page.inner_text("#command") == f"trainyard cluster dashboard {made.id}"
    cookies = httpx.post(server.url + "/api/v1/serve-session", headers=server.headers).headers.get_list("set-cookie")
    jar = {"Cookie": next(c for c in cookies if "Path=/api/v1/clusters/" in c).split(";")[0]}
    older = httpx.get(server.url + made.info.dashboard, headers={**jar, "Accept": "text/html"})  # no Fetch Metadata
    assert older.status_code == 403 and "trainyard cluster dashboard" in older.text
    pages = httpx.get(server.url + made.info.dashboard, headers=server.headers, timeout=30)  # a program still reads it
    assert pages.status_code == 200 and pages.headers["content-security-policy"].startswith("sandbox ")
    shown = server.cli("cluster", "show", made.id, env={"COLUMNS": "300"})
    assert f"(or on a port of this machine: trainyard cluster dashboard {made.id})" in shown.stdout, shown.stdout
    # when the CLI opens its port
    cli = subprocess.Popen([sys.executable, "-m", "trainyard", "cluster", "dashboard", made.id, "--no-browser"],
                           env={**server.env, "TRAINYARD_SERVER": server.url}, stdout=subprocess.PIPE, text=True)
    try:
        line = cli.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/\?key=\S+", line)
        assert url, line
        base = url[0].split("/?")[0]
        # then without the key the port answers nothing; with it the live plots draw, and the token stays with the CLI
        assert httpx.get(base + made.info.dashboard).status_code == 403
        assert httpx.get(base + "/?key=wrong").status_code == 403
        page.goto(url[0])
        page.wait_for_selector("canvas", timeout=60_000)
        assert page.url == base + made.info.dashboard
        assert server.token not in page.content()
        screenshot(page, "dask-dashboard-port")
    finally:
        cli.send_signal(signal.SIGINT)
        assert cli.wait(30) == 0


def test_a_notebook_opens_the_same_port_in_a_thread_and_stops_it(users_cluster):
    _, made = users_cluster
    forward = made.dashboard_forward()
    try:
        with httpx.Client(follow_redirects=True, timeout=30) as browser:  # keeps the cookie the key turns into
            until(lambda: browser.get(forward.url).status_code == 200, timeout=30)
            status = browser.get(forward.url)
            assert str(status.url).endswith(made.info.dashboard) and "Dask" in status.text
            assert "content-security-policy" not in status.headers  # an origin of its own: no sandbox needed
            # the CLI's token goes only to the dashboard's paths: not to the API, not by climbing out with ".."
            base = forward.url.split("/?")[0]
            assert browser.get(base + "/api/v1/jobs").status_code == 404
            climb = base + made.info.dashboard.rsplit("/", 1)[0] + "/%2e%2e/%2e%2e/%2e%2e/jobs"
            assert browser.get(climb).status_code == 404
    finally:
        forward.stop()
    until(lambda: _refused(forward.url), timeout=30)


def _refused(url: str) -> bool:
    try:
        httpx.get(url, timeout=2)
    except httpx.TransportError:
        return True
    return False


def test_the_clusters_pages_list_show_scale_link_the_dashboard_and_delete(cluster, page):
    from playwright.sync_api import expect

    from trainyard.dask import new_cluster

    server, made = cluster
    spare = new_cluster(client=server.client(), workers=0, name="spare")  # to delete from its page
    # given the list: each cluster with its status, workers running of wanted and its dashboard
    open_signed_in(page, server.url, server.token, "/clusters")
    expect(page.locator("#nav a[data-nav=clusters]")).to_have_class("active")
    row = page.locator(f"tr[data-cluster='{made.id}']")
    expect(row.locator("td.workers")).to_have_text("1/1")  # running/wanted
    expect(page.locator(f"tr[data-cluster='{spare.id}'] td.workers")).to_have_text("0/0")
    expect(row).to_have_attribute("data-status", "running")
    expect(row.locator("a[target=_blank]")).to_have_attribute("href", made.info.dashboard)
    expect(page.locator(f"tr[data-cluster='{spare.id}']")).to_be_visible()
    # when one is opened: its scheduler, its worker's job linked, the dashboard's way in on either kind of server
    row.locator(f"a[href='/clusters/{made.id}']").click()
    expect(page.locator("dd[data-key=scheduler]")).to_have_text(made.scheduler_address)
    [worker] = made.refresh().worker_jobs
    expect(page.locator(f"tr[data-job='{worker.job_id}'] a")).to_have_attribute("href", f"/jobs/{worker.job_id}")
    expect(page.locator("a.open-dashboard")).to_have_attribute("href", made.info.dashboard)
    expect(page.locator(".dashboard code")).to_have_text(f"trainyard cluster dashboard {made.id}")
    # and scaled to 2 from the page, the server wants 2, and the page shows the second worker once it runs
    page.fill("form.scale input[name=workers]", "2")
    page.click("form.scale button[name=scale]")
    expect(page.locator("dd[data-key=workers]")).to_have_text("2 running of 2 wanted", timeout=60_000)
    assert made.refresh().workers == 2
    page.fill("form.scale input[name=workers]", "1")
    page.click("form.scale button[name=scale]")
    expect(page.locator("dd[data-key=workers]")).to_have_text("1 running of 1 wanted", timeout=60_000)
    screenshot(page, "clusters")
    # and the spare one deleted once confirmed
    page.goto(f"{server.url}/clusters/{spare.id}")
    page.once("dialog", lambda d: d.accept())
    page.click("button[name=delete]")
    until(lambda: spare.refresh().status.value == "stopped", timeout=60)
    expect(page.locator("h1 .badge")).to_have_text("stopped", timeout=30_000)
    expect(page.locator(".dashboard")).to_have_text("No dashboard now.")
    expect(page.locator("button[name=delete]")).to_be_disabled()
