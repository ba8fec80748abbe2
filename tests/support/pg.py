"""A throwaway PostgreSQL cluster on loopback, for the store and API tests."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
from pathlib import Path


def find_pg_bin() -> Path | None:
    candidates = []
    if shutil.which("pg_ctl"):
        candidates.append(Path(shutil.which("pg_ctl")).parent)
    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    for d in candidates:
        if (d / "initdb").exists() and (d / "pg_ctl").exists() and (d / "postgres").exists():
            return d
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    def __init__(self, bin_dir: Path, root: Path) -> None:
        self.bin = bin_dir
        self.data = root / "data"
        self.port = free_port()
        self.url = f"postgresql://trainyard@127.0.0.1:{self.port}/postgres"
        self._uid = None
        if os.geteuid() == 0:  # postgres refuses to run as root
            for user in ("postgres", "nobody"):
                try:
                    self._uid = pwd.getpwnam(user).pw_uid
                    self._gid = pwd.getpwnam(user).pw_gid
                    break
                except KeyError:
                    continue
        self.root = root

    def _run(self, *args: str) -> None:
        def demote() -> None:
            if self._uid is not None:
                os.setgid(self._gid)
                os.setuid(self._uid)

        subprocess.run(args, check=True, capture_output=True, preexec_fn=demote, cwd=self.root)

    def start(self) -> None:
        if self._uid is not None:
            os.chown(self.root, self._uid, self._gid)
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", "trainyard", "--auth=trust", "-E", "UTF8",
                  "--no-sync")
        opts = f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", opts, "-l", str(self.data / "log"),
                  "-w", "start")

    def stop(self) -> None:
        try:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")
        except subprocess.CalledProcessError:
            pass
