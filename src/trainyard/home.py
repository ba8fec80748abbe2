"""The home folder a server holds: its lock, its address file and its local token.

One home has one server (or, on PostgreSQL, a set of servers sharing one
database). Servers sharing a database, in one home or several, elect the one
that schedules: see :mod:`trainyard.store.lease`.
A server holds ``server.lock`` with ``flock`` for as long as it runs: an
exclusive lock on SQLite, a shared one on PostgreSQL. The kernel drops the
lock when the process dies, however it dies, so there is no stale lock to
clean. A client that finds the lock held waits for the holder's address
instead of starting a rival.

The home is 0700, and the local token (``token``, 0600) lets the CLI and
SDK of the same Unix user in while keeping every other user out, even on
loopback.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path

from trainyard.locations import ADDRESS_FILE, client_token, home as default_home, leader_file
from trainyard.errors import HomeTaken

LOCK_FILE = "server.lock"
TOKEN_FILE = "token"
LOGIN_FILE = "login.json"  # `trainyard login`: {"server": URL, "token": TOKEN}, 0600
PROBE_RETRIES = 10


def secure(home: Path) -> None:
    """Create the home private to this user (0700); tighten one that exists and is ours."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = home.stat()
    if st.st_uid == os.getuid() and st.st_mode & 0o077:
        home.chmod(0o700)


def write_private(path: Path, text: str) -> None:
    """Write ``text`` atomically to a file only its owner may read (0600 from the first byte)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    tmp.replace(path)


def read_address(path: Path) -> dict | None:
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) and isinstance(info.get("url"), str) else None


class HomeLock:
    """``flock`` on the home's lock file, held until :meth:`release` or the process ends."""

    def __init__(self, home: Path) -> None:
        self.path = Path(home) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self, *, shared: bool = False) -> None:
        """Take the lock without waiting; :class:`HomeTaken` (naming the holder) if another server has it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        for _ in range(PROBE_RETRIES):  # a client's probe (held()) holds the lock for microseconds
            try:
                fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                time.sleep(0.02)
        else:
            os.close(fd)
            raise HomeTaken(taken_message(self.path.parent))
        if not shared:  # who holds it, for the next one's message
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps({"pid": os.getpid()}).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None


def held(home: Path) -> bool:
    """Whether a server holds ``home`` (running, or still starting)."""
    try:
        fd = os.open(Path(home) / LOCK_FILE, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # drops a lock this probe may have taken


def taken_message(home: Path) -> str:
    info = read_address(home / ADDRESS_FILE)
    if info:
        return f"another trainyard server holds {home}: {info['url']} (pid {info.get('pid')}); use it, or stop it first"
    try:
        pid = json.loads((home / LOCK_FILE).read_text()).get("pid")
    except (OSError, ValueError, AttributeError):
        pid = None
    who = f" (pid {pid})" if pid else ""
    return f"another trainyard server{who} is starting on {home}; use it once it is up, or stop it first"


def local_token(home: Path, *, create: bool = False) -> str | None:
    """The home's token, which the server requires unless it was given one; made once when ``create``."""
    path = Path(home) / TOKEN_FILE
    try:
        token = path.read_text().strip()
        if token:
            return token
    except OSError:
        pass
    if not create:
        return None
    import secrets  # here: every command reads the home, few make a token

    write_private(path, secrets.token_urlsafe(32))
    return path.read_text().strip()


def token_for(url: str, home: Path | None = None) -> str | None:
    """The token `trainyard login` saved for ``url``, else the local token when ``url`` is the server
    of ``home``: a token is never sent to any other server."""
    home = home or default_home()
    login = read_login(home)
    if login is not None and login["server"] == url.rstrip("/"):
        return login["token"]
    info = read_address(home / ADDRESS_FILE)
    if info is None or info["url"].rstrip("/") != url.rstrip("/"):
        return None
    return local_token(home)


# seconds a client waits for the leader file to name a new leader: a follower takes over a SQLite
# file within about a second, a PostgreSQL lease once the dead leader's connection times out
FOLLOW_WAIT = 30.0


def moved_leader(dead: str, wait: float = FOLLOW_WAIT, token: str | None = None) -> tuple[str, str | None] | None:
    """Where the servers' leader is now, for a client in a job whose server ``dead`` stopped answering:
    the URL in ``$TRAINYARD_SERVER_FILE`` once it names another, and the token to send it.

    The token is ``token``, else ``$TRAINYARD_TOKEN``, else the new leader's home's own through :func:`token_for`, which
    sends it only to the server that home announces. None outside a job, or when no other leader is
    named within ``wait`` seconds (there is no follower to take over)."""
    path, dead = leader_file(), dead.rstrip("/")
    if path is None:
        return None
    deadline = time.monotonic() + wait
    while True:
        info = read_address(path) or {}
        url = info.get("url", "").rstrip("/")
        if url.startswith(("http://", "https://")) and url != dead:
            where = info.get("home")
            leader_home = Path(where) if isinstance(where, str) and os.path.isabs(where) else None
            return url, token or client_token() or token_for(url, leader_home)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.1)


def save_login(home: Path, server: str, token: str) -> Path:
    """Remember ``server`` and its token for the CLI and SDK (0600, in the 0700 home)."""
    secure(home)
    path = Path(home) / LOGIN_FILE
    write_private(path, json.dumps({"server": server.rstrip("/"), "token": token}))
    return path


def read_login(home: Path | None = None) -> dict[str, str] | None:
    """``{"server", "token"}`` saved by `trainyard login`, or None."""
    try:
        info = json.loads((Path(home or default_home()) / LOGIN_FILE).read_text())
    except (OSError, ValueError):
        return None
    ok = isinstance(info, dict) and all(isinstance(info.get(k), str) and info[k] for k in ("server", "token"))
    return info if ok else None


SHARED_WITH_JOBS = {"attempts": 0o711, "checkpoints": 0o711, "venvs": 0o755}  # entered by jobs run as other accounts


def open_for_accounts(home: Path) -> None:
    """A home whose jobs run as other Unix accounts: they may pass through it (0711) to their own
    folders, never list it; everything else in it is closed to them, whatever it was made with."""
    home = Path(home)
    home.chmod(0o711)
    for name, mode in SHARED_WITH_JOBS.items():
        (home / name).mkdir(mode=mode, exist_ok=True)
        (home / name).chmod(mode)
    for entry in home.iterdir():
        if entry.name not in SHARED_WITH_JOBS and not entry.is_symlink():
            entry.chmod(entry.stat().st_mode & 0o700)
