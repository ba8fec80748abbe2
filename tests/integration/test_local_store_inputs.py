"""A job run as an OS account reads its inputs from trainyard's local store (a pipeline step's, another step's
outputs), which is root's alone (0700): the launcher copies them into a cache entry of the account's own, read-only,
as it fetches a remote store's, and copies nothing the server did not vet (no link, no ``..`` spelt ``%2e%2e``)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

from tests.conftest import need
from tests.integration.test_launcher_support import (  # noqa: F401  (report_server is a fixture)
    PYTHON, make_config, read_result, report_server,
)

NOBODY = {"uid": 65534, "gid": 65534, "name": "nobody"}
READ = ('cat "$TRAINYARD_INPUT_M/x.txt" "$TRAINYARD_INPUT_M/sub/y.txt"; id -u; '
        '(echo no > "$TRAINYARD_INPUT_M/x.txt") 2>/dev/null || echo refused')


def launch(report_server, root: Path, name: str, url: str, store: Path) -> tuple[dict, str]:  # noqa: ANN001
    attempt = root / name
    make_config(attempt, report_server.url, ["/bin/sh", "-c", READ], inputs={"m": url}, run_as=NOBODY,
                input_cache=str(root / "cache"), store_url=store.as_uri())
    os.chmod(attempt, 0o711)
    proc = subprocess.run([PYTHON, "-m", "trainyard.launch", str(attempt)], capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return read_result(attempt), (attempt / "output.log").read_text()


def test_an_accounts_input_in_the_local_store_is_copied_into_an_entry_of_its_own(report_server):
    need(os.geteuid() == 0 and shutil.which("setpriv") is not None, "needs root and setpriv to switch accounts")
    root = Path(tempfile.mkdtemp(prefix="trainyard-store-inputs-"))
    os.chmod(root, 0o711)  # the account passes through to its folders, as under a server's home
    try:
        store = root / "artifacts"
        outputs = store / "jobs" / "j0" / "1" / "outputs"
        (outputs / "m" / "sub").mkdir(parents=True)
        (outputs / "m" / "x.txt").write_text("hello\n")
        (outputs / "m" / "sub" / "y.txt").write_text("world\n")
        (store / "secret").write_text("root's own\n")
        store.chmod(0o700)  # as the server keeps it

        result, log = launch(report_server, root, "a", f"{outputs.as_uri()}/m", store)
        assert result["reason"] == "Succeeded", log
        assert "hello\nworld\n65534\nrefused\n" in log, log
        [entry] = [p for p in (root / "cache").iterdir() if p.is_dir() and not p.name.startswith(".")]
        for path in [entry, *entry.rglob("*")]:  # the account's own, which no one may change
            st = path.lstat()
            assert st.st_uid == 0 and st.st_gid == 65534, path
            assert stat.S_IMODE(st.st_mode) & 0o227 == 0, (path, oct(st.st_mode))
        assert (outputs / "m" / "x.txt").read_text() == "hello\n"

        # root copies what the server vetted and nothing else: not what a link names, nor what %2e%2e reaches
        (outputs / "m" / "sub" / "y.txt").unlink()
        (outputs / "m" / "sub" / "y.txt").symlink_to(store / "secret")
        result, log = launch(report_server, root, "link", f"{outputs.as_uri()}/m", store)
        assert result["reason"] == "SetupFailed" and "not a regular file" in result["message"], result
        result, log = launch(report_server, root, "dots", f"{outputs.as_uri()}/%2e%2e/%2e%2e/%2e%2e/secret", store)
        assert result["reason"] == "SetupFailed" and "input 'm'" in result["message"], result
        assert not [p for p in (root / "cache").rglob("*") if p.name == "secret"]
    finally:
        shutil.rmtree(root, ignore_errors=True)
