"""The component catalog: folders, URLs served by a real HTTP server, the digest cache, and running offline."""

import functools
import http.server
import threading
from pathlib import Path

import pytest

from trainyard.config import ServerSettings
from trainyard.errors import InvalidSpec
from trainyard.pipelines.catalog import Catalog
from trainyard.pipelines.kfp_component import digest_of
from trainyard.pipelines.special import expand_step

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "components"
COMPONENT = (EXAMPLES / "scale" / "component.yaml").read_text()


class Served:
    """A folder served over HTTP on 127.0.0.1, stoppable mid-test (as a network going away would be)."""

    def __init__(self, folder: Path) -> None:
        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
        handler.log_message = lambda *a, **k: None
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def stop(self) -> None:
        if self.thread.is_alive():
            self.httpd.shutdown()
            self.httpd.server_close()
            self.thread.join(5)


@pytest.fixture
def served(tmp_path):
    folder = tmp_path / "www"
    (folder / "scale").mkdir(parents=True)
    (folder / "scale" / "component.yaml").write_text(COMPONENT)
    (folder / "twice.yaml").write_text((EXAMPLES / "scale_twice.yaml").read_text())
    srv = Served(folder)
    yield srv
    srv.stop()


def test_a_component_by_url_runs_offline_once_cached(served, tmp_path):
    cache = tmp_path / "home" / "components"
    url = f"{served.url}/scale/component.yaml"
    step = {"component": url, "arguments": {"numbers": "1 2"}}
    online = expand_step("s", step, Catalog([served.url], cache), {})
    assert (cache / "sha256" / f"{digest_of(COMPONENT)}.yaml").read_text() == COMPONENT
    served.stop()
    offline = expand_step("s", step, Catalog([served.url], cache), {})
    assert offline.steps == online.steps
    with pytest.raises(InvalidSpec, match=r"steps.s.component: cannot fetch .* not in the component cache"):
        expand_step("s", {"component": f"{served.url}/other.yaml", "arguments": {}}, Catalog([served.url], cache), {})


def test_a_graph_fetched_by_url_fetches_its_tasks_relative_to_it(served, tmp_path):
    catalog = Catalog([served.url], tmp_path / "cache")
    exp = expand_step("g", {"component": f"{served.url}/twice.yaml", "arguments": {"numbers": "1"}}, catalog, {})
    assert list(exp.steps) == ["g-first", "g-second"]
    served.stop()
    again = expand_step("g", {"component": f"{served.url}/twice.yaml", "arguments": {"numbers": "1"}},
                        Catalog([served.url], tmp_path / "cache"), {})
    assert again.steps == exp.steps


def test_a_name_is_found_in_a_url_catalog_and_a_folder_catalog(served, tmp_path):
    by_base = Catalog([served.url], tmp_path / "c1")
    assert expand_step("s", {"component": "scale", "arguments": {"numbers": "1"}}, by_base, {}).steps["s"]
    by_file = Catalog([f"{served.url}/scale/component.yaml"], tmp_path / "c2")
    assert expand_step("s", {"component": "Scale numbers", "arguments": {"numbers": "1"}}, by_file, {}).steps["s"]
    folder = Catalog([str(EXAMPLES)], tmp_path / "c3")
    for name in ("scale", "Scale numbers", "scale-numbers", "scale_twice", "Scale twice"):
        assert expand_step("s", {"component": name, "arguments": {"numbers": "1"}}, folder, {}).steps
    with pytest.raises(InvalidSpec, match=r"steps.s.component: no component named 'nope' in the catalog"):
        expand_step("s", {"component": "nope", "arguments": {}}, folder, {})


def test_a_digest_finds_a_cached_component_or_one_in_a_folder(tmp_path):
    digest = digest_of(COMPONENT)
    step = {"component": {"digest": f"sha256:{digest}"}, "arguments": {"numbers": "1"}}
    with pytest.raises(InvalidSpec, match="no component with digest"):
        expand_step("s", step, Catalog([], tmp_path / "cache"), {})
    assert expand_step("s", step, Catalog([str(EXAMPLES)], tmp_path / "cache"), {}).steps["s"]
    assert expand_step("s", {"component": digest, "arguments": {"numbers": "1"}},
                       Catalog([], tmp_path / "cache"), {}).steps["s"]  # remembered from the folder


def test_a_url_whose_text_changed_is_refused_when_the_digest_is_pinned(served, tmp_path):
    url = f"{served.url}/scale/component.yaml"
    step = {"component": {"url": url, "digest": "0" * 64}, "arguments": {"numbers": "1"}}
    with pytest.raises(InvalidSpec, match=r"has digest .* not the 000000000000"):
        expand_step("s", step, Catalog([served.url], tmp_path / "cache"), {})


def test_a_url_a_user_names_is_fetched_over_http_from_a_public_address_only(served, tmp_path):
    """The server's files, its store credentials and the networks it reaches are not a user's to read through a
    component, whose parse errors quote what came back."""
    secret = tmp_path / "server.yaml"
    secret.write_text("db: postgresql://admin:pw@db/trainyard\n")
    catalog = Catalog([str(EXAMPLES)], tmp_path / "cache")
    for ref, said in [(f"{served.url}/scale/component.yaml", "127.0.0.1 is a private address"),
                      (f"file://{secret}", "only http(s) URLs are fetched"),
                      (f"local://{secret}", "only http(s) URLs are fetched"),
                      ({"url": str(secret)}, "not found"),
                      ({"url": "file:///etc/passwd"}, "only http(s) URLs are fetched")]:
        with pytest.raises(InvalidSpec) as e:
            expand_step("s", {"component": ref, "arguments": {}}, catalog, {})
        assert said in str(e.value) and "admin" not in str(e.value), (ref, str(e.value))
    assert Catalog([f"{served.url}/"], tmp_path / "c2").trusted(f"{served.url}/scale/component.yaml")
    assert not Catalog([served.url], tmp_path / "c2").trusted(f"{served.url}.evil.example/x.yaml")


def test_the_catalog_comes_from_the_server_settings(tmp_path):
    settings = ServerSettings(home=tmp_path, component_catalog=[str(EXAMPLES)])
    catalog = Catalog.from_settings(settings)  # as the server's platform makes it
    assert catalog.sources == [str(EXAMPLES)] and catalog.cache_dir == tmp_path / "components"
    assert expand_step("s", {"component": "scale", "arguments": {"numbers": "1"}}, catalog, {}).steps


def test_a_redirect_out_of_the_catalog_to_a_private_host_is_refused_and_no_cached_copy_stands_in(served, tmp_path):
    url = f"{served.url}/scale/component.yaml"

    class Redirect(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            self.send_response(302)
            self.send_header("Location", url)
            self.end_headers()

        def log_message(self, *args):
            pass

    hop = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=hop.serve_forever, daemon=True).start()
    try:
        via = f"http://127.0.0.1:{hop.server_address[1]}/c.yaml"
        cache = tmp_path / "cache"
        assert expand_step("s", {"component": via, "arguments": {"numbers": "1"}},  # all the admin's: followed
                           Catalog([via, served.url], cache), {}).steps["s"]
        with pytest.raises(InvalidSpec, match="127.0.0.1 is a private address"):  # the hop's target is not
            expand_step("s", {"component": via, "arguments": {"numbers": "1"}}, Catalog([via], cache), {})
        with pytest.raises(InvalidSpec, match="127.0.0.1 is a private address"):  # fetched before, refused now
            expand_step("s", {"component": url, "arguments": {"numbers": "1"}}, Catalog([], cache), {})
    finally:
        hop.shutdown()
        hop.server_close()


def test_a_public_url_is_fetched_from_the_address_that_was_checked_by_its_name(served, tmp_path, monkeypatch):
    """The name resolves once: the request goes to the address checked (not resolved again: DNS rebinding), with
    the name in Host. Here a name of this test's stands for a public host, and its checked address is loopback."""
    from trainyard.pipelines import fetch

    port = served.url.rsplit(":", 1)[1]
    asked = []
    monkeypatch.setattr(fetch, "public_address", lambda url: asked.append(url) or "127.0.0.1")
    real = fetch.socket.getaddrinfo
    monkeypatch.setattr(fetch.socket, "getaddrinfo", lambda host, *a, **k: pytest.fail(f"{host} resolved again")
                        if host == "components.example" else real(host, *a, **k))
    url = f"http://components.example:{port}/scale/component.yaml"
    step = expand_step("s", {"component": url, "arguments": {"numbers": "1"}}, Catalog([], tmp_path / "c"), {})
    assert step.steps["s"] and asked == [url]
