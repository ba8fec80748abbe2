"""What a cluster request may say, and the jobs it becomes."""

import pytest
from pydantic import ValidationError

from trainyard.cli.clusters import pip_list
from trainyard.errors import InvalidSpec
from trainyard.services import dask_jobs
from trainyard.spec.cluster import ClusterSpec, ClusterStatus, cluster_sources


def test_units_and_defaults_are_read_like_a_jobs():
    s = ClusterSpec(worker_cpu="500m", worker_memory="2Gi", idle_timeout="5m")
    assert (s.worker_cpu, s.worker_memory, s.idle_timeout, s.workers) == (0.5, 2 * 2**30, 300.0, 2)
    assert ClusterSpec(idle_timeout="0").idle_timeout is None


@pytest.mark.parametrize("raw, field", [
    ({"worker_cpu": "lots"}, "worker_cpu"), ({"workers": -1}, "workers"), ({"kind": "spark"}, "kind"),
    ({"queue": "no spaces"}, "queue"), ({"pip": ["--index-url=x"]}, "pip"), ({"bogus": 1}, "bogus"),
])
def test_bad_fields_are_named(raw, field):
    with pytest.raises(ValidationError) as e:
        ClusterSpec.model_validate(raw)
    assert field in str(e.value)


def test_adaptive_bounds_go_together_and_in_order():
    with pytest.raises(ValidationError, match="go together"):
        ClusterSpec(adapt_min=1)
    with pytest.raises(ValidationError, match="more than adapt_max"):
        ClusterSpec(adapt_min=3, adapt_max=2)


def test_only_live_statuses_move_and_ended_ones_stay():
    assert set(cluster_sources(ClusterStatus.STOPPED)) == {"stopping"}
    assert "stopped" not in cluster_sources(ClusterStatus.FAILED)


def test_worker_and_scheduler_jobs_carry_the_clusters_resources_and_queue():
    s = ClusterSpec(worker_cpu="1500m", worker_memory="1Gi", worker_gpu=1, queue="team-a", pip=["pandas"])
    w = dask_jobs.worker_job("c-1", s, "tcp://10.0.0.1:8786")
    assert (w.queue, w.resources.cpu, w.resources.gpu, w.retry.max) == ("team-a", 1.5, 1, 0)
    assert "tcp://10.0.0.1:8786" in w.command and "--nthreads 2" in w.command and "GPU=1" in w.command
    assert w.env.pip[0] == "pandas" and w.env.pip[1].startswith("distributed==")
    sched = dask_jobs.scheduler_job("c-1", s)
    assert not sched.preemptible and "/api/v1/clusters/c-1/dashboard" in sched.command
    assert (w.labels, sched.labels["trainyard.io/dask-role"]) == (
        {"trainyard.io/dask-cluster": "c-1", "trainyard.io/dask-role": "worker"}, "scheduler")


def test_env_takes_a_requirements_file_or_packages(tmp_path):
    req = tmp_path / "requirements.txt"
    req.write_text("numpy>=1.26  # arrays\n\npandas\n")
    assert pip_list([str(req), "scipy,xarray"]) == ["numpy>=1.26", "pandas", "scipy", "xarray"]
    with pytest.raises(InvalidSpec):
        pip_list([str(tmp_path / "missing.txt")])
