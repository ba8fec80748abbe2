"""Notebook and Kubeflow component steps in a real pipeline run: real server, local engine, real processes."""

import json
import re
import shutil
from pathlib import Path

import pytest

import trainyard.sdk.pipelines  # noqa: F401  (our own pipeline runner: a missing one fails, never skips)
from tests.support.servers import ServerProcess

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

PIPELINE = """\
name: mix
params: {factor: 2, lr: 0.1}
steps:
  gen:
    command: python -c "print('1 2 3')" > {{outputs.nums}}
    outputs: [nums]
  scale:                       # by catalog name; factor from a param, label through if/isPresent
    component: Scale numbers
    arguments: {numbers: "{{steps.gen.outputs.nums}}", factor: "{{params.factor}}", label: scaled}
  twice:                       # a graph component by path: its tasks read the component by relative url
    component: components/scale_twice.yaml
    arguments: {numbers: "{{steps.scale.outputs.scaled}}", factor: "{{steps.five.outputs.f}}"}
  five:
    command: echo 5 > {{outputs.f}}
    outputs: [f]
  total:
    inputs: {t: "{{steps.twice.outputs.total}}"}
    command: cat {{inputs.t}}
  fit:
    notebook: fit.ipynb
    params: {lr: "{{params.lr}}", epochs: 50}
"""


@pytest.fixture
def server(tmp_path):
    # no container runtime: the components' public images cannot be pulled here, so they run on the host
    srv = ServerProcess(tmp_path / "home", ["--cpus", "4", "--memory", "4Gi", "--container-runtime", "none",
                                            "--component-catalog", str(ROOT / "examples" / "components")])
    srv.start()
    yield srv
    srv.stop_all()


@pytest.fixture
def project(tmp_path):
    folder = tmp_path / "project"
    shutil.copytree(ROOT / "examples" / "components", folder / "components")
    shutil.copy(ROOT / "examples" / "notebooks" / "fit.ipynb", folder / "fit.ipynb")
    (folder / "p.yaml").write_text(PIPELINE)
    return folder


def run(server, path: Path, params: dict | None = None):
    c = server.client()
    handle = c.pipelines.run(path, params or {})
    return c, handle, c.pipelines.wait(handle.id, timeout=240)


def logs(c, job_id: str) -> str:
    return "".join(chunk.data for chunk in c.logs(job_id))


def test_component_and_notebook_steps_run_in_a_pipeline(server, project, tmp_path):
    c, handle, info = run(server, project / "p.yaml", {"lr": 0.2})
    steps = {s.name: s for s in info.steps}
    assert info.status.value == "succeeded", {n: (s.status, s.reason) for n, s in steps.items()}
    assert set(steps) == {"gen", "scale", "twice-first", "twice-second", "five", "total", "fit"}
    # --container-runtime none: every component runs on the host, as asked, and no image is warned of
    assert not any("python:3.11-slim" in w for w in handle.info.warnings), handle.info.warnings
    assert "scaled 12.0" in logs(c, steps["scale"].job_id)  # (1+2+3) x 2, labelled
    assert logs(c, steps["total"].job_id).strip() == "300"  # x 5 twice, the factor read from a step's output
    assert "lr=0.2 epochs=50" in logs(c, steps["fit"].job_id)
    c.download(steps["fit"].job_id, tmp_path / "dl")
    executed = json.loads((tmp_path / "dl" / "notebook" / "fit.ipynb").read_text())
    injected = [x for x in executed["cells"] if "injected-parameters" in x["metadata"].get("tags", [])]
    assert "lr = 0.2" in "".join(injected[0]["source"])


def test_a_failing_notebook_step_fails_the_run_naming_the_cell(server, project):
    (project / "bad.yaml").write_text("name: bad\nsteps:\n  fit:\n    notebook: fit.ipynb\n    params: {lr: 5}\n")
    c, _, info = run(server, project / "bad.yaml")
    assert info.status.value == "failed"
    [step] = info.steps
    assert "cell 3 (tags: check; first line: assert loss" in logs(c, step.job_id)


def test_the_components_example_pipeline_runs_as_its_readme_shows(server, tmp_path):
    # examples/components had components and a snippet naming ../components/, but no pipeline to run
    folder = ROOT / "examples" / "components"
    text = (folder / "pipeline.yaml").read_text()
    shown = re.search(r"```yaml\n(.*?)```", (folder / "README.md").read_text(), re.S).group(1)
    assert shown.removeprefix("steps:\n") in text
    r = server.cli("pipeline", "run", str(folder / "pipeline.yaml"), "--follow")
    assert r.returncode == 0, r.stdout + r.stderr
    run_id = r.stderr.split("started ", 1)[1].split()[0]
    assert server.cli("pipeline", "logs", run_id, "total").stdout.strip() == "58.5"  # (1 + 2 + 3.5) x 3 x 3


def test_the_notebooks_example_pipeline_runs_as_its_readme_shows(server):
    # examples/notebooks had the notebook and a snippet of a notebook step, but no pipeline to run
    folder = ROOT / "examples" / "notebooks"
    shown = re.search(r"```yaml\n(.*?)```", (folder / "README.md").read_text(), re.S).group(1)
    assert shown in (folder / "pipeline.yaml").read_text()
    r = server.cli("pipeline", "run", str(folder / "pipeline.yaml"), "-p", "lr=0.2", "--follow")
    assert r.returncode == 0, r.stdout + r.stderr
    run_id = r.stderr.split("started ", 1)[1].split()[0]
    fit = server.client().pipelines.get(run_id).step("fit")
    assert "lr=0.2 epochs=50" in server.cli("pipeline", "logs", run_id, "fit").stdout
    assert set(fit.artifacts) == {"notebook"}  # the executed notebook, for `trainyard artifact download`
