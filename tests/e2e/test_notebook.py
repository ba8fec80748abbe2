"""`trainyard run notebook.ipynb` on a real server and the local engine, with papermill and a real kernel."""

import json
import shutil
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "notebooks" / "fit.ipynb"


@pytest.fixture
def notebook(tmp_path):
    folder = tmp_path / "work"
    folder.mkdir()
    shutil.copy(EXAMPLE, folder / "fit.ipynb")
    return folder / "fit.ipynb"


def last_job(server) -> dict:
    return json.loads(server.cli("ls", "-o", "json").stdout)[0]


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def source(cell: dict) -> str:
    return "".join(cell["source"])


def test_a_notebook_runs_with_injected_params_and_the_executed_notebook_downloads(server, notebook, tmp_path):
    r = server.cli("run", str(notebook), "-p", "lr=0.1", "-p", "epochs=50", "--gpu", "1", "--memory", "1Gi",
                   "--follow", timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "lr=0.1 epochs=50: w=2.839" in r.stdout
    job = last_job(server)
    assert job["spec"]["resources"]["gpu"] == 1 and job["spec"]["resources"]["memory"] == 1024 ** 3
    assert job["spec"]["params"] == {"lr": 0.1, "epochs": 50}
    assert server.cli("download", job["id"], "--to", str(tmp_path / "dl")).returncode == 0
    executed = cells(tmp_path / "dl" / "fit.ipynb")
    injected = [c for c in executed if "injected-parameters" in c["metadata"].get("tags", [])]
    assert len(injected) == 1 and "lr = 0.1" in source(injected[0]) and "epochs = 50" in source(injected[0])
    fit = next(c for c in executed if "fit" in c["metadata"].get("tags", []))
    assert "loss=0.00944" in "".join("".join(o.get("text", "")) for o in fit["outputs"])


def test_a_failing_cell_fails_the_job_names_the_cell_and_keeps_the_notebook(server, notebook, tmp_path):
    r = server.cli("run", str(notebook), "-p", "lr=5", "--follow", timeout=180)
    assert r.returncode == 1
    assert "cell 3 (tags: check; first line: assert loss == loss" in r.stdout + r.stderr
    assert "AssertionError: diverged" in r.stdout + r.stderr
    job = last_job(server)
    assert job["status"] == "failed"
    assert server.cli("download", job["id"], "--to", str(tmp_path / "dl")).returncode == 0
    executed = cells(tmp_path / "dl" / "fit.ipynb")
    check = next(c for c in executed if "check" in c["metadata"].get("tags", []))
    assert any(o.get("ename") == "AssertionError" for o in check["outputs"])


def test_resource_options_override_a_yaml_spec_too(server, tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text(f"name: r\ncommand: [{sys.executable}, -c, 'print(1)']\nresources: {{cpu: 2, gpu: 0}}\n")
    r = server.cli("run", str(spec), "--gpu", "2", "--cpu", "500m")
    assert r.returncode == 0, r.stderr
    job = last_job(server)
    assert job["spec"]["resources"]["gpu"] == 2 and job["spec"]["resources"]["cpu"] == 0.5
    r = server.cli("run", str(spec), "--memory", "lots")
    assert r.returncode == 2 and "resources.memory" in r.stderr


def test_the_sdk_submits_a_notebook_like_the_cli(server, notebook, tmp_path):
    job = server.client().submit(notebook, params={"lr": 0.1, "epochs": 50})
    info = job.wait(timeout=180)
    assert info.status.value == "succeeded", job.logs()
    assert info.spec.params == {"lr": 0.1, "epochs": 50} and "lr=0.1 epochs=50: w=2.839" in job.logs()
    executed = cells(job.download(tmp_path / "dl") / "fit.ipynb")
    assert any("epochs = 50" in source(c) for c in executed if "injected-parameters" in c["metadata"].get("tags", []))
