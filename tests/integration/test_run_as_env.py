"""A job run as an OS account sets its own environment, loader variables included, and none of it reaches what
the launcher runs as root on the way to the drop (the cgroup shim, setpriv): a library a job names in
``LD_PRELOAD`` is loaded by the job's processes, as the account, never by root's. The other way round, none of the
node's object-store credentials reach the account's command."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.conftest import need
from tests.integration.test_launcher_support import (  # noqa: F401  (report_server is a fixture)
    PYTHON, make_config, read_result, report_server,
)

MARKS = r"""
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
__attribute__((constructor)) static void mark(void) {
    const char *d = getenv("MARK_DIR");
    char p[1024];
    if (!d) return;
    snprintf(p, sizeof p, "%s/loaded-by-%d", d, (int)getuid());
    FILE *f = fopen(p, "a");
    if (f) fclose(f);
}
"""


def test_a_loader_variable_of_the_job_reaches_its_command_and_no_process_of_roots(report_server):
    need(os.geteuid() == 0 and shutil.which("setpriv") is not None, "needs root and setpriv to switch accounts")
    need(shutil.which("cc") is not None, "a C compiler (Debian's gcc) to build the library the job preloads")
    root = Path(tempfile.mkdtemp(prefix="trainyard-env-"))
    os.chmod(root, 0o711)
    try:
        (root / "marks.c").write_text(MARKS)
        subprocess.run(["cc", "-shared", "-fPIC", "-o", str(root / "marks.so"), str(root / "marks.c")], check=True)
        os.chmod(root / "marks.so", 0o755)
        marks = root / "marks"
        marks.mkdir(mode=0o777)
        marks.chmod(0o777)  # the account writes its mark too
        attempt = root / "attempt"
        make_config(attempt, report_server.url, ["/bin/sh", "-c", 'echo "preload=$LD_PRELOAD lib=$LD_LIBRARY_PATH"'],
                    run_as={"uid": 65534, "gid": 65534, "name": "nobody"},
                    env={"LD_PRELOAD": str(root / "marks.so"), "LD_LIBRARY_PATH": "/opt/cuda/lib64",
                         "MARK_DIR": str(marks)})
        os.chmod(attempt, 0o711)
        proc = subprocess.run([PYTHON, "-m", "trainyard.launch", str(attempt)], capture_output=True, timeout=60)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert read_result(attempt)["reason"] == "Succeeded", (attempt / "output.log").read_text()
        assert f"preload={root / 'marks.so'} lib=/opt/cuda/lib64" in (attempt / "output.log").read_text()
        loaded = sorted(p.name for p in marks.iterdir())
        assert "loaded-by-65534" in loaded and "loaded-by-0" not in loaded, loaded

        # a command whose name holds "=" is run, not taken for one more variable by env(1)
        odd = root / "run=1"
        odd.write_text("#!/bin/sh\necho ran as $(id -u) with $LD_LIBRARY_PATH\n")
        odd.chmod(0o755)
        make_config(attempt, report_server.url, [str(odd)], run_as={"uid": 65534, "gid": 65534, "name": "nobody"},
                    env={"LD_LIBRARY_PATH": "/opt/cuda/lib64"})
        proc = subprocess.run([PYTHON, "-m", "trainyard.launch", str(attempt)], capture_output=True, timeout=60)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "ran as 65534 with /opt/cuda/lib64" in (attempt / "output.log").read_text()
    finally:
        shutil.rmtree(root, ignore_errors=True)


# every way a store client finds the node's credentials in its environment, as a server in ECS/EKS, on GKE or with an
# Azure connection string has them; none is the job's to read
NODE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "AKIA-NODE", "AWS_SECRET_ACCESS_KEY": "node-secret", "AWS_SESSION_TOKEN": "node-session",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://127.0.0.1:9/creds", "AWS_CONTAINER_AUTHORIZATION_TOKEN": "ecs-tok",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/v2/creds", "AWS_ROLE_ARN": "arn:aws:iam::1:role/node",
    "AWS_WEB_IDENTITY_TOKEN_FILE": "/var/run/irsa/token", "AWS_PROFILE": "node-profile",
    "AWS_CONFIG_FILE": "/root/.aws/c", "AWS_SHARED_CREDENTIALS_FILE": "/root/.aws/k",
    "AZURE_STORAGE_CONNECTION_STRING": "AccountKey=azure-key", "AZURE_STORAGE_KEY": "azure-key",
    "AZURE_CLIENT_SECRET": "azure-sp", "GOOGLE_APPLICATION_CREDENTIALS": "/etc/g.json",
    "GCE_METADATA_HOST": "127.0.0.1:19", "FSSPEC_S3_SECRET": "fsspec-secret",
}
STORE_SETTINGS = {"AWS_DEFAULT_REGION": "eu-west-1", "AWS_CA_BUNDLE": "/etc/ssl/ca.pem",
                  "AWS_ENDPOINT_URL_S3": "http://minio:9000"}


def test_the_nodes_store_credentials_reach_no_job_run_as_an_account(report_server):
    need(os.geteuid() == 0 and shutil.which("setpriv") is not None, "needs root and setpriv to switch accounts")
    root = Path(tempfile.mkdtemp(prefix="trainyard-env-"))
    os.chmod(root, 0o711)
    try:
        attempt = root / "attempt"
        # the job's own variables (its env_vars, its secrets) are its to have, whatever their names
        make_config(attempt, report_server.url, ["/usr/bin/env"], run_as={"uid": 65534, "gid": 65534, "name": "nobody"},
                    env={"AWS_ACCESS_KEY_ID": "AKIA-JOB", "AZURE_STORAGE_ACCOUNT_NAME": "jobs-own"})
        os.chmod(attempt, 0o711)
        proc = subprocess.run([PYTHON, "-m", "trainyard.launch", str(attempt)], capture_output=True, timeout=60,
                              env={**os.environ, **NODE_CREDENTIALS, **STORE_SETTINGS})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        log = (attempt / "output.log").read_text()
        assert read_result(attempt)["reason"] == "Succeeded", log
        seen = dict(line.split("=", 1) for line in log.splitlines() if "=" in line)
        assert seen["AWS_ACCESS_KEY_ID"] == "AKIA-JOB" and seen["AZURE_STORAGE_ACCOUNT_NAME"] == "jobs-own"
        assert not {k for k in NODE_CREDENTIALS if k in seen and k != "AWS_ACCESS_KEY_ID"}, log
        assert not {v for v in NODE_CREDENTIALS.values() if v in log}, log
        assert {k: seen.get(k) for k in STORE_SETTINGS} == STORE_SETTINGS  # where the store is is no secret
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_job_run_as_an_account_gets_its_own_optind_past_roots_shells(report_server):
    # on the way to the drop: the mounts' sh (its own /dev/shm), setpriv, and sh again for a loader variable
    need(os.geteuid() == 0 and shutil.which("setpriv") is not None, "needs root and setpriv to switch accounts")
    root = Path(tempfile.mkdtemp(prefix="trainyard-env-"))
    os.chmod(root, 0o711)
    try:
        for value in ("7", "not a number"):
            attempt = root / f"attempt-{len(value)}"
            make_config(attempt, report_server.url, ["/usr/bin/env"], run_as={"uid": 65534, "gid": 65534},
                        env={"OPTIND": value, "LD_LIBRARY_PATH": "/opt/cuda/lib64"})
            os.chmod(attempt, 0o711)
            proc = subprocess.run([PYTHON, "-m", "trainyard.launch", str(attempt)], capture_output=True, timeout=60)
            assert proc.returncode == 0, proc.stdout + proc.stderr
            log = (attempt / "output.log").read_text()
            assert read_result(attempt)["reason"] == "Succeeded", log
            assert f"OPTIND={value}\n" in log and "LD_LIBRARY_PATH=/opt/cuda/lib64\n" in log, log
    finally:
        shutil.rmtree(root, ignore_errors=True)
