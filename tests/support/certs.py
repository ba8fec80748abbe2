"""A self-signed certificate for tests of servers that speak HTTPS (openssl's command line, as an admin would)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.conftest import need


def self_signed(folder: Path, names: str = "IP:127.0.0.1") -> tuple[Path, Path]:
    """(certificate, key) PEM files in ``folder`` for the subjectAltName ``names``, good for a day."""
    need(shutil.which("openssl") is not None, "needs openssl to make a certificate")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                    "-addext", f"subjectAltName={names}", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert, key
