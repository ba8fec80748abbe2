"""A remote input outside trainyard's store, fetched with the job's own credentials, never the node's.

The launcher holds the node's keys to the artifact store (snapshots, outputs, checkpoints); an input the server
did not vet as the store's (``services.store_inputs``) must not be fetched with them, or a job would read any
bucket those keys reach. So such an input is fetched by a child process that has what the job will have: the
job's environment (its secrets included, the launcher's tokens and, for an account, the store's keys left out)
and, with ``run_as``, the job's OS account. The child looks the object up and says its content tag; the launcher
decides whether the node's cache has it already (the key holds the tag the job's own credentials read, so a job
that may not read the object finds nothing) and, if not, the child sends the files over its stdout: a JSON line
``{"path", "size"}`` before each file's bytes, ``{}`` at the end. The launcher writes them itself, as regular
files in folders it made, so nothing the child sends can be a link or land outside the entry.

    python -m trainyard.launch.fetch_as_job URL STORAGE_JSON LAUNCHER_PID    (the child; stdin says "send" or "skip")
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Callable

from trainyard.artifact_paths import check_artifact_path

BLOCK = 1 << 20
MAX_LINE = 64 << 10  # a record's or the look-up's line: a path of 4 KiB, a tag


class JobFetch:
    """How to fetch as the job: its environment, its account (a RunAs) or None, the node's storage options."""

    def __init__(self, env: dict[str, str], account=None, storage: dict | None = None,  # noqa: ANN001
                 cancelled: Callable[[], bool] = lambda: False) -> None:
        self.env, self.account, self.storage, self.cancelled = env, account, storage or {}, cancelled

    def child(self, url: str) -> list[str]:
        return [sys.executable, "-m", __name__, url, json.dumps(self.storage), str(os.getpid())]

    def start(self, url: str) -> subprocess.Popen:
        argv = self.child(url)
        # the node's Python as the launcher runs it: the job's variables choose credentials, not which code runs
        env = {k: v for k, v in self.env.items() if not k.startswith("PYTHON")}
        env.update({k: v for k, v in os.environ.items() if k.startswith("PYTHON")}, PYTHONNOUSERSITE="1")
        if self.account is not None:
            if not self.account.can_run(sys.executable):
                raise OSError(f"it is fetched as {self.account.name}, who cannot run this node's Python "
                              f"({sys.executable})")
            drop, env = self.account.drop(env)
            argv = drop + argv
        err = tempfile.TemporaryFile()  # a file, not a pipe: warnings never fill it and stall the child
        try:
            proc = subprocess.Popen(argv, env=env, cwd="/", stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=err, start_new_session=True)
        except BaseException:
            err.close()
            raise
        proc.err = err
        return proc

    def fetch(self, url: str, place: Callable[[str, Callable[[Path], None]], Path]) -> Path:
        """The local path of ``url``: ``place(tag, fill)`` finds the cache entry for the tag the child
        read, or makes it with ``fill(folder)``, which has the child send the files into ``folder``."""
        proc = self.start(url)
        out = _Pipe(proc.stdout.fileno(), self.cancelled)
        try:
            line = _line(out)
            try:
                said = json.loads(line) if line else {"error": ""}
            except ValueError:
                raise OSError(f"the fetch said {line[:200]!r}") from None
            if "error" in said:
                raise OSError(said["error"] or _stderr(proc))

            def fill(folder: Path) -> None:
                proc.stdin.write(b"send\n")
                proc.stdin.flush()
                try:
                    receive(out, folder)
                except OSError:
                    proc.kill()  # if still sending: it would wait on its full pipe, and this on it
                    if _status(proc) not in (0, -9):  # the child's own words say more than a stream cut short
                        raise OSError(_stderr(proc)) from None
                    raise
                if _status(proc) != 0:
                    raise OSError(_stderr(proc))

            return place(str(said["tag"]), fill)
        except BaseException:
            proc.kill()  # whatever it is doing: a cancel or an error ends it now
            raise
        finally:
            _end(proc)
            proc.stdout.close()
            proc.err.close()


def _end(proc: subprocess.Popen) -> None:
    """The child told to go (the node's copy was there) and given 5 s, then its group killed (a daemon its imports
    started goes too) while the child is not yet reaped, so that the group's id is still its own; then reaped."""
    try:
        proc.stdin.write(b"skip\n")
        proc.stdin.close()
    except OSError:
        pass
    deadline = time.monotonic() + 5
    while proc.returncode is None and time.monotonic() < deadline \
            and os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is None:
        time.sleep(0.01)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    proc.wait()


class _Pipe:
    """The child's stdout, read so that the attempt's cancel is heard within a second whatever the child does."""

    def __init__(self, fd: int, cancelled: Callable[[], bool]) -> None:
        self.fd, self.cancelled, self.buf = fd, cancelled, bytearray()

    def _more(self) -> bool:
        while True:
            if self.cancelled():
                raise OSError("cancelled")
            if select.select([self.fd], [], [], 0.5)[0]:
                break
        data = os.read(self.fd, BLOCK)
        self.buf += data
        return bool(data)

    def _take(self, n: int) -> bytes:
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def readline(self, limit: int) -> bytes:
        while (end := self.buf.find(b"\n", 0, limit)) < 0 and len(self.buf) < limit:
            if not self._more():
                return self._take(len(self.buf))
        return self._take(end + 1 if end >= 0 else limit)

    def read(self, n: int) -> bytes:
        if not self.buf and not self._more():
            return b""
        return self._take(n)


def _status(proc: subprocess.Popen) -> int:
    """The child's exit status (-N: killed by signal N) once it ends, leaving it unreaped for :func:`_end`."""
    info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status


def _stderr(proc: subprocess.Popen) -> str:
    status = _status(proc)
    proc.err.seek(0)
    lines = proc.err.read(64 << 10).decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else f"the fetch exited {status}"


def _line(stream: IO[bytes]) -> bytes:
    line = stream.readline(MAX_LINE)
    if len(line) == MAX_LINE and not line.endswith(b"\n"):
        raise OSError(f"the fetch said more than {MAX_LINE} bytes in a line")
    return line


def receive(stream: IO[bytes], folder: Path) -> None:
    """The child's files, written into ``folder`` (made by the caller, empty) as regular files only."""
    while True:
        try:
            head = json.loads(_line(stream) or b'{"path": ""}')
        except ValueError:
            raise OSError("the fetch sent what is not a file's record") from None
        if not isinstance(head, dict):
            raise OSError("the fetch sent what is not a file's record")
        if not head:
            return
        rel, size = check_artifact_path(head.get("path")), head.get("size")
        if not isinstance(size, int) or size < 0:
            raise OSError(f"the fetch sent {head!r}")
        target = folder / rel
        for parent in reversed(target.relative_to(folder).parents[:-1]):
            (folder / parent).mkdir(exist_ok=True)  # made here: a folder, never a link
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with open(fd, "wb") as out:
            _copy(stream.read, out.write, size, f"the fetch stopped within {rel}")


def _copy(read: Callable[[int], bytes], write: Callable[[bytes], object], size: int, short: str) -> None:
    """``size`` bytes from ``read`` to ``write``; OSError(``short``) if ``read`` ends before."""
    while size:
        block = read(min(size, BLOCK))
        if not block:
            raise OSError(short)
        write(block)
        size -= len(block)


def _send(fs, remote: str, name: str, out: IO[bytes]) -> None:  # noqa: ANN001
    files = fs.find(remote, detail=True, withdirs=False) if fs.isdir(remote) else {remote: fs.info(remote)}
    top = remote.rstrip("/")
    for path, info in sorted(files.items()):
        if path.endswith("/") or info.get("type") == "directory":  # a console's folder marker: nothing to write
            continue
        rel = name if path.rstrip("/") == top else f"{name}/{path[len(top):].lstrip('/')}"
        size = int(info["size"])
        out.write(json.dumps({"path": rel, "size": size}).encode() + b"\n")
        with fs.open(path, "rb") as f:
            _copy(f.read, out.write, size, f"{path} is shorter than listed: it changed while fetched")
            if f.read(1):
                raise OSError(f"{path} is longer than listed: it changed while fetched")
    out.write(b"{}\n")
    out.flush()


def main(url: str, storage: str, parent: int) -> int:
    _die_with(parent)
    out = sys.stdout.buffer
    try:
        import fsspec

        from trainyard.artifacts.transfer import content_tag, use_storage

        use_storage(json.loads(storage))
        fs, remote = fsspec.core.url_to_fs(url)
        said = {"tag": content_tag(fs, remote)} if fs.exists(remote) else {"error": "not found"}
    except Exception as e:  # noqa: BLE001 - said to the launcher, which fails the attempt with it
        said = {"error": f"{type(e).__name__}: {e}"}
    out.write(json.dumps(said).encode() + b"\n")
    out.flush()
    if "error" in said or sys.stdin.readline().strip() != "send":
        return 0
    try:
        _send(fs, remote, url.rstrip("/").rsplit("/", 1)[-1] or "input", out)
    except Exception as e:  # noqa: BLE001 - its last line is what the attempt's message says
        sys.stderr.write(f"{type(e).__name__}: {e}\n")
        return 1
    return 0


def _die_with(parent: int) -> None:
    """Killed when the launcher ends, whatever ends it; gone already if it ended before this was asked."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the launcher's kill of the group is what there is
        return
    if os.getppid() != parent:
        os._exit(1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
