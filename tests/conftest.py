"""Shared fixtures: databases (SQLite and a real PostgreSQL), in-process apps, real servers.

A test that needs a server it cannot start here skips on a laptop but fails on
CI (``CI=true``), so CI never passes by skipping.
"""

from __future__ import annotations

import importlib
import os
import secrets
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.support.pg import PostgresServer, find_pg_bin
from tests.support.servers import ServerProcess

pytest_plugins = ["tests.support.groups"]

CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def need(condition: bool, why: str) -> None:
    """Skip on a laptop, fail on CI, when ``condition`` is false (also at module level)."""
    if not condition:
        if CI:
            pytest.fail(f"required on CI: {why}")
        pytest.skip(why, allow_module_level=True)


def need_readonly_mounts() -> None:
    """A root launcher's read-only bind mounts, by the ``need`` rule: root with CAP_SYS_ADMIN and
    util-linux's ``unshare`` (CI runs as root with them); given those, the launcher's own probe must
    find the mounts usable, else the test fails rather than skips."""
    from trainyard.launch import readonly

    status = Path("/proc/self/status").read_text() if Path("/proc/self/status").exists() else ""
    caps = next((int(line.split()[1], 16) for line in status.splitlines() if line.startswith("CapEff:")), 0)
    need(os.geteuid() == 0 and bool(caps >> 21 & 1) and shutil.which("unshare") is not None,
         "read-only bind mounts need root with CAP_SYS_ADMIN and util-linux's unshare")
    assert readonly.usable(), "root with CAP_SYS_ADMIN, yet a read-only bind mount in a new mount namespace failed"


def need_module(name: str, install: str):  # noqa: ANN201
    """``name`` imported, by the ``need`` rule: an optional dependency (torch, ray) that CI always has."""
    try:
        return importlib.import_module(name)
    except ImportError:
        need(False, f"{name} is not installed ({install})")


@pytest.fixture(scope="session")
def shared_ray_cluster(tmp_path_factory):
    """The session's one three-node Ray cluster (``start_test_cluster``), for the tests that can share it.

    A Ray cluster takes half a minute to start on CI's two cores, so the modules whose tests keep
    its nodes as they are share one. Its users (tests that need this fixture, or are marked
    ``ray_cluster`` where they ask for it at run time) run as one block, those marked
    ``ray_cluster(kills_node=True)`` last, and it is stopped after the last of them: no idle
    cluster slows the rest of the suite. Whoever launches on it uses a Ray namespace, placement
    groups and actors named by ids of its own, and releases them.
    """
    need_module("ray", "pip install 'trainyard[ray]'")
    from tests.support import ray_cluster

    yield ray_cluster.shared(tmp_path_factory.mktemp("ray"))
    ray_cluster.stop_shared()


_LAST_RAY_USER = pytest.StashKey[pytest.Item]()


@pytest.hookimpl(trylast=True)  # after pytest's own reordering by fixture parameters
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The shared Ray cluster's users as one block, at the place of the last module's first user."""
    from tests.support.groups import uses_shared_ray as _uses_shared_ray  # registered as a plugin first: not here

    users = [i for i in items if _uses_shared_ray(i)]
    if not users:
        return
    kills = {id(i) for i in users if (m := i.get_closest_marker("ray_cluster")) and m.kwargs.get("kills_node")}
    block = [i for i in users if id(i) not in kills] + [i for i in users if id(i) in kills]
    anchor = next(i for i in users if i.path == block[-1].path)
    ordered: list[pytest.Item] = []
    for item in items:
        if item is anchor:
            ordered += block
        elif not _uses_shared_ray(item):
            ordered.append(item)
    items[:] = ordered
    config.stash[_LAST_RAY_USER] = block[-1]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):  # noqa: ANN201
    try:
        return (yield)
    finally:
        if item is item.config.stash.get(_LAST_RAY_USER, None):
            from tests.support.ray_cluster import stop_shared

            stop_shared()


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory):
    url = os.environ.get("TRAINYARD_TEST_PG_URL")
    if url:
        yield url
        return
    bin_dir = find_pg_bin()
    need(bin_dir is not None, "PostgreSQL is not installed (apt-get install postgresql)")
    # not under pytest's tmp dir: that is 0700 root, and postgres must not run as root
    root = Path(tempfile.mkdtemp(prefix="trainyard-pg-"))
    server = PostgresServer(bin_dir, root)
    server.start()
    yield server.url
    server.stop()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server):
    """A fresh, empty PostgreSQL database for one test."""
    import psycopg

    name = "t_" + secrets.token_hex(6)
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield pg_server.rsplit("/", 1)[0] + "/" + name
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request, tmp_path):
    """The same test on SQLite and on a real PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'trainyard.db'}"
    return request.getfixturevalue("pg_url")


def host_server(home: Path) -> ServerProcess:
    """A real `trainyard server` process, started, with declared capacity (2 cpus, 4Gi, 4 × A100), running
    everything on the host (tests/e2e/test_containers.py has its own with podman); ``stop_all()`` it."""
    srv = ServerProcess(home, ["--cpus", "2", "--memory", "4Gi", "--gpus", "4", "--gpu-type", "A100",
                               "--container-runtime", "none"])
    srv.start()
    return srv


@pytest.fixture
def server(tmp_path):
    """:func:`host_server` for one test."""
    srv = host_server(tmp_path / "home")
    yield srv
    srv.stop_all()


@pytest.fixture
def auth_server(tmp_path):
    """A real server with users and teams (`--auth`, 2 cpus, 4Gi): its first admin's token is in the home's
    ``first-admin-token``; without one, only the home's own token gets in."""
    srv = ServerProcess(tmp_path / "home", ["--auth", "--cpus", "2", "--memory", "4Gi"])
    srv.start()
    yield srv
    srv.stop_all()


@pytest.fixture(scope="session")
def chromium():
    """One headless Chromium for the session (Debian's, through Playwright)."""
    from tests.support.browser import chromium_path

    sync_api = need_module("playwright.sync_api", "pip install playwright")
    path = chromium_path()
    need(path is not None, "Chromium is not installed (apt-get install chromium)")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture
def page(chromium):
    """A fresh browser page (its own storage: no token left from another test) 1400×900; fails the
    test on any uncaught error in the page's scripts."""
    context = chromium.new_context(viewport={"width": 1400, "height": 900})
    p = context.new_page()
    errors: list[str] = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    yield p
    context.close()
    assert not errors, f"uncaught errors in the page: {errors}"
