"""Pipelines from Python: ``Client().pipelines.run("p.yaml", {"workers": 5})`` and a handle on the run.

The client does what needs the local disk: it reads and checks the pipeline
file (errors name the line), inlines local component files, resolves input
paths against the file's folder, and snapshots each distinct step workdir.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trainyard import errors
from trainyard.pipelines.special import inline_local
from trainyard.sdk.http import Http
from trainyard.sdk.snapshot import pack
from trainyard.spec.lines import Written
from trainyard.spec.params import substitute
from trainyard.spec.pipeline import PipelineSpec, is_special, merge_params, parse_pipeline
from trainyard.spec.pipeline_file import load_pipeline
from trainyard.spec.pipeline_graph import build, workdirs
from trainyard.spec.pipeline_records import PipelineArtifact, PipelineRunInfo, PipelineRunPage, StepInfo
from trainyard.spec.records import ArtifactInfo


def _error(field: str, message: str) -> errors.InvalidSpec:
    return errors.InvalidSpec(errors=[{"field": field, "line": None, "where": field, "message": message}])


class Pipelines:
    """Pipeline runs on one server (``Client.pipelines``)."""

    def __init__(self, http: Http) -> None:
        self.http = http

    def run(self, spec: str | Path | dict[str, Any] | PipelineSpec, params: dict[str, Any] | None = None, *,
            base_dir: str | Path | None = None) -> "PipelineRun":
        """Start a run of a pipeline file (or dict); returns at once. Paths are relative to the file's folder.

        A dict has no folder unless ``base_dir`` is given: then steps without a
        ``workdir`` run in an empty folder.
        """
        return self.start(self.prepare(spec, params, base_dir=base_dir))

    def start(self, body: dict[str, Any]) -> "PipelineRun":
        """Start the run :meth:`prepare` made ready; the server's refusals of it are its own (the CLI places
        them at the file's lines, apart from the client's checks, which have theirs already)."""
        info = PipelineRunInfo.model_validate(self.http.request("POST", "/api/v1/pipelines", json=body).json())
        return PipelineRun(self, info)

    def prepare(self, spec: str | Path | dict[str, Any] | PipelineSpec, params: dict[str, Any] | None = None, *,
                base_dir: str | Path | None = None, params_written: Written | None = None) -> dict[str, Any]:
        """What :meth:`run` sends (``{spec, params, workdirs, source}``), its step workdirs uploaded: a
        schedule of the pipeline sends the same, once, for all its runs. ``params_written``: the file ``params``
        were written in (a schedule's), which their errors name with its lines."""
        source = None
        if isinstance(spec, (str, Path)):
            loaded = load_pipeline(spec, params, params_written)
            raw, params, source = loaded.spec.model_dump(mode="json"), loaded.params, str(spec)
            base = Path(loaded.base_dir)
            snap_default = True
        else:
            parsed = spec if isinstance(spec, PipelineSpec) else parse_pipeline(spec)
            build(parsed, merge_params(parsed, params, "<pipeline>", params_written))  # the client-side checks
            raw = parsed.model_dump(mode="json")
            base = Path(base_dir or Path.cwd())
            snap_default = base_dir is not None
        raw["steps"] = self._localize(raw["steps"], base, params or {})
        digests = {}
        for w in workdirs(PipelineSpec.model_validate(raw)):
            if w == "." and not snap_default:
                continue
            try:
                blob, digest = pack(base / w)
            except ValueError as e:
                raise _error("workdir", str(e)) from None
            self.http.upload_snapshot(blob, digest)
            digests[w] = digest
        return {"spec": raw, "params": params or {}, "workdirs": digests, "source": source}

    def _localize(self, steps: dict[str, dict[str, Any]], base: Path,
                  params: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """Local component files inlined; relative input paths (params put in) made absolute and checked."""
        if any(is_special(s) for s in steps.values()):
            steps = inline_local(steps, base)
        out = {}
        for name, raw in steps.items():
            raw = dict(raw)
            inputs = raw.get("inputs")
            if isinstance(inputs, dict):
                fixed = {}
                for key, value in inputs.items():
                    if isinstance(value, str) and not value.lstrip().startswith("{{steps."):
                        value = substitute(value, params, keep_unknown=True)
                    if isinstance(value, str) and "://" not in value and not value.lstrip().startswith("{{"):
                        path = base / value
                        if "{{" not in value and not path.exists():
                            raise _error(f"steps.{name}.inputs.{key}", f"{value!r} does not exist (looked in {path})")
                        value = str(path.resolve()) if "{{" not in value else str(path)
                    fixed[key] = value
                raw["inputs"] = fixed
            out[name] = raw
        return out

    def get(self, run_id: str) -> PipelineRunInfo:
        return PipelineRunInfo.model_validate(self.http.request("GET", f"/api/v1/pipelines/{run_id}").json())

    def run_handle(self, run_id: str) -> "PipelineRun":
        return PipelineRun(self, self.get(run_id))

    def list(self, *, status: list[str] | None = None, limit: int = 50, cursor: str | None = None,
             until: float | None = None, name: str | None = None) -> PipelineRunPage:
        """Runs, newest first; ``until``: started before this Unix time; ``name``: of exactly this name."""
        params = {k: v for k, v in (("status", status), ("limit", limit), ("cursor", cursor), ("until", until),
                                    ("exact_name", name)) if v not in (None, [])}
        return PipelineRunPage.model_validate(self.http.request("GET", "/api/v1/pipelines", params=params).json())

    def wait(self, run_id: str, timeout: float | None = None, *, changed_after: float | None = None) -> PipelineRunInfo:
        """The run once it ends (or, with ``changed_after``, once it changes); WaitTimeout after ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = 60.0 if deadline is None else max(0.0, min(60.0, deadline - time.monotonic()))
            params: dict[str, Any] = {"timeout": left}
            if changed_after is not None:
                params["changed_after"] = changed_after
            info = PipelineRunInfo.model_validate(self.http.request(
                "GET", f"/api/v1/pipelines/{run_id}/wait", params=params, timeout=left + 10).json())
            if info.status.is_terminal() or (changed_after is not None and info.updated_at > changed_after):
                return info
            if deadline is not None and time.monotonic() >= deadline:
                if changed_after is not None:
                    return info
                raise errors.WaitTimeout(f"pipeline run {run_id} is still {info.status.value} after {timeout}s",
                                         run_id=run_id)

    def cancel(self, run_id: str) -> PipelineRunInfo:
        return PipelineRunInfo.model_validate(self.http.request("POST", f"/api/v1/pipelines/{run_id}/cancel").json())

    def retry(self, run_id: str) -> PipelineRunInfo:
        return PipelineRunInfo.model_validate(self.http.request("POST", f"/api/v1/pipelines/{run_id}/retry").json())

    def delete(self, run_id: str) -> None:
        """An ended run with its steps' jobs (records and files) and its artifacts; their usage stays counted.
        Refused (Conflict) while another run's cached step reuses its outputs."""
        self.http.request("DELETE", f"/api/v1/pipelines/{run_id}")

    def artifact(self, key: str) -> PipelineArtifact:
        """A step artifact by id or digest, with its lineage (step, job, inputs, code)."""
        return PipelineArtifact.model_validate(self.http.request("GET", f"/api/v1/artifacts/{key}").json())


    def download(self, key: str, to: str | Path | None = None) -> Path:
        """Fetch an artifact (a file or a folder) into ``to`` (default ``./<output name>``); returns its path."""
        art = self.artifact(key)
        dest = Path(to or art.output)
        outputs = self.http.request("GET", f"/api/v1/jobs/{art.job_id}/outputs").json()
        files = [a for a in map(ArtifactInfo.model_validate, outputs)
                 if a.attempt == art.attempt and (a.path == art.output or a.path.startswith(art.output + "/"))]
        if not files:
            raise errors.NotFound(f"artifact {art.id}: its files are gone from job {art.job_id}", key=key)
        for a in files:
            rel = a.path[len(art.output):].lstrip("/")
            target = (dest / rel).resolve() if rel else dest.resolve()
            if rel and dest.resolve() not in target.parents:
                raise errors.TrainyardError(f"refusing to write outside {dest}: {a.path}")
            target.parent.mkdir(parents=True, exist_ok=True)
            self.http.download(f"/api/v1/jobs/{art.job_id}/outputs/{a.path}", target)
        return dest


class PipelineRun:
    """A handle on one run. ``status`` and ``steps`` ask the server each time they are read."""

    def __init__(self, pipelines: Pipelines, info: PipelineRunInfo) -> None:
        self.pipelines = pipelines
        self.id = info.id
        self.info = info

    def __repr__(self) -> str:
        return f"<PipelineRun {self.id} {self.info.name} {self.info.status.value}>"

    def refresh(self) -> PipelineRunInfo:
        self.info = self.pipelines.get(self.id)
        return self.info

    @property
    def status(self) -> str:
        return self.refresh().status.value

    @property
    def steps(self) -> list[StepInfo]:
        return self.refresh().steps

    def step(self, name: str) -> StepInfo:
        return self.refresh().step(name)

    def wait(self, timeout: float | None = None, *, check: bool = False) -> PipelineRunInfo:
        """Block until the run ends; with ``check``, raise JobFailed unless it succeeded."""
        self.info = self.pipelines.wait(self.id, timeout)
        if check and self.info.status.value != "succeeded":
            raise errors.JobFailed(f"pipeline run {self.id} {self.info.status.value}: {self.info.reason}",
                                   run_id=self.id)
        return self.info

    def watch(self, every: float = 1.0) -> Iterator[PipelineRunInfo]:
        """The run each time it changes (and at least every ``every`` seconds) until it ends, then once more."""
        info = self.refresh()
        while True:
            yield info
            if info.status.is_terminal():
                return
            info = self.pipelines.wait(self.id, every, changed_after=info.updated_at)
            self.info = info

    def cancel(self) -> PipelineRunInfo:
        self.info = self.pipelines.cancel(self.id)
        return self.info

    def delete(self) -> None:
        """This run, once ended, with its steps' jobs and artifacts."""
        self.pipelines.delete(self.id)

    def retry(self) -> PipelineRunInfo:
        """Run the failed and downstream steps again, reusing what succeeded."""
        self.info = self.pipelines.retry(self.id)
        return self.info
