"""The servers' key for secrets at rest: Fernet (AES-128-CBC with HMAC-SHA256), from ``cryptography``.

The key is a file, made on first need (0600, in the home unless ``secrets_key_file``
names one); the database holds only what it sealed. So a copy of the database — a
backup, a PostgreSQL replica, someone with read access to it — holds no value in the
clear. Servers sharing one database must share the key file.
"""

from __future__ import annotations

import os
from pathlib import Path

from trainyard.errors import SecretKeyError


class SecretBox:
    def __init__(self, key_file: Path) -> None:
        self.key_file = Path(key_file)
        self._fernet = None

    def _key(self):  # noqa: ANN202  (a cryptography Fernet)
        if self._fernet is None:
            from cryptography.fernet import Fernet

            self._fernet = Fernet(self._read_or_make(Fernet.generate_key))
        return self._fernet

    def _read_or_make(self, generate) -> bytes:  # noqa: ANN001
        try:
            return self.key_file.read_bytes().strip()
        except FileNotFoundError:
            pass
        self.key_file.parent.mkdir(parents=True, exist_ok=True)
        key = generate()
        try:  # O_EXCL: two servers making it at once keep the first one's
            fd = os.open(self.key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return self.key_file.read_bytes().strip()
        with os.fdopen(fd, "wb") as f:
            f.write(key + b"\n")
        return key

    def seal(self, value: str) -> str:
        return self._key().encrypt(value.encode("utf-8", "surrogatepass")).decode("ascii")

    def open(self, sealed: str, what: str) -> str:
        from cryptography.fernet import InvalidToken

        try:
            return self._key().decrypt(sealed.encode("ascii")).decode("utf-8", "surrogatepass")
        except (InvalidToken, ValueError):
            raise SecretKeyError(f"{what} cannot be opened with this server's key ({self.key_file}): servers "
                                 "sharing a database must share its secrets key file") from None
