"""The command's environment: what the launcher sets, and what wins over what."""

from __future__ import annotations

from pathlib import Path

from trainyard.launch.config import LaunchConfig
from trainyard.launch.prepare import build_env, env_name


def config(**kw) -> LaunchConfig:
    return LaunchConfig(job_id="j1", attempt_id="a1", attempt=2, server="http://x", command=["true"], **kw)


def test_sets_trainyard_variables_and_creates_dirs(tmp_path):
    env = build_env(config(), tmp_path, {}, base={"HOME": "/home/me"})
    assert env["HOME"] == "/home/me"
    assert env["TRAINYARD_JOB_ID"] == "j1"
    assert env["TRAINYARD_ATTEMPT"] == "2"
    assert env["TRAINYARD_OUTPUT_DIR"] == str(tmp_path / "outputs")
    assert env["TRAINYARD_CHECKPOINT_DIR"] == str(tmp_path / "checkpoints")
    assert env["TRAINYARD_METRICS_FILE"] == str(tmp_path / "metrics.jsonl")
    assert env["PYTHONUNBUFFERED"] == "1"
    assert (tmp_path / "outputs").is_dir() and (tmp_path / "checkpoints").is_dir()


def test_checkpoint_dir_from_config(tmp_path):
    ckpt = tmp_path / "shared" / "ckpt"
    env = build_env(config(checkpoint_dir=str(ckpt)), tmp_path, {}, base={})
    assert env["TRAINYARD_CHECKPOINT_DIR"] == str(ckpt) and ckpt.is_dir()


def test_no_gpus_means_empty_cuda_visible_devices(tmp_path):
    env = build_env(config(), tmp_path, {}, base={"CUDA_VISIBLE_DEVICES": "0,1,2,3"})
    assert env["CUDA_VISIBLE_DEVICES"] == ""
    env = build_env(config(gpus=["1", "3"]), tmp_path, {}, base={})
    assert env["CUDA_VISIBLE_DEVICES"] == "1,3"


def test_the_gpu_numbers_are_cudas_in_the_order_nvml_counts_them(tmp_path):
    # the ids are NVML's (PCI bus order); CUDA counts the fastest GPU first unless told, so on a node of mixed GPUs
    # "1,3" would name two others, whatever the job's own environment says
    env = build_env(config(gpus=["1", "3"], env={"CUDA_DEVICE_ORDER": "FASTEST_FIRST"}), tmp_path, {}, base={})
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"


def test_precedence_os_then_config_then_launcher(tmp_path):
    base = {"A": "os", "B": "os", "TRAINYARD_JOB_ID": "os"}
    cfg = config(env={"B": "spec", "TRAINYARD_JOB_ID": "spec", "TRAINYARD_PARAMS": '{"lr": 1}'})
    env = build_env(cfg, tmp_path, {}, base=base)
    assert env["A"] == "os" and env["B"] == "spec"
    assert env["TRAINYARD_JOB_ID"] == "j1"
    assert env["TRAINYARD_PARAMS"] == '{"lr": 1}'


def test_inputs_named_in_upper_case_with_underscores(tmp_path):
    env = build_env(config(), tmp_path, {"train-data.v2": "/data/x", "imgs": "/data/y"}, base={})
    assert env["TRAINYARD_INPUT_TRAIN_DATA_V2"] == "/data/x"
    assert env["TRAINYARD_INPUT_IMGS"] == "/data/y"
    assert env_name("é-x") == "__X"


def test_venv_goes_first_on_path(tmp_path):
    venv = tmp_path / "venv"
    env = build_env(config(), tmp_path, {}, venv=venv, base={"PATH": "/usr/bin", "PYTHONHOME": "/x"})
    assert env["PATH"] == f"{venv / 'bin'}:/usr/bin"
    assert env["VIRTUAL_ENV"] == str(venv)
    assert "PYTHONHOME" not in env


def test_config_round_trip(tmp_path):
    cfg = config(gpus=["0"], memory_limit=123, inputs={"a": "/x"})
    cfg.write(tmp_path)
    assert LaunchConfig.read(Path(tmp_path)) == cfg


def test_server_tokens_are_not_passed_on_to_the_command(tmp_path):
    base = {"TRAINYARD_SERVER_TOKEN": "server-secret", "TRAINYARD_TOKEN": "user-secret", "HOME": "/home/me"}
    env = build_env(config(token="attempt-secret"), tmp_path, {}, base=base)
    assert "TRAINYARD_SERVER_TOKEN" not in env and "TRAINYARD_TOKEN" not in env
    assert not any("secret" in v for v in env.values()) and env["HOME"] == "/home/me"


def test_store_credentials_reach_no_job_run_as_another_account(tmp_path):
    base = {"AWS_ACCESS_KEY_ID": "AKIA", "AWS_SECRET_ACCESS_KEY": "s3-secret", "AWS_SESSION_TOKEN": "t-secret",
            "AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://169.254.170.23/v1/credentials",
            "AWS_CONTAINER_AUTHORIZATION_TOKEN": "ecs-secret", "AWS_WEB_IDENTITY_TOKEN_FILE": "/var/run/irsa",
            "AWS_ROLE_ARN": "arn:aws:iam::1:role/r", "AWS_PROFILE": "node", "AZURE_STORAGE_CONNECTION_STRING": "az",
            "GOOGLE_APPLICATION_CREDENTIALS": "/etc/g.json", "GCE_METADATA_HOST": "h", "FSSPEC_S3_KEY": "k",
            "AWS_DEFAULT_REGION": "eu-west-1", "AWS_ENDPOINT_URL": "http://minio:9000", "AWS_CA_BUNDLE": "/ca.pem"}
    run_as = {"uid": 1234, "gid": 1234, "name": "alice"}
    env = build_env(config(run_as=run_as, env={"AWS_PROFILE": "own"}), tmp_path, {}, base=base)
    assert {k: v for k, v in env.items() if k in base} == {
        "AWS_DEFAULT_REGION": "eu-west-1", "AWS_ENDPOINT_URL": "http://minio:9000", "AWS_CA_BUNDLE": "/ca.pem",
        "AWS_PROFILE": "own"}  # where the store is is no secret; the job's own variables are its own
    # a job of the server's own account could read ~/.aws anyway: it keeps what it inherits
    assert build_env(config(), tmp_path, {}, base=base)["AWS_SECRET_ACCESS_KEY"] == "s3-secret"
