"""The servers' keys for secrets at rest: Fernet (AES-128-CBC with HMAC-SHA256), from ``cryptography``.

The key file (0600, in the home unless ``secrets_key_file`` names one) is made on first
need with one key; the database holds only what it sealed. So a copy of the database — a
backup, a PostgreSQL replica, someone with read access to it — holds no value in the
clear. Servers sharing one database must share the key file.

Rotation, as ``MultiFernet`` does it: put a new key on the file's first line and keep the
old ones below it; new values are sealed with the first, and every line opens. Then
``POST /api/v1/secrets/rotate`` (``trainyard secret rotate``) re-seals every stored value
with the first key, after which the old lines can go.
"""

from __future__ import annotations

import os
from pathlib import Path

from trainyard.errors import SecretKeyError


class SecretBox:
    def __init__(self, key_file: Path) -> None:
        self.key_file = Path(key_file)
        self._keys = None
        self._first = None  # the key new values are sealed with
        self.count = 0  # keys in the file, once read

    def _fernet(self):  # noqa: ANN202  (a cryptography MultiFernet)
        if self._keys is None:
            from cryptography.fernet import Fernet, MultiFernet

            try:
                keys = [Fernet(k) for k in self._read_or_make(Fernet.generate_key)]
                self._keys, self._first, self.count = MultiFernet(keys), keys[0], len(keys)
            except ValueError:
                raise SecretKeyError(f"{self.key_file}: each line must be a Fernet key (32 url-safe base64-encoded "
                                     "bytes), the newest first") from None
        return self._keys

    def reload(self) -> int:
        """Read the key file again (a key was added); how many keys it holds."""
        self._keys = None
        self._fernet()
        return self.count

    def _read_or_make(self, generate) -> list[bytes]:  # noqa: ANN001
        try:
            return self._lines(self.key_file.read_bytes())
        except FileNotFoundError:
            pass
        self.key_file.parent.mkdir(parents=True, exist_ok=True)
        key = generate()
        try:  # O_EXCL: two servers making it at once keep the first one's
            fd = os.open(self.key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return self._lines(self.key_file.read_bytes())
        with os.fdopen(fd, "wb") as f:
            f.write(key + b"\n")
        return [key]

    def _lines(self, data: bytes) -> list[bytes]:
        keys = [line.strip() for line in data.splitlines() if line.strip() and not line.startswith(b"#")]
        if not keys:
            raise SecretKeyError(f"{self.key_file} holds no key")
        return keys

    def seal(self, value: str) -> str:
        return self._fernet().encrypt(value.encode("utf-8", "surrogatepass")).decode("ascii")

    def open(self, sealed: str, what: str) -> str:
        from cryptography.fernet import InvalidToken

        try:
            return self._fernet().decrypt(sealed.encode("ascii")).decode("utf-8", "surrogatepass")
        except (InvalidToken, ValueError):
            raise SecretKeyError(f"{what} cannot be opened with this server's keys ({self.key_file}): servers "
                                 "sharing a database must share its secrets key file") from None

    def reseal(self, sealed: str, what: str) -> str:
        """``sealed`` under the first key (as it was, if it already is)."""
        from cryptography.fernet import InvalidToken

        keys = self._fernet()
        try:
            self._first.decrypt(sealed.encode("ascii"))
            return sealed
        except (InvalidToken, ValueError):
            pass
        try:
            return keys.rotate(sealed.encode("ascii")).decode("ascii")
        except (InvalidToken, ValueError):
            raise SecretKeyError(f"{what} cannot be opened with this server's keys ({self.key_file})") from None
