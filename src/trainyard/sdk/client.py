"""The Python SDK: ``trainyard.Client().submit(spec)`` and a handle on each job."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote

import httpx
from pydantic import ValidationError

from trainyard import errors
from trainyard.home import moved_leader, token_for
from trainyard.locations import client_token, server_url
from trainyard.sdk.discovery import resolve_server
from trainyard.sdk.http import Http
from trainyard.sdk.job import Job
from trainyard.sdk.nodes import NodeCalls
from trainyard.sdk.params import warn_undeclared, with_params
from trainyard.sdk.reads import label_query, log_pages, log_query
from trainyard.spec.job import JobSpec
from trainyard.spec.labels import OWN, own_key
from trainyard.spec.queue import QueueSpec
from trainyard.spec.records import ArtifactInfo, AttemptOutputs, JobInfo, JobPage, LogChunk, MetricPoint, QueueInfo
from trainyard.spec.execs import ExecResult
from trainyard.spec.stacks import StackDump


class Client(NodeCalls):
    """Talks to a trainyard server.

    With no ``server``, uses ``TRAINYARD_SERVER``, else the local server of
    ``$TRAINYARD_HOME``, starting one in the background if none runs. The token
    is ``token``, else ``TRAINYARD_TOKEN``, else the one ``trainyard login`` saved for
    that server, else (for the local server only) the home's own. Pass an httpx ``transport`` to talk to an app in-process (tests).
    """

    def __init__(self, server: str | None = None, *, token: str | None = None,
                 transport: httpx.BaseTransport | None = None, timeout: float = 30.0) -> None:
        # in a job, a server found through $TRAINYARD_SERVER is followed to the next leader when it dies
        given = token
        follow = (lambda dead, wait: moved_leader(dead, wait, given)) if server is None and transport is None else None
        server = (server or "http://trainyard").rstrip("/") if transport else resolve_server(server)
        token = token or client_token() or (None if transport else token_for(server))
        self.http = Http(server, token, transport=transport, timeout=timeout, follow=follow)

    @property
    def server(self) -> str:
        return self.http.server

    def __repr__(self) -> str:  # the server only: a notebook's output is shared, the token never shown
        return f"<trainyard.Client {self.http.server}>"

    def close(self) -> None:
        self.http.close()

    @property
    def identity(self):  # noqa: ANN201
        """Users, teams, tokens and the audit log (see :mod:`trainyard.sdk.identity`)."""
        from trainyard.sdk.identity import Identity

        return Identity(self.http)

    @property
    def pipelines(self):  # noqa: ANN201
        """Pipeline runs: ``client.pipelines.run("p.yaml", {"workers": 5})`` (see :mod:`trainyard.sdk.pipelines`)."""
        from trainyard.sdk.pipelines import Pipelines

        return Pipelines(self.http)

    @property
    def notify(self):  # noqa: ANN201
        """Subscriptions of the server's webhooks to job ends (see :mod:`trainyard.sdk.webhooks`)."""
        from trainyard.sdk.webhooks import Notify

        return Notify(self.http)

    @property
    def secrets(self):  # noqa: ANN201
        """A team's secrets: set (never read back), list, delete (see :mod:`trainyard.sdk.secrets`)."""
        from trainyard.sdk.secrets import Secrets

        return Secrets(self.http)

    @property
    def sweeps(self):  # noqa: ANN201
        """Hyperparameter sweeps: list, get, cancel, wait (see :mod:`trainyard.sdk.sweeps`)."""
        from trainyard.sdk.sweeps import Sweeps

        return Sweeps(self.http)

    def sweep(self, spec: Any, base_dir: str | Path | None = None) -> Any:
        """Start a sweep from a YAML file, a dict or a :class:`~trainyard.spec.sweep.SweepSpec`: its SweepInfo."""
        return self.sweeps.create(spec, base_dir)

    @property
    def schedules(self):  # noqa: ANN201
        """Jobs submitted on a cron: list, get, pause, resume, trigger, delete (see :mod:`trainyard.sdk.schedules`)."""
        from trainyard.sdk.schedules import Schedules

        return Schedules(self.http)

    def schedule(self, spec: Any, base_dir: str | Path | None = None) -> Any:
        """Create a schedule from a YAML file, a dict or a :class:`~trainyard.spec.schedule.ScheduleSpec`: its
        ScheduleInfo."""
        return self.schedules.create(spec, base_dir)

    @property
    def monitoring(self):  # noqa: ANN201
        """Events, resource use and usage reports (see :mod:`trainyard.sdk.monitoring`)."""
        from trainyard.sdk.monitoring import Monitoring

        return Monitoring(self.http)

    @property
    def services(self):  # noqa: ANN201
        """Services reached at ``/serve/NAME``: apply, scale, delete, logs (see :mod:`trainyard.sdk.services`)."""
        from trainyard.sdk.services import Services

        return Services(self.http, logs=self.logs)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- jobs -------------------------------------------------------------

    def submit(self, spec: JobSpec | dict[str, Any] | str | Path, *, params: dict[str, Any] | None = None,
               base_dir: str | Path | None = None) -> "Job":
        """Submit a job from a spec, a dict, a YAML file or a notebook (``.ipynb``, run with papermill,
        ``params`` injected into its ``parameters`` cell); paths are relative to the file's folder."""
        # loading and packing (yaml, Kubeflow's documents, pathspec for the snapshot) are the submit's alone:
        # `ls`, `show` and `logs` build a Client too
        from trainyard.sdk.prepare import prepare
        from trainyard.spec.lines import validation_errors
        from trainyard.spec.loader import read_job, with_overrides

        if isinstance(spec, (str, Path)) and Path(spec).suffix == ".ipynb":  # runs with papermill
            from trainyard.pipelines.notebook import job_from_notebook

            base_dir = base_dir or Path(spec).resolve().parent
            spec, params = job_from_notebook(Path(spec), params or {}), None
        if isinstance(spec, (str, Path)):
            path = Path(spec)
            base_dir = base_dir or path.resolve().parent
            spec, text = read_job(path)
            if params:
                warn_undeclared(str(path), params, spec.params)
                spec = with_overrides(spec, text, params, path)
        else:
            if isinstance(spec, dict):
                try:
                    spec = JobSpec.model_validate(spec)
                except ValidationError as e:
                    raise errors.InvalidSpec(errors=validation_errors(e, {}, "<spec>", JobSpec)) from None
            spec = with_params(spec, params, f"spec {spec.name!r}")
        spec, blob, digest = prepare(spec, Path(base_dir or Path.cwd()))
        if digest is not None:
            self.http.upload_snapshot(blob, digest)
        return self._post_job(spec, digest)

    def rerun(self, job_id: str, *, params: dict[str, Any] | None = None,
              priority: int | str | None = None) -> "Job":
        """Submit a job's spec again, with its code snapshot as it was (the UI's Re-submit): a new job, ``params``
        over the old ones, ``priority`` (a class name or an integer) over its own, held to its queue's
        max_priority as a submit is. A snapshot that is gone (its jobs deleted) is refused, naming it."""
        old = self.get(job_id)
        spec = with_params(old.spec, params, f"job {job_id}", quiet_if_none=False)
        if priority is not None:
            spec = spec.with_priority(priority)
        if own_key(spec.labels) is not None:  # a sweep's trial run again is a job of the user's, in no sweep
            spec = spec.model_copy(update={"labels": {k: v for k, v in spec.labels.items() if not k.startswith(OWN)}})
        return self._post_job(spec, old.snapshot)

    def _post_job(self, spec: JobSpec, snapshot: str | None) -> Job:
        body = {"spec": spec.model_dump(mode="json"), "snapshot": snapshot}
        return Job(self, JobInfo.model_validate_json(self.http.json_call("POST", "/api/v1/jobs", body=body)))

    def job(self, job_id: str) -> "Job":
        return Job(self, self.get(job_id))

    def get(self, job_id: str) -> JobInfo:
        return JobInfo.model_validate(self.http.request("GET", f"/api/v1/jobs/{job_id}").json())

    def jobs(self, *, status: list[str] | None = None, name: str | None = None, queue: str | None = None,
             limit: int = 50, cursor: str | None = None, since: float | None = None, until: float | None = None,
             team: str | None = None, owner: str | None = None, q: str | None = None, sort: str | None = None,
             offset: int | None = None, count: bool = False,
             labels: dict[str, str] | str | list[str] | None = None) -> JobPage:
        """One page of jobs, newest first (or ``sort``: name, -name, status, queue, created…); pass the
        page's ``next_cursor`` as ``cursor`` for the next, or an ``offset``. ``since``/``until`` are Unix
        times (submitted at or after / before); ``q`` a part of the name or the start of the id;
        ``count`` also fills ``total`` (up to a cap); ``labels`` keeps the jobs with every one of them
        (a dict of ``key: value``), or those a label selector picks (``"stage!=dev,gpu in (a100,h100)"``)."""
        params = {"status": status or [], "name": name, "queue": queue, "limit": limit, "cursor": cursor,
                  "since": since, "until": until, "team": team, "owner": owner, "q": q, "sort": sort,
                  "offset": offset, "count": count or None, "label": label_query(labels)}
        params = {k: v for k, v in params.items() if v not in (None, [])}
        return JobPage.model_validate(self.http.request("GET", "/api/v1/jobs", params=params).json())

    def iter_jobs(self, *, page: int = 200, **filters: Any) -> Iterator[JobInfo]:
        """Every job matching :meth:`jobs`' filters (``status=``, ``labels=``, ``since=``…), newest first (or in
        ``sort=`` order), read a page of ``page`` at a time as the loop goes on."""
        by_cursor = filters.get("sort") in (None, "-created", "created")  # cursors follow submit order only
        cursor, offset = None, 0
        while True:
            got = self.jobs(limit=page, **({"cursor": cursor} if by_cursor else {"offset": offset}), **filters)
            yield from got.items
            offset += len(got.items)
            if not got.items or not (got.next_cursor if by_cursor else got.more):
                return
            cursor = got.next_cursor

    def job_counts(self, **filters: Any) -> dict[str, int]:
        """How many jobs are in each status, under the filters of :meth:`jobs` (``queue=``, ``labels=``…)."""
        if "labels" in filters:
            filters["label"] = label_query(filters.pop("labels"))
        return self.http.request("GET", "/api/v1/jobs/counts", params=filters).json()

    def cancel(self, job_id: str) -> JobInfo:
        return JobInfo.model_validate(self.http.request("POST", f"/api/v1/jobs/{job_id}/cancel").json())

    def label(self, job_id: str, labels: dict[str, str | None], *, overwrite: bool = False) -> dict[str, str]:
        """Set labels of a job (running or ended), or remove those given ``None``; its labels after.
        :class:`~trainyard.errors.Conflict` for a label already set to another value, unless ``overwrite``."""
        body = {"labels": labels, "overwrite": overwrite}
        return self.http.request("PATCH", f"/api/v1/jobs/{job_id}/labels", json=body).json()["labels"]

    def stacks(self, job_id: str, *, replica: int | None = None, locals: bool = False,  # noqa: A002
               native: bool = False, timeout: float = 30.0) -> list[StackDump]:
        """The Python stacks of a running job's command, each replica's (or ``replica``'s) dumped by its
        launcher with py-spy, with each frame's local variables (``locals``) and C/C++ frames (``native``) if
        asked; waits for every answer (:class:`~trainyard.errors.WaitTimeout` after ``timeout``)."""
        from trainyard.sdk.replica_requests import dump

        return dump(self.http, job_id, replica, timeout, with_locals=locals, native=native)

    def exec(self, job_id: str, argv: list[str], *, replica: int = 0, timeout: float = 30.0) -> ExecResult:
        """Run ``argv`` beside a running job's command, on its node (its work dir, environment, account or
        container), and wait for its end: ``exit_code`` and ``output``, or ``error`` if it could not run or
        ran past ``timeout`` seconds. :class:`~trainyard.errors.WaitTimeout` if the launcher never answered."""
        from trainyard.sdk.replica_requests import execute

        return execute(self.http, job_id, list(argv), replica, timeout)

    def delete(self, job_id: str) -> None:
        """An ended job with its records and files (``trainyard rm``); its usage stays counted.
        :class:`~trainyard.errors.Conflict` says why one may not be deleted (running, a pipeline step…)."""
        self.http.request("DELETE", f"/api/v1/jobs/{job_id}")

    def wait(self, job_id: str, timeout: float | None = None) -> JobInfo:
        """Block until the job ends; raises :class:`~trainyard.errors.WaitTimeout` after ``timeout``."""
        from trainyard.sdk.waits import until_ended

        def poll(left: float) -> bytes:  # over the kept plain connection, where it can go
            return self.http.json_call("GET", f"/api/v1/jobs/{job_id}/wait", query={"timeout": left}, timeout=left + 10)

        info = until_ended(poll, None if timeout is None else time.monotonic() + timeout)
        if not info.status.is_terminal():
            raise errors.WaitTimeout(f"job {job_id} is still {info.status.value} after {timeout}s", job_id=job_id)
        return info

    def wait_all(self, job_ids: list[str], timeout: float | None = None, *,
                 on_end: Callable[[JobInfo], None] | None = None) -> list[JobInfo]:
        """Block until every job ends; their records in the order given (an id given twice is waited on once).

        ``on_end`` is called with each job as it ends, in the order they end (from this thread). Up to
        ``trainyard.sdk.waits.WAIT_AT_ONCE`` long polls are open at a time. Raises
        :class:`~trainyard.errors.WaitTimeout`, naming the jobs not ended, after ``timeout`` (``on_end`` has then
        been called for the others)."""
        from trainyard.sdk.waits import wait_all

        return wait_all(self.http, self.get, job_ids, timeout, on_end)

    def logs(self, job_id: str, *, follow: bool = False, attempt: int | None = None,
             replica: int | None = None, tail: int | None = None) -> Iterator[LogChunk]:
        """Log chunks (attempt, replica, text) in order; with ``follow``, live until the job ends. With ``tail``,
        only the last ``tail`` lines (the first chunk cut to start at a line), then, following, what comes."""
        params = log_query(attempt, replica)
        after = 0
        if tail is not None:
            page = self.http.request("GET", f"/api/v1/jobs/{job_id}/logs", params={**params, "tail": tail}).json()
            for c in page["chunks"]:
                yield LogChunk.model_validate(c)
            if not follow:
                return
            after = page["cursor"]
        elif not follow:
            pages = log_pages(lambda after: self.http.request("GET", f"/api/v1/jobs/{job_id}/logs",
                                                              params={**params, "after": after}).json())
            for c in pages:
                yield LogChunk.model_validate(c)
            return
        yield from self._follow(job_id, params, after)

    def _follow(self, job_id: str, params: dict[str, Any], after: int = 0, give_up: float = 60.0) -> Iterator[LogChunk]:
        down_since: float | None = None
        while True:  # reconnect after a dropped stream (a server restart), from the last event id
            try:
                with self.http.events(f"/api/v1/jobs/{job_id}/logs",
                                      params={**params, "after": after, "follow": True}, timeout=None) as events:
                    down_since = None
                    for event in events:
                        if event.event == "end":
                            return
                        after = int(event.id)
                        yield LogChunk.model_validate_json(event.data)
            except httpx.TransportError:
                down_since = down_since or time.monotonic()
                if time.monotonic() - down_since > give_up:
                    raise errors.ServerUnavailable(f"lost the trainyard server at {self.server}") from None
                time.sleep(0.5)
                if self.http.relocate(wait=0):  # in a job: the servers' new leader, if one is named yet
                    continue
                if server_url() is None:
                    # a restarted local server may listen elsewhere; never start one from here
                    try:
                        self.http.move(resolve_server(None, autostart=False))
                    except errors.ServerUnavailable:
                        pass

    def metrics(self, job_id: str, system: bool = False) -> list[MetricPoint]:
        """What the job logged; with ``system``, also its resource samples (``system/memory_bytes``, …)."""
        return [MetricPoint.model_validate(m) for m in self.http.request(
            "GET", f"/api/v1/jobs/{job_id}/metrics", params={"system": system}).json()]

    def outputs(self, job_id: str, attempt: int | None = None) -> list[ArtifactInfo]:
        """The outputs of the job's final attempt (the newest that ended), or of attempt ``attempt``."""
        return self.outputs_of(job_id, attempt).files

    def outputs_of(self, job_id: str, attempt: int | None = None) -> AttemptOutputs:
        """:meth:`outputs`, with the number of the attempt they are of (None while no attempt has ended)."""
        resp = self.http.request("GET", f"/api/v1/jobs/{job_id}/outputs",
                                 params={} if attempt is None else {"attempt": attempt})
        shown = resp.headers.get("X-Attempt")
        return AttemptOutputs(int(shown) if shown else attempt,
                              [ArtifactInfo.model_validate(a) for a in resp.json()])

    def download(self, job_id: str, to: str | Path | None = None, attempt: int | None = None) -> Path:
        """Fetch the job's outputs (its final attempt's, or attempt ``attempt``'s) into ``to`` (default
        ``./<job id>``); returns that folder."""
        return self.download_outputs(job_id, self.outputs_of(job_id, attempt), to)

    def download_outputs(self, job_id: str, outputs: AttemptOutputs, to: str | Path | None = None) -> Path:
        """Fetch ``outputs`` (from :meth:`outputs_of`) into ``to`` (default ``./<job id>``): each file of the
        attempt they list, even if another attempt of the job has ended since."""
        dest = Path(to or job_id)
        dest.mkdir(parents=True, exist_ok=True)
        query = "" if outputs.attempt is None else f"?attempt={outputs.attempt}"
        for art in outputs.files:
            target = (dest / art.path).resolve()
            if dest.resolve() not in target.parents:
                raise errors.TrainyardError(f"refusing to write outside {dest}: {art.path}")
            target.parent.mkdir(parents=True, exist_ok=True)
            self.http.download(f"/api/v1/jobs/{job_id}/outputs/{quote(art.path)}{query}", target, art.size,
                               art.digest)
        return dest

    def health(self) -> dict[str, Any]:
        """The server's ``/healthz``: status, version, engine and role (needs no token)."""
        return self.http.request("GET", "/healthz").json()

    def queues(self) -> list[QueueInfo]:
        """Every queue with what its running jobs hold and how many wait."""
        return [QueueInfo.model_validate(q) for q in self.http.request("GET", "/api/v1/queues").json()]

    def queue(self, name: str) -> QueueInfo:
        return QueueInfo.model_validate(self.http.request("GET", f"/api/v1/queues/{name}").json())

    def create_queue(self, queue: QueueSpec | dict[str, Any], *, replace: bool = False) -> QueueInfo:
        try:
            spec = queue if isinstance(queue, QueueSpec) else QueueSpec.model_validate(queue)
        except ValidationError as e:
            from trainyard.spec.lines import validation_errors

            raise errors.InvalidSpec(errors=validation_errors(e, {}, "<queue>")) from None
        body = {"queue": spec.model_dump(mode="json"), "replace": replace}
        return QueueInfo.model_validate(self.http.request("POST", "/api/v1/queues", json=body).json())

    def delete_queue(self, name: str) -> None:
        self.http.request("DELETE", f"/api/v1/queues/{name}")

