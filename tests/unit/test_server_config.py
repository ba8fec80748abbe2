"""`trainyard server --config FILE`: what the file's settings become, and how a bad one is named."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainyard.cli.server_config import load
from trainyard.config import ServerSettings
from trainyard.errors import InvalidSpec


@pytest.mark.parametrize("text", ["sample_every: 0\n", "sample_every: 0.0\n", "sample_every: '0s'\n"])
def test_sample_every_zero_turns_sampling_off(tmp_path, text):
    path = tmp_path / "server.yaml"
    path.write_text(text)
    settings = load(path)
    assert settings == {"sample_every": 0.0}
    assert ServerSettings(**settings).sample_every == 0.0


def test_durations_are_read_with_units(tmp_path):
    path = tmp_path / "server.yaml"
    path.write_text("sample_every: 2m\nidle_gpu_period: 1h\n")
    assert load(path) == {"sample_every": 120.0, "idle_gpu_period": 3600.0}


@pytest.mark.parametrize("text, field", [("sample_every: -1\n", "sample_every"),
                                         ("sample_every: soon\n", "sample_every"),
                                         ("sample_every: true\n", "sample_every"),
                                         ("idle_gpu_period: 0\n", "idle_gpu_period")])
def test_a_bad_duration_names_its_setting(tmp_path, text, field):
    path = tmp_path / "server.yaml"
    path.write_text(text)
    with pytest.raises(InvalidSpec) as e:
        load(path)
    assert [err["field"] for err in e.value.errors] == [field]


def test_the_scheduler_section_sets_the_planners_options_and_leaves_the_rest_at_their_defaults(tmp_path):
    from dataclasses import asdict, replace

    from trainyard.config import SchedulerSettings
    from trainyard.scheduler.cycle import Options

    path = tmp_path / "server.yaml"
    path.write_text("scheduler:\n  reclaim_within: 10m\n  preempt_within: off\n  max_reservations: 2\n")
    settings = ServerSettings(**load(path))
    assert Options(**settings.scheduler.model_dump()) == replace(Options(), reclaim_within=600.0,
                                                                 preempt_within=None, max_reservations=2)
    # the settings' own defaults are the planner's, field by field (max_searches is the planner's own budget)
    defaults = asdict(Options())
    defaults.pop("max_searches")
    assert SchedulerSettings().model_dump() == defaults


def test_the_servers_scheduler_loop_plans_with_the_files_options(tmp_path):
    from trainyard.services.platform import Platform

    path = tmp_path / "server.yaml"
    path.write_text("scheduler:\n  starve_after: 2h\n")
    platform = Platform(ServerSettings(**load(path), home=tmp_path / "home", container_runtime="none"))
    try:
        assert platform.loop.options.starve_after == 7200.0
    finally:
        platform.stop()


def test_start_deadline_is_read_with_units_and_reaches_the_scheduler_loop(tmp_path):
    from trainyard.services.platform import Platform

    path = tmp_path / "server.yaml"
    path.write_text("start_deadline: 2m\n")
    platform = Platform(ServerSettings(**load(path), home=tmp_path / "home", container_runtime="none"))
    try:
        assert platform.loop.start_deadline == 120.0
    finally:
        platform.stop()


@pytest.mark.parametrize("text, field", [("scheduler:\n  reclaim_within: -1\n", "scheduler.reclaim_within"),
                                         ("scheduler:\n  reclaim_within: soon\n", "scheduler.reclaim_within"),
                                         ("scheduler:\n  reserve_soon: 5m\n", "scheduler.reserve_soon"),
                                         ("scheduler:\n  max_reservations: -1\n", "scheduler.max_reservations"),
                                         ("scheduler: [reclaim_within]\n", "scheduler")])
def test_a_bad_scheduler_setting_names_its_field(tmp_path, text, field):
    from trainyard.cli.server_config import check

    path = tmp_path / "server.yaml"
    path.write_text(text)
    with pytest.raises(InvalidSpec) as e:
        check(path, lambda: ServerSettings(**load(path)))
    assert [err["field"] for err in e.value.errors] == [field]


def test_webhooks_are_read_and_a_bad_address_or_name_is_named(tmp_path):
    from trainyard.cli.server_config import check

    path = tmp_path / "server.yaml"
    path.write_text("webhooks:\n  chat: {url: 'https://hooks.example/T0/B0', format: slack, teams: [vision]}\n")
    hooks = ServerSettings(**load(path)).webhooks
    assert (hooks["chat"].url, hooks["chat"].format, hooks["chat"].teams) == ("https://hooks.example/T0/B0", "slack",
                                                                            ["vision"])
    for text, field in [("webhooks:\n  chat: {url: 'file:///etc/passwd'}\n", "webhooks.chat.url"),
                        ("webhooks:\n  chat: {url: 'http://'}\n", "webhooks.chat.url"),
                        ("webhooks:\n  chat: {url: 'http://a', format: teams}\n", "webhooks.chat.format"),
                        ("webhooks:\n  chat: {url: 'http://a', secret: x}\n", "webhooks.chat.secret"),
                        ("webhooks:\n  ../chat: {url: 'http://a'}\n", "webhooks")]:
        path.write_text(text)
        with pytest.raises(InvalidSpec) as e:
            check(path, lambda: ServerSettings(**load(path)))
        assert [err["field"] for err in e.value.errors] == [field], text


def test_retention_is_read_with_units_off_keeps_and_a_bad_value_is_named(tmp_path):
    from trainyard.cli.server_config import check

    path = tmp_path / "server.yaml"
    path.write_text("retention:\n  work_dirs: 12h\n  checkpoints: 30d\n  every: 5m\n")
    r = ServerSettings(**load(path)).retention
    assert (r.work_dirs, r.checkpoints, r.every) == (43200.0, 2592000.0, 300.0)
    path.write_text("retention:\n  work_dirs: off\n")
    r = ServerSettings(**load(path)).retention
    assert (r.work_dirs, r.checkpoints, r.every) == (None, None, 600.0)  # checkpoints: kept by default
    assert ServerSettings().retention.work_dirs == 3 * 86400.0
    assert ServerSettings().retention.keep == "keep=true"  # a job labelled keep=true stays
    path.write_text("retention:\n  jobs: 90d\n  keep: 'tier in (gold, silver)'\n")
    assert ServerSettings(**load(path)).retention.keep == "tier in (gold, silver)"
    path.write_text("retention:\n  keep: off\n")
    assert ServerSettings(**load(path)).retention.keep is None
    for text, field in [("retention:\n  work_dirs: 3 days\n", "retention.work_dirs"),
                        ("retention:\n  checkpoints: -1\n", "retention.checkpoints"),
                        ("retention:\n  every: 0\n", "retention.every"),
                        ("retention:\n  keep: a b\n", "retention.keep"),
                        ("retention:\n  keeps: 3d\n", "retention.keeps"),
                        ("retention: 3d\n", "retention")]:
        path.write_text(text)
        with pytest.raises(InvalidSpec) as e:
            check(path, lambda: ServerSettings(**load(path)))
        assert [err["field"] for err in e.value.errors] == [field], text


def test_outputs_max_is_read_with_units_and_reaches_each_launcher(tmp_path):
    from trainyard.artifacts.store import ArtifactStore
    from trainyard.services.launching import launch_configs
    from trainyard.spec.job import JobSpec
    from trainyard.spec.records import AttemptInfo, JobInfo, ReplicaInfo

    path = tmp_path / "server.yaml"
    path.write_text("outputs_max: 5Gi\n")
    settings = ServerSettings(home=tmp_path, **load(path))
    assert settings.outputs_max == 5 << 30 and ServerSettings(home=tmp_path).outputs_max == 100 << 30
    spec = JobSpec(command="true")
    job = JobInfo(id="j", name="j", status="running", queue="default", priority=100, spec=spec, created_at=0,
                  updated_at=0)
    attempt = AttemptInfo(id="j-1", job_id="j", number=1, status="running", created_at=0.0,
                          replicas=[ReplicaInfo(index=0, node="n", status="running")])
    store = ArtifactStore(f"file://{tmp_path}")
    (config,) = launch_configs(job, attempt, token="t", settings=settings, artifacts=store, server_url="http://x")
    assert config.outputs_max == 5 << 30


def test_pids_max_reaches_each_launcher_off_is_none_and_a_bad_value_is_named(tmp_path):
    from trainyard.artifacts.store import ArtifactStore
    from trainyard.cli.server_config import check
    from trainyard.services.launching import launch_configs
    from trainyard.spec.job import JobSpec
    from trainyard.spec.records import AttemptInfo, JobInfo, ReplicaInfo

    job = JobInfo(id="j", name="j", status="running", queue="default", priority=100, spec=JobSpec(command="true"),
                  created_at=0, updated_at=0)
    attempt = AttemptInfo(id="j-1", job_id="j", number=1, status="running", created_at=0.0,
                          replicas=[ReplicaInfo(index=0, node="n", status="running")])
    store = ArtifactStore(f"file://{tmp_path}")
    path = tmp_path / "server.yaml"
    for text, auth, expected in [("pids_max: 64\n", False, 64), ("pids_max: 0\n", True, None),
                                 ("sample_every: 5\n", True, 4096), ("sample_every: 5\n", False, None)]:
        path.write_text(text)
        settings = ServerSettings(home=tmp_path, auth=auth, **load(path))
        (config,) = launch_configs(job, attempt, token="t", settings=settings, artifacts=store, server_url="http://x")
        assert config.pids_max == expected, text
    # true would be read as 1 (no process could start), a fraction or text as nothing a kernel takes
    for text in ["pids_max: true\n", "pids_max: -1\n", "pids_max: lots\n", "pids_max: 1.5\n",
                 f"pids_max: {(1 << 22) + 1}\n"]:
        path.write_text(text)
        with pytest.raises(InvalidSpec) as e:
            check(path, lambda: ServerSettings(**load(path)))
        assert [err["field"] for err in e.value.errors] == ["pids_max"], text


def test_cpu_and_cpu_limit_reach_each_launcher_and_a_bad_cpu_limit_is_named(tmp_path):
    from trainyard.artifacts.store import ArtifactStore
    from trainyard.cli.server_config import check
    from trainyard.services.launching import launch_configs
    from trainyard.spec.job import JobSpec
    from trainyard.spec.records import AttemptInfo, JobInfo, ReplicaInfo

    spec = JobSpec(command="true", resources={"cpu": "1500m"})
    job = JobInfo(id="j", name="j", status="running", queue="default", priority=100, spec=spec,
                  created_at=0, updated_at=0)
    attempt = AttemptInfo(id="j-1", job_id="j", number=1, status="running", created_at=0.0,
                          replicas=[ReplicaInfo(index=0, node="n", status="running")])
    store = ArtifactStore(f"file://{tmp_path}")
    path = tmp_path / "server.yaml"
    for text, expected in [("cpu_limit: true\n", True), ("cpu_limit: false\n", False), ("sample_every: 5\n", False)]:
        path.write_text(text)
        settings = ServerSettings(home=tmp_path, **load(path))
        (config,) = launch_configs(job, attempt, token="t", settings=settings, artifacts=store, server_url="http://x")
        assert (config.cpu, config.cpu_limit) == (1.5, expected), text
    for text in ["cpu_limit: 2\n", "cpu_limit: hard\n"]:
        path.write_text(text)
        with pytest.raises(InvalidSpec) as e:
            check(path, lambda: ServerSettings(**load(path)))
        assert [err["field"] for err in e.value.errors] == ["cpu_limit"], text


def test_secrets_key_file_names_the_key_relative_to_the_config_file(tmp_path):
    # given a config naming the key file the servers sharing a database share (README, Secrets)
    (tmp_path / "etc").mkdir()
    path = tmp_path / "etc" / "server.yaml"
    path.write_text("secrets_key_file: keys/secrets.key\n")
    # then the servers' key is that file, found beside the config wherever the server was started from
    settings = ServerSettings(**load(path), home=tmp_path / "home")
    assert settings.secrets_key == tmp_path / "etc" / "keys" / "secrets.key"


def test_a_secrets_key_file_others_may_read_is_refused_naming_it(tmp_path):
    key = tmp_path / "secrets.key"
    key.write_text("x\n")
    key.chmod(0o644)
    path = tmp_path / "server.yaml"
    path.write_text(f"secrets_key_file: {key}\n")
    with pytest.raises(InvalidSpec) as e:
        load(path)
    assert [err["field"] for err in e.value.errors] == ["secrets_key_file"]
    assert "chmod 600" in e.value.errors[0]["message"]


@pytest.mark.parametrize("text, meant", [("scheduler:\n  reclaim_withn: 5m\n", "reclaim_within"),
                                         ("retention:\n  work_dir: 3d\n", "work_dirs"),
                                         ("log_kep: 64Mi\n", "log_keep")])
def test_a_misspelt_setting_names_the_one_meant(tmp_path, text, meant):
    from trainyard.cli.server_config import check

    path = tmp_path / "server.yaml"
    path.write_text(text)
    with pytest.raises(InvalidSpec) as e:
        check(path, lambda: ServerSettings(**load(path)))
    assert f"did you mean {meant!r}?" in e.value.errors[0]["message"], e.value.errors


def test_a_bad_config_is_said_as_the_servers_config_not_as_a_spec(tmp_path):
    import os
    import subprocess
    import sys

    (tmp_path / "server.yaml").write_text("sample_every: soon\n")
    env = {**os.environ, "TRAINYARD_HOME": str(tmp_path / "home")}
    r = subprocess.run([sys.executable, "-m", "trainyard", "server", "--port", "0", "--config", "server.yaml"],
                       env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "invalid spec" not in r.stderr, r.stderr
    assert r.stderr.startswith("error: invalid server config server.yaml:1 sample_every: 'soon' is not a duration"), \
        r.stderr


def test_a_bad_retention_keep_selector_names_its_setting_once(tmp_path):
    path = tmp_path / "server.yaml"
    path.write_text("retention:\n  keep: 'k in (a'\n")
    with pytest.raises(InvalidSpec) as e:
        load(path)
    assert e.value.errors[0]["message"] == "'k in (a': unbalanced parentheses"  # not "retention.keep: retention…"
    assert str(e.value) == f"invalid server config {path}:2 retention.keep: 'k in (a': unbalanced parentheses"


@pytest.mark.parametrize("text, where", [
    ("sample_every: 5\nlog_keep: lots\n", "server.yaml:2 log_keep"),  # read by the loader
    ("prices:\n  currency: EUR\n  cpu_hour: -1\n", "server.yaml:3 prices.cpu_hour"),  # by the settings' model
    ("retention:\n  every: 5m\n  jobs: soon\n", "server.yaml:3 retention.jobs"),  # in a section
    ("cpu_limit: true\nlog_kep: 64Mi\n", "server.yaml:2 log_kep"),  # an unknown setting
])
def test_a_bad_setting_is_named_with_its_line_as_a_specs_field_is(tmp_path, monkeypatch, text, where):
    from trainyard.cli.server_config import check

    monkeypatch.chdir(tmp_path)
    Path("server.yaml").write_text(text)
    with pytest.raises(InvalidSpec) as e:
        check(Path("server.yaml"), lambda: ServerSettings(**load(Path("server.yaml"))))
    assert [err["where"] for err in e.value.errors] == [where]
    assert str(e.value).startswith(f"invalid server config {where}: ")
