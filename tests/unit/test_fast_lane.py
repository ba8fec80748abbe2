"""The fast lane answers its routes as the app's routing would: path parameters, the app's error
handlers, a 500 for what no handler takes, and every other request left to the app."""

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from fastapi.testclient import TestClient

from trainyard.api.fast_lane import FastLane


class Refused(Exception):
    pass


async def lean(request: Request) -> Response:
    n = request.path_params["n"]
    if n == "refused":
        raise Refused(n)
    if n == "broken":
        raise RuntimeError("no handler")
    return JSONResponse({"n": n, "via": request.scope.get("route").path})


def make_app(shadowed: bool = False) -> FastAPI:
    app = FastAPI()
    if shadowed:
        app.get("/things/{anything}/go")(lambda anything: {"first": anything})
    app.get("/things/{n}/go")(lean)
    app.get("/things/{n}")(lambda n: {"plain": n})

    @app.exception_handler(Refused)
    async def _refused(request: Request, exc: Refused) -> JSONResponse:
        return JSONResponse({"refused": str(exc)}, status_code=409)

    app.add_middleware(FastLane, endpoints=[lean], app_of=lambda: app)
    return app


def test_a_lane_answers_with_its_path_parameters_and_the_apps_error_handlers():
    tc = TestClient(make_app(), raise_server_exceptions=False)
    assert tc.get("/things/7/go").json() == {"n": "7", "via": "/things/{n}/go"}
    assert tc.get("/things/refused/go").status_code == 409
    assert tc.get("/things/broken/go").status_code == 500
    # other paths and other methods on the lane's path go on to the app
    assert tc.get("/things/7").json() == {"plain": "7"}
    assert tc.post("/things/7/go").status_code == 405
    assert [r.path for r in lane_of(tc.app)._lanes()] == ["/things/{n}/go"]  # answered by the lane, not the app


def lane_of(app: FastAPI) -> FastLane:
    layer = app.middleware_stack
    while not isinstance(layer, FastLane):
        layer = layer.app
    return layer


def test_a_lane_that_an_earlier_route_would_answer_turns_off_and_the_app_answers(caplog):
    with caplog.at_level("WARNING", logger="trainyard.api.fast_lane"):
        app = make_app(shadowed=True)
        assert TestClient(app).get("/things/7/go").json() == {"first": "7"}
    assert "a route before /things/{n}/go answers it in the app" in caplog.text
    assert lane_of(app)._lanes() == []
