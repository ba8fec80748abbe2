"""On-demand Dask clusters on a real server and the local engine, with real dask.distributed."""

from __future__ import annotations

import json
import os
import signal
import ssl
import time

import httpx
import psutil
import pytest

from tests.conftest import need_module
from tests.e2e.helpers import py_job, until
from tests.support.servers import ServerProcess

pytestmark = pytest.mark.slow
da = need_module("dask.array", "pip install 'trainyard[dask]'")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = ServerProcess(tmp_path_factory.mktemp("dask") / "home", ["--cpus", "4", "--memory", "8Gi"])
    srv.start()
    yield srv
    srv.stop_all()


def new(server, **kw):  # noqa: ANN001, ANN201
    from trainyard.dask import new_cluster

    return new_cluster(client=server.client(), worker_cpu=kw.pop("worker_cpu", "500m"),
                       worker_memory=kw.pop("worker_memory", "1Gi"), **kw)


def workers(client) -> dict:  # noqa: ANN001
    # Not client.scheduler_info(): the client's periodic refresh asks for no workers and can overwrite
    # the answer between the fetch and the return (an empty "workers" failed CI once).
    return client.sync(client.scheduler.identity, n_workers=-1)["workers"]


def n_workers(client) -> int:  # noqa: ANN001
    return len(workers(client))


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_two_worker_cluster_computes_scales_shows_its_dashboard_and_leaves_no_process(server):
    cluster = new(server, workers=2, name="etl")
    client = cluster.get_client()
    client.wait_for_workers(2, timeout=60)
    x = da.arange(100_000, chunks=10_000)
    assert int((x * 3).sum().compute()) == 3 * 99_999 * 100_000 // 2
    assert n_workers(client) == 2

    shown = json.loads(server.cli("cluster", "show", "etl", "-o", "json").stdout)
    assert shown["status"] == "running" and shown["address"] == cluster.scheduler_address
    [node] = [n.name for n in server.client().nodes()]
    assert [w["node"] for w in shown["worker_jobs"]] == [node, node] and shown["scheduler_node"] == node
    assert {w["address"] for w in shown["worker_jobs"]} == set(workers(client))
    page = httpx.get(server.url + shown["dashboard"], headers=server.headers, timeout=30)
    assert page.status_code == 200 and "Dask" in page.text  # the dashboard, through the trainyard server
    assert "content-security-policy" not in page.headers  # one user, as a service's pages (sandboxed with --auth)
    [listed] = [line for line in server.cli("cluster", "ls").stdout.splitlines() if " etl " in line]
    assert " 2/2 " in listed  # workers running/wanted, from the list's one status query
    assert shown["workers_running"] == 2

    cluster.scale(3)
    until(lambda: n_workers(client) == 3, timeout=60)
    cluster.scale(1)
    until(lambda: n_workers(client) == 1, timeout=60)

    pids = [*client.run(os.getpid).values(), client.run_on_scheduler(os.getpid)]
    info = cluster.close()
    assert info.status.value == "stopped"
    until(lambda: not any(alive(p) for p in pids), timeout=30)
    jobs = [server.client().get(j) for j in [info.scheduler_job]]
    assert all(j.status.is_terminal() for j in jobs)


def test_a_worker_killed_with_sigkill_is_replaced_and_the_computation_completes(server):
    with new(server, workers=2) as cluster:
        client = cluster.get_client()
        client.wait_for_workers(2, timeout=60)
        pids = client.run(os.getpid)
        before = {w["name"]: pids[a] for a, w in workers(client).items()}
        futures = client.map(lambda i: (time.sleep(0.3), i * i)[1], range(20), pure=False)
        victim = sorted(before)[0]
        os.kill(before[victim], signal.SIGKILL)
        assert sum(client.gather(futures)) == sum(i * i for i in range(20))
        until(lambda: n_workers(client) == 2 and victim not in
              {w["name"] for w in workers(client).values()}, timeout=60)
        info = cluster.refresh()
        assert victim not in [w.job_id for w in info.worker_jobs] and len(info.worker_jobs) == 2
        assert server.client().get(victim).status.value == "failed"


def test_adapt_grows_under_a_burst_of_tasks_and_shrinks_after(server):
    with new(server, workers=1, worker_cpu="250m") as cluster:
        client = cluster.get_client()
        client.wait_for_workers(1, timeout=60)
        cluster.adapt(minimum=1, maximum=3)
        futures = client.map(lambda i: (time.sleep(1.0), i)[1], range(40), pure=False)
        until(lambda: n_workers(client) >= 2, timeout=60)
        assert sum(client.gather(futures)) == sum(range(40))
        del futures
        until(lambda: n_workers(client) == 1, timeout=60)
        assert cluster.refresh().workers == 1


def test_an_idle_cluster_is_shut_down_after_its_idle_timeout(server):
    cluster = new(server, workers=1, idle_timeout="2s")
    info = server.client()  # no Dask client ever connects
    found = until(lambda: (c := cluster.refresh()).status.is_terminal() and c, timeout=60)
    assert found.status.value == "stopped" and "idle for 2s" in found.reason
    assert info.get(found.scheduler_job).status.is_terminal()


def test_a_lost_scheduler_fails_the_cluster_with_the_reason(server):
    cluster = new(server, workers=1, name="fragile")
    pid = cluster.get_client().run_on_scheduler(os.getpid)
    os.kill(pid, signal.SIGKILL)
    found = until(lambda: (c := cluster.refresh()).status.is_terminal() and c, timeout=60)
    assert found.status.value == "failed" and "Dask scheduler was lost" in found.reason
    assert found.scheduler_job in found.reason


def test_a_cluster_over_its_queues_quota_waits_with_a_reason(server):
    assert server.cli("queue", "create", "small", "--cpu", "1500m", "--no-borrowing").returncode == 0
    cluster = new(server, workers=2, queue="small", worker_cpu="1", wait=60)
    try:
        # the cluster says a worker waits before the scheduler's next cycle has said why
        info = until(lambda: "1 waiting" in ((c := cluster.refresh()).reason or "")
                     and any("quota" in (w.reason or "") for w in c.worker_jobs if w.status == "pending") and c,
                     timeout=60)
        waiting = [w for w in info.worker_jobs if w.status == "pending"]
        assert len(waiting) == 1 and "quota" in waiting[0].reason
        shown = server.cli("cluster", "show", cluster.id).stdout
        assert "quota" in shown and "pending" in shown
    finally:
        cluster.close()


def test_a_cluster_made_inside_a_job_ends_with_that_job(server):
    code = ("from trainyard.dask import new_cluster\n"
            "c = new_cluster(workers=1, worker_cpu='250m', worker_memory='512Mi', name='orphan')\n"
            "print('cluster', c.id, flush=True)\n")  # exits without closing it
    c = server.client()
    job = c.submit(py_job(code, name="maker"))
    assert job.wait(timeout=120).status.value == "succeeded"
    [cluster] = [x for x in json.loads(server.cli("cluster", "ls", "--all", "-o", "json").stdout)
                 if x["name"] == "orphan"]
    assert cluster["owner_job"] == job.id
    from trainyard.sdk.clusters import Clusters

    found = until(lambda: (x := Clusters(c.http).get(cluster["id"])).status.is_terminal() and x, timeout=60)
    assert found.status.value == "stopped" and f"its job {job.id} ended" in found.reason


def test_the_notebook_example_runs_as_a_job(server, tmp_path):
    need_module("papermill", "pip install 'trainyard[notebooks]'")
    import shutil
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "dask" / "cluster.ipynb"
    shutil.copy(example, tmp_path / "cluster.ipynb")
    c = server.client()
    job = c.submit(tmp_path / "cluster.ipynb", params={"n": 100000})
    assert job.wait(timeout=240).status.value == "succeeded", "".join(x.data for x in c.logs(job.id))
    assert "workers=2 total=9999900000" in "".join(x.data for x in c.logs(job.id))


def test_a_secret_reaches_the_workers_tasks(server):
    value = "dask-secret-" + "Rt4" * 8
    server.client().secrets.set("s3-key", value)
    with new(server, workers=1, secrets={"S3_KEY": "s3-key"}) as cluster:
        client = cluster.get_client()
        client.wait_for_workers(1, timeout=60)
        assert client.submit(lambda: os.environ.get("S3_KEY")).result(timeout=60) == value
    refused = server.cli("cluster", "create", "dask", "--secret", "NOPE")
    assert refused.returncode == 2 and "secrets.NOPE: no secret 'NOPE'" in refused.stderr


def test_bad_requests_name_the_field(server):
    r = server.cli("cluster", "create", "dask", "--worker-cpu", "lots")
    assert r.returncode == 2 and r.stderr.startswith("error: --worker-cpu: 'lots' is not a CPU quantity"), r.stderr
    r = httpx.post(server.url + "/api/v1/clusters", json={"workers": -1, "bogus": 1}, headers=server.headers)
    assert r.status_code == 422 and {e["field"] for e in r.json()["details"]["errors"]} == {"workers", "bogus"}
    r = server.cli("cluster", "create", "dask", "--worker-cpu", "64")
    assert r.returncode == 1 and "worker_cpu" in r.stderr
    assert server.cli("cluster", "scale", "c-nope", "2").returncode == 1


def test_the_dashboard_at_its_node_takes_only_clients_with_the_clusters_certificate(server):
    # given a running cluster, its dashboard listening on the scheduler's node
    with new(server, workers=1) as cluster:
        client = cluster.get_client()
        client.wait_for_workers(1, timeout=60)
        host = cluster.scheduler_address.split("://")[1].rsplit(":", 1)[0]
        port = client.scheduler_info()["services"]["dashboard"]
        status = f"{host}:{port}{cluster.info.dashboard}"
        # then another job of the node reaches nothing there: not over plain HTTP, not over TLS without a certificate
        with pytest.raises(httpx.HTTPError):
            httpx.get("http://" + status, timeout=10)
        anyone = ssl.create_default_context()
        anyone.check_hostname, anyone.verify_mode = False, ssl.CERT_NONE
        with pytest.raises((httpx.HTTPError, ssl.SSLError)):
            httpx.get("https://" + status, verify=anyone, timeout=10).raise_for_status()
        # a holder of the cluster's client certificate does, and so the trainyard server's proxy
        tls = cluster.security().get_connection_args("client")["ssl_context"]
        assert "Dask" in httpx.get("https://" + status, verify=tls, timeout=30).text
        page = httpx.get(server.url + cluster.info.dashboard, headers=server.headers, timeout=30)
        assert page.status_code == 200 and "Dask" in page.text


@pytest.fixture(scope="module")
def ray_server(shared_ray_cluster, tmp_path_factory):
    """On the session's shared Ray cluster (tests/conftest.py), which outlives this module: stopped
    only once Ray has released every placement group it made, so the cluster's next user starts
    with every CPU free."""
    from ray.util.state import list_placement_groups

    def released() -> bool:
        return all(p.state == "REMOVED" for p in list_placement_groups(address=shared_ray_cluster.address, limit=10_000)
                   if (p.name or "").startswith("trainyard-"))

    srv = ServerProcess(tmp_path_factory.mktemp("dask-ray") / "home",
                        ["--engine", "ray", "--ray-address", shared_ray_cluster.address])
    try:
        srv.start(timeout=90)
        yield srv
        until(released, timeout=60)
    finally:
        srv.stop()


def test_on_the_ray_engine_workers_land_on_two_nodes(ray_server):
    # 1.5 cores each: the two 2-core worker nodes hold one worker each
    with new(ray_server, workers=2, worker_cpu="1500m", worker_memory="512Mi", wait=120) as cluster:
        client = cluster.get_client()
        client.wait_for_workers(2, timeout=120)
        assert int(da.ones(1000, chunks=100).sum().compute()) == 1000
        nodes = [w.node for w in cluster.refresh().worker_jobs]
        assert len(nodes) == 2 and len(set(nodes)) == 2

