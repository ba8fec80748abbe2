"""Each Dask cluster's own TLS identity: a CA, a certificate for its scheduler and workers, one for its clients.

Dask's default TCP has no authentication: any process that can reach the scheduler's port (any job on the
node: the address is in ``/proc``) can run code on the workers, as the cluster owner's account and with the
team secrets the workers were given. With mutual TLS (Dask's ``tls://``, which requires a certificate of the
peer on both sides) only a holder of a certificate signed by the cluster's CA gets in.

Made with ``cryptography``, as ``distributed.security.Security.temporary`` makes its own. The CA's key is
dropped once both certificates are signed: nothing can sign a third. The PEMs are kept sealed with the
servers' secrets key (``dask_clusters.tls``); the scheduler and worker jobs read theirs as secrets of their
attempt (launch.secrets) and write them 0600 into their own work dir; clients get theirs from
``GET /api/v1/clusters/{id}/tls``, which only callers who may see the cluster reach.
"""

from __future__ import annotations

import datetime
import json

from pydantic import BaseModel

from trainyard import envvars
from trainyard.spec.cluster import ClusterTLS

VALID_FOR = datetime.timedelta(days=3650)  # a cluster's life bounds its use: its certificates need not expire first
# the job's variables with the PEMs, and where its command writes them (its work dir, mode 0600 under umask 077)
CA_VAR, CERT_VAR, KEY_VAR = envvars.DASK_TLS_CA, envvars.DASK_TLS_CERT, envvars.DASK_TLS_KEY
FOLDER = ".dask-tls"


class ClusterKeys(BaseModel):
    """What the server keeps (sealed) for one cluster."""

    ca: str
    node_cert: str  # the scheduler's and the workers'
    node_key: str
    client_cert: str  # the notebook's, the SDK's and the server's own probes
    client_key: str

    def node_env(self) -> dict[str, str]:
        return {CA_VAR: self.ca, CERT_VAR: self.node_cert, KEY_VAR: self.node_key}

    def client(self) -> ClusterTLS:
        return ClusterTLS(ca=self.ca, cert=self.client_cert, key=self.client_key)


def make(cluster_id: str) -> ClusterKeys:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    now = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)  # a node's clock a bit behind
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = name(f"trainyard dask {cluster_id} CA")
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now).not_valid_after(now + VALID_FOR)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .sign(ca_key, hashes.SHA256()))

    def leaf(cn: str) -> tuple[str, str]:
        key = ec.generate_private_key(ec.SECP256R1())
        usage = x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH])
        cert = (x509.CertificateBuilder().subject_name(name(cn)).issuer_name(ca_name).public_key(key.public_key())
                .serial_number(x509.random_serial_number()).not_valid_before(now).not_valid_after(now + VALID_FOR)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(usage, critical=False).sign(ca_key, hashes.SHA256()))
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
        return cert.public_bytes(serialization.Encoding.PEM).decode(), pem.decode()

    node_cert, node_key = leaf(f"trainyard dask {cluster_id}")
    client_cert, client_key = leaf(f"trainyard dask {cluster_id} client")
    return ClusterKeys(ca=ca.public_bytes(serialization.Encoding.PEM).decode(), node_cert=node_cert,
                       node_key=node_key, client_cert=client_cert, client_key=client_key)


def dumps(keys: ClusterKeys) -> str:
    return keys.model_dump_json()


def loads(text: str) -> ClusterKeys:
    return ClusterKeys.model_validate(json.loads(text))


def shell_prologue() -> str:
    """The start of a scheduler's or worker's command: the PEMs from its environment into files only its account
    reads (Dask's CLIs take paths), then out of the environment that Dask (and a worker's tasks) inherit."""
    files = " && ".join(f"printf '%s\\n' \"${v}\" > {FOLDER}/{f}" for v, f in
                        ((CA_VAR, "ca.pem"), (CERT_VAR, "cert.pem"), (KEY_VAR, "key.pem")))
    return (f"umask 077 && mkdir -p {FOLDER} && chmod 700 {FOLDER} && {files} && "
            f"unset {CA_VAR} {CERT_VAR} {KEY_VAR} && ")


def cli_args() -> list[str]:
    return ["--tls-ca-file", f"{FOLDER}/ca.pem", "--tls-cert", f"{FOLDER}/cert.pem", "--tls-key", f"{FOLDER}/key.pem"]
