"""A real S3-compatible server on loopback: moto in server mode, as s3fs's own tests use it.

``moto_s3()`` starts one in this process (a thread serving HTTP on 127.0.0.1); the
trainyard server and launchers reach it over HTTP like any S3 endpoint. Credentials
are the AWS variables, set for this process and so inherited by every subprocess.
``strict_moto_s3()`` starts one in a subprocess that checks credentials from its
first request, so that any key is a wrong key; ``iam_moto_s3()`` one that checks the keys
and policies of the IAM users a test makes.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from typing import Iterator

import httpx

from tests.conftest import need_module

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


class S3:
    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint

    def client(self):  # noqa: ANN201
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1")

    def bucket(self) -> str:
        """A new, empty bucket's name."""
        name = f"ty-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return sorted(o["Key"] for page in pages for o in page.get("Contents", []))

    def get(self, bucket: str, key: str) -> bytes:
        return self.client().get_object(Bucket=bucket, Key=key)["Body"].read()

    def put(self, bucket: str, key: str, data: bytes) -> None:
        self.client().put_object(Bucket=bucket, Key=key, Body=data)

    def delete(self, bucket: str, key: str) -> None:
        self.client().delete_object(Bucket=bucket, Key=key)

    def fs(self):  # noqa: ANN201
        import s3fs

        return s3fs.S3FileSystem(endpoint_url=self.endpoint, skip_instance_cache=True)


@contextmanager
def moto_s3() -> Iterator[S3]:
    need_module("s3fs", "pip install 'trainyard[s3]'")
    server_mod = need_module("moto.server", "pip install 'moto[server]'")
    saved = {k: os.environ.get(k) for k in CREDENTIALS}
    os.environ.update(CREDENTIALS)
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield S3(f"http://{host}:{port}")
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextmanager
def strict_moto_s3() -> Iterator[str]:
    """The endpoint of a moto server that refuses every credential (none were ever issued)."""
    with _moto_process(0) as endpoint:
        yield endpoint


class IamS3:
    """A moto server that checks IAM: keys are those :meth:`user` issued, each allowed what its policy says, once
    the test's set-up (up to :attr:`SETUP_ACTIONS` requests, with any key) has called :meth:`enforce`."""

    SETUP_ACTIONS = 20  # requests allowed with any key first: the users, their keys and policies, the buckets

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint

    def client(self, service: str, keys: tuple[str, str] = ("setup", "setup")):  # noqa: ANN201
        import boto3

        return boto3.client(service, endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id=keys[0], aws_secret_access_key=keys[1])

    def enforce(self) -> None:
        """Spend what is left of the unauthenticated requests: from here on every request needs an issued key."""
        from botocore.exceptions import ClientError

        for _ in range(self.SETUP_ACTIONS + 1):
            try:
                self.client("s3").list_buckets()
            except ClientError:
                return
        raise AssertionError("moto never began to check keys")

    def user(self, name: str, actions: list[str], resources: list[str]) -> tuple[str, str]:
        """A user allowed ``actions`` on ``resources`` (ARNs); its (access key id, secret key). Three setup actions."""
        import json

        iam = self.client("iam")
        iam.create_user(UserName=name)
        iam.put_user_policy(UserName=name, PolicyName="only", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": actions, "Resource": resources}]}))
        key = iam.create_access_key(UserName=name)["AccessKey"]
        return key["AccessKeyId"], key["SecretAccessKey"]


@contextmanager
def iam_moto_s3() -> Iterator[IamS3]:
    """A moto server whose first :attr:`IamS3.SETUP_ACTIONS` requests need no key, and every later one a key it
    issued, allowed by that key's policy."""
    need_module("boto3", "pip install 'moto[server]'")
    with _moto_process(IamS3.SETUP_ACTIONS) as endpoint:
        yield IamS3(endpoint)


@contextmanager
def _moto_process(no_auth_actions: int) -> Iterator[str]:
    need_module("moto.server", "pip install 'moto[server]'")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": str(no_auth_actions)}
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(endpoint + "/moto-api/", timeout=1)
                break
            except httpx.HTTPError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("moto server did not start") from None
                time.sleep(0.1)
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(10)
