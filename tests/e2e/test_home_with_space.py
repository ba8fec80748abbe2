"""A server whose home path holds a space and a non-ASCII letter (``/home/josé``, ``~/Library/Application
Support``): its default store's URL is percent-encoded (``Path.as_uri()``), and the server and its launchers
must both read it as the same folder, the home's own ``artifacts``."""

from __future__ import annotations

import pytest

from tests.conftest import host_server

pytestmark = pytest.mark.slow


def test_a_home_with_a_space_and_an_accent_keeps_snapshots_and_outputs_where_both_sides_find_them(tmp_path):
    home = tmp_path / "home 6 josé"
    srv = host_server(home)
    try:
        work = tmp_path / "code"
        work.mkdir()
        (work / "train.py").write_text(
            "import os\nprint('hi from the snapshot')\n"
            "open(os.path.join(os.environ['TRAINYARD_OUTPUT_DIR'], 'out.txt'), 'w').write('data')\n")
        r = srv.cli("run", "--wait", "train.py", cwd=work)
        assert r.returncode == 0, r.stdout + r.stderr
        [job] = srv.client().jobs().items
        assert job.status == "succeeded", srv.cli("logs", job.id).stdout
        assert "hi from the snapshot" in srv.cli("logs", job.id).stdout

        d = srv.cli("download", job.id, "--to", str(tmp_path / "dl"))
        assert d.returncode == 0, d.stdout + d.stderr
        assert (tmp_path / "dl" / "out.txt").read_text() == "data"
        stored = {p.name for p in (home / "artifacts").rglob("*") if p.is_file()}
        assert "out.txt" in stored and any(n.endswith(".tar.gz") for n in stored), stored
        assert not list(tmp_path.glob("home%20*")) and not list(tmp_path.glob("*%C3%A9*")), list(tmp_path.iterdir())
    finally:
        srv.stop_all()
