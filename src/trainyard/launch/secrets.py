"""A job's secrets: read from the server at the attempt's start, kept in memory, masked in what it prints.

The launcher asks with its attempt's own credential (the server checks it, and that the
attempt still runs) and puts the values in the command's environment only: never in
``launch.json``, a file, a command line or the launcher's own environment (a venv build
runs packages' code). What the command prints goes to the server with every value
replaced by as many ``*`` as it has bytes, so the log's byte offsets stay those of the file.
"""

from __future__ import annotations

import json
import time
from typing import Callable

from trainyard.launch.config import read_token
from trainyard.launch.prepare import SetupError
from trainyard.launch.transport import post_json

ATTEMPTS = 8         # tries while the server is unreachable (a restart) ...
FIRST_BACKOFF = 0.5  # ... seconds before the second, doubling: about a minute in all
MIN_PREFIX = 8  # characters of a value's head masked where a dump cut the value short
MIN_MASKED = 4       # shorter values (and lines of values) would mask ordinary words of the log


def fetch(config, cancelled: Callable[[], bool], attempt_dir: str | None = None) -> dict[str, str]:  # noqa: ANN001
    """{variable: value} for the attempt's job (``config`` a LaunchConfig, read from ``attempt_dir``); SetupError
    saying why when they cannot be had."""
    path = f"/internal/attempts/{config.attempt_id}/secrets"
    token, backoff, problem = config.token, FIRST_BACKOFF, ""
    for _ in range(ATTEMPTS):
        if cancelled():
            raise SetupError("cancelled while reading the job's secrets")
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
        try:
            status, body = post_json(config.server.rstrip("/"), path, b"{}", headers, 30.0,
                                     config.server_ca, config.server_ca_pem)
        except OSError as e:
            problem = f"the server could not be reached: {e}"
        else:
            if status == 200:
                env = json.loads(body).get("env")
                if isinstance(env, dict) and all(isinstance(v, str) for v in env.values()):
                    return env
                problem = "the server's answer had no variables"
            elif status == 410 and attempt_dir and (renewed := read_token(attempt_dir)) not in (None, token):
                token = renewed  # the engine launched the attempt again with a new credential: ask with it
                continue
            elif status < 500:
                raise SetupError(f"the job's secrets: {_message(body, status)}")
            else:
                problem = _message(body, status)
        time.sleep(backoff)
        backoff *= 2
    raise SetupError(f"the job's secrets could not be read: {problem}")


def _message(body: bytes, status: int) -> str:
    try:
        return str(json.loads(body)["message"])
    except (ValueError, KeyError, TypeError):
        return f"HTTP {status}"


class Masks:
    """Every secret value (and each line of a multi-line one) as bytes, longest first."""

    def __init__(self, values: list[str] | tuple[str, ...] = ()) -> None:
        found = set()
        for value in values:
            raw = value.encode("utf-8", "surrogatepass")
            found.add(raw)
            found.update(line.strip() for line in raw.splitlines())
        self.masks = sorted((m for m in found if len(m) >= MIN_MASKED), key=len, reverse=True)
        self.longest = len(self.masks[0]) if self.masks else 0

    def __bool__(self) -> bool:
        return bool(self.masks)

    def apply(self, data: bytes) -> bytes:
        for m in self.masks:
            if m in data:
                data = data.replace(m, b"*" * len(m))
        return data

    def held(self, data: bytes) -> int:
        """How many bytes at the end of ``data`` may be the start of a value, cut by the end of what was read:
        held back until the rest comes (sent before it, they would show that part of the value)."""
        most = 0
        for m in self.masks:
            tail = data[-(len(m) - 1):] if len(m) > 1 else b""
            i = tail.find(m[:1])
            while 0 <= i < len(tail) - most:  # leftmost first: the longest; each look a scan in C, not a loop of them
                if m.startswith(tail[i:]):
                    most = len(tail) - i
                    break
                i = tail.find(m[:1], i + 1)
        return most

    def text(self, text: str) -> str:
        """:meth:`apply` to text (a stack dump, a command's output)."""
        return self.apply(text.encode("utf-8", "surrogatepass")).decode("utf-8", "replace") if text else text

    def truncated(self, text: str) -> str:
        """:meth:`text`, and a value's first characters (8 or more) where a dump cut it short with "...": py-spy
        shows a string local's first ~128 characters only, and a longer secret's head is most of it."""
        text = self.text(text)
        if not self.masks or "..." not in text:
            return text
        raw = text.encode("utf-8", "surrogatepass")
        out = bytearray(raw)
        at = raw.find(b"...")
        while at >= 0:
            for m in self.masks:
                k = min(len(m) - 1, at)
                while k >= MIN_PREFIX and raw[at - k:at] != m[:k]:
                    k -= 1
                if k >= MIN_PREFIX:
                    out[at - k:at] = b"*" * k
                    break
            at = raw.find(b"...", at + 3)
        return bytes(out).decode("utf-8", "replace")

    def copy(self, src: str, dst: str, block: int = 1 << 20) -> None:
        """``src`` to ``dst`` masked, a block at a time: a value across two blocks is masked too, since
        the last ``longest - 1`` bytes of each wait for the next."""
        keep = max(0, self.longest - 1)
        with open(src, "rb") as fin, open(dst, "wb") as fout:
            carry = b""
            while data := fin.read(block):
                buf = self.apply(carry + data)
                cut = max(0, len(buf) - keep)
                fout.write(buf[:cut])
                carry = buf[cut:]
            fout.write(carry)
