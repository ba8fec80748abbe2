"""The HTTP face: Open Inference Protocol v2 REST, KServe v1's ``:predict``, ``/metrics`` and the try page.

The server listens before the model is loaded: liveness answers at once, readiness (and
inference) only once :func:`load` has returned, so a replica is never sent traffic it cannot
serve. Every path is relative to the root, so the server works unchanged behind the platform's
``/serve/NAME/`` proxy, which strips that prefix.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest

from trainyard.serving.model_server.access import TokenCheck
from trainyard.serving.model_server.page import render_page
from trainyard.serving.model_server.predictors import Predictor
from trainyard.serving.model_server.protocol import BadRequest, encode_response, parse_infer, parse_tensor

MAX_BODY = 64 * 1024 * 1024


class Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class ServedModel:
    name: str
    version: str
    load: Callable[[], Predictor]
    predictor: Predictor | None = None
    load_error: str | None = None
    loaded: threading.Event = field(default_factory=threading.Event)

    def start_loading(self, on_error: Callable[[str], None]) -> None:
        def run() -> None:
            try:
                self.predictor = self.load()
            except Exception as e:  # noqa: BLE001 - the reason goes to the log and the exit status
                self.load_error = str(e)
                on_error(self.load_error)
            finally:
                self.loaded.set()
        threading.Thread(target=run, name="load-model", daemon=True).start()


class Metrics:
    """Requests, errors and latency per model and protocol, on the server's own registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        labels = ["model", "protocol"]
        self.requests = Counter("trainyard_model_requests", "Inference requests answered", labels,
                                registry=self.registry)
        self.errors = Counter("trainyard_model_request_errors", "Inference requests answered with an error",
                              [*labels, "code"], registry=self.registry)
        self.latency = Histogram("trainyard_model_request_duration_seconds", "Time to answer an inference request",
                                 labels, registry=self.registry,
                                 buckets=(.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10))


def create_app(served: ServedModel, on_load_error: Callable[[str], None] = lambda _: None,
               token: str | None = None) -> FastAPI:
    """The app for ``served``; with ``token`` (a service replica's, services/service_tokens.py) it answers only
    requests carrying it, but for its health checks (access.py)."""
    @asynccontextmanager
    async def lifespan(_: FastAPI):  # noqa: ANN202
        served.start_loading(on_load_error)
        yield

    app = FastAPI(title=f"trainyard model server: {served.name}", docs_url=None, redoc_url=None,
                  openapi_url=None, lifespan=lifespan)
    metrics = Metrics()
    pace = Pace()
    app.state.served, app.state.metrics = served, metrics

    if token:
        app.add_middleware(TokenCheck, token=token)

    @app.exception_handler(Refused)
    def _refused(_: Request, e: Refused) -> JSONResponse:
        return JSONResponse({"error": str(e)}, status_code=e.status)

    def model(name: str, version: str | None = None) -> Predictor:
        if name != served.name:
            raise Refused(404, f"model {name!r} is not served here (this server serves {served.name!r})")
        if version is not None and version != served.version:
            raise Refused(404, f"model {name!r} has no version {version!r} (it has {served.version!r})")
        if served.predictor is None:
            raise Refused(503, f"model {name!r} is not ready: " + (served.load_error or "still loading"))
        return served.predictor

    @app.get("/", response_class=HTMLResponse)
    def page() -> HTMLResponse:
        return HTMLResponse(render_page(served.name))

    @app.get("/v2/health/live")
    def live() -> dict:
        return {"live": True}

    @app.get("/v2/health/ready")
    def ready() -> JSONResponse:
        ok = served.predictor is not None
        return JSONResponse({"ready": ok}, status_code=200 if ok else 503)

    @app.get("/v2")
    def server_metadata() -> dict:
        from trainyard import __version__
        return {"name": "trainyard-model-server", "version": __version__, "extensions": ["binary_tensor_data"]}

    @app.get("/v2/models/{name}/ready")
    @app.get("/v2/models/{name}/versions/{version}/ready")
    def model_ready(name: str, version: str | None = None) -> dict:
        model(name, version)
        return {"name": name, "ready": True}

    @app.get("/v2/models/{name}")
    @app.get("/v2/models/{name}/versions/{version}")
    def model_metadata(name: str, version: str | None = None) -> dict:
        p = model(name, version)
        return {"name": served.name, "versions": [served.version], "platform": p.platform,
                "inputs": [s.as_json() for s in p.inputs], "outputs": [s.as_json() for s in p.outputs],
                "parameters": p.parameters}

    @app.post("/v2/models/{name}/infer")
    @app.post("/v2/models/{name}/versions/{version}/infer")
    async def infer(name: str, request: Request, version: str | None = None) -> Response:
        with timed(metrics, served.name, "v2"):
            p = model(name, version)
            body = await read_body(request)
            header = request.headers.get("inference-header-content-length")
            # parsing, the model and encoding in a worker thread, unless quick (Pace): a big body never stalls
            # health checks
            content, length = await pace.run(len(body), answer_v2, p, body, header)
            headers = {} if length is None else {"Inference-Header-Content-Length": str(length)}
            media = "application/json" if length is None else "application/octet-stream"
            return Response(content, media_type=media, headers=headers)

    def answer_v2(p: Predictor, body: bytes, header: str | None) -> tuple[bytes, int | None]:
        req = parse_infer(body, header)
        arrays = p.check(req.inputs)
        names = [o.name for o in p.outputs]
        wanted = names if req.outputs is None else [o.name for o in req.outputs]
        for i, o in enumerate(wanted):
            if o not in names:
                raise BadRequest(f"outputs[{i}].name: the model has no output {o!r} (its outputs: {', '.join(names)})")
        results = p.predict(arrays, set(wanted))
        binary = {o.name: o.binary for o in req.outputs or []}
        return encode_response(served.name, served.version, req.id,
                               [(o, results[o], binary.get(o, req.binary_default)) for o in wanted if o in results])

    @app.get("/v1/models")
    def v1_models() -> dict:
        return {"models": [served.name]}

    @app.get("/v1/models/{name}")
    def v1_model(name: str) -> dict:
        model(name)
        return {"name": name, "ready": True}

    @app.post("/v1/models/{name}:predict")
    async def v1_predict(name: str, request: Request) -> dict:
        with timed(metrics, served.name, "v1"):
            p = model(name)
            doc = await read_json(request)
            instances = doc.get("instances")
            if not isinstance(instances, list) or not instances:
                raise Refused(400, "instances: required, a non-empty list (one entry per row)")
            if len(p.inputs) != 1:  # v1's instances are rows of one input
                raise Refused(400, f"instances: this model takes {len(p.inputs)} inputs "
                                   f"({', '.join(s.name for s in p.inputs)}): send them by name to "
                                   f"/v2/models/{served.name}/infer")
            spec = p.inputs[0]
            raw = {"name": spec.name, "datatype": spec.datatype, "shape": _v1_shape(instances), "data": instances}
            try:
                arrays = p.check([parse_tensor(raw, "instances")])
            except BadRequest as e:
                raise Refused(400, str(e).replace("inputs[0]", "instances")) from None
            first = p.outputs[0].name
            length = request.headers.get("content-length", "")  # read whole already, so a number if there
            size = int(length) if length.isdigit() else Pace.SMALL + 1  # chunked: taken as big
            results = await pace.run(size, p.predict, arrays, {first})
            return {"predictions": results[first].tolist()}

    @app.get("/metrics")
    def prometheus() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return app


class timed:
    """Counts the request, its error code if it fails, and its latency."""

    def __init__(self, metrics: Metrics, model: str, protocol: str) -> None:
        self.metrics, self.labels = metrics, (model, protocol)

    def __enter__(self) -> None:
        self.start = time.perf_counter()

    def __exit__(self, kind, error, tb) -> None:  # noqa: ANN001
        self.metrics.requests.labels(*self.labels).inc()
        self.metrics.latency.labels(*self.labels).observe(time.perf_counter() - self.start)
        if error is not None:
            code = str(error.status) if isinstance(error, Refused) else "500"
            self.metrics.errors.labels(*self.labels, code).inc()


async def read_body(request: Request) -> bytes:
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > MAX_BODY:
        raise Refused(413, f"body: {length} bytes, more than {MAX_BODY}")
    parts, size = [], 0
    async for chunk in request.stream():  # a chunked body is refused once it passes the bound, not after
        size += len(chunk)
        if size > MAX_BODY:
            raise Refused(413, f"body: more than {MAX_BODY} bytes")
        parts.append(chunk)
    return b"".join(parts)


async def read_json(request: Request) -> dict:
    try:
        doc = json.loads(await read_body(request))
    except ValueError as e:
        raise Refused(400, f"body: not JSON ({e})") from None
    if not isinstance(doc, dict):
        raise Refused(400, "body: a JSON object with `instances`")
    return doc


def _v1_shape(instances: list) -> list[int]:
    """Rows of features ([[...], ...]) or one value per row (text): the shape nested lists spell."""
    shape = [len(instances)]
    first = instances[0]
    while isinstance(first, list):
        shape.append(len(first))
        first = first[0] if first else None
    return shape


class Pace:
    """Whether to answer a request on the event loop rather than in a worker thread.

    The thread keeps the loop answering health checks while a model works; but handing a small request
    to it and back costs 100-150 µs on a 2-core machine, and the woken thread runs the model slower
    when another process ran on its core a moment before (bench/RESULTS.md, session 11): most of what
    one LogisticRegression row takes. So a request of at most :data:`SMALL` bytes runs inline while the
    slowest recent answer took under :data:`QUICK` seconds; the first ones, and every one after a slow
    answer, go to the thread until the model has shown it is quick again.
    """

    SMALL = 16 * 1024
    QUICK = 0.002
    FORGET = 0.98  # the slowest answer weighs this much less after each later one: ~160 to forget 50 ms

    def __init__(self) -> None:
        self.slowest = self.QUICK  # not yet quick: the first answer goes to the thread, and measures

    async def run(self, size: int, fn, *args):  # noqa: ANN001, ANN201
        if size > self.SMALL:
            return await run_sync(fn, *args)
        if self.slowest < self.QUICK:
            return answered(self._timed, fn, *args)
        return await run_sync(self._timed, fn, *args)

    def _timed(self, fn, *args):  # noqa: ANN001, ANN201
        """``fn(*args)``, its own time measured where it runs: the hop to a thread (and the pool's start,
        on the first request) is not the model's slowness."""
        start = time.perf_counter()
        try:
            return fn(*args)
        finally:
            took = time.perf_counter() - start
            self.slowest = max(took, self.slowest * self.FORGET)


async def run_sync(fn, *args):  # noqa: ANN001, ANN201
    """The model's predict in a worker thread: the event loop keeps answering health checks meanwhile."""
    from starlette.concurrency import run_in_threadpool
    return await run_in_threadpool(answered, fn, *args)


def answered(fn, *args):  # noqa: ANN001, ANN201
    """``fn(*args)``, its failure as the answer it gets: 400 for a bad request, 500 with the model's reason."""
    try:
        return fn(*args)
    except BadRequest as e:
        raise Refused(400, str(e)) from None
    except Exception as e:  # noqa: BLE001 - the caller learns the model failed, and why, not a bare 500
        raise Refused(500, f"the model failed on this input: {type(e).__name__}: {e}") from None
