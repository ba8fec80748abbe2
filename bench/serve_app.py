"""The replica of bench/serve.py: a tiny Starlette app on uvicorn (the stack a model server runs on).

    python bench/serve_app.py PORT   (or $TRAINYARD_SERVICE_PORT)

``GET /healthz`` answers once it listens; ``GET /predict`` and ``POST /predict`` answer a small JSON body
(the POST echoes the length of what it got), so what is measured is the path, not the work.
"""

import os
import sys

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route


async def healthz(request: Request) -> PlainTextResponse:
    return PlainTextResponse("ok")


async def predict(request: Request) -> JSONResponse:
    body = await request.body()
    return JSONResponse({"outputs": [{"name": "y", "shape": [1], "datatype": "FP32", "data": [0.5]}],
                         "received": len(body)})


app = Starlette(routes=[Route("/healthz", healthz), Route("/predict", predict, methods=["GET", "POST"])])


if __name__ == "__main__":
    port = int(sys.argv[1] if len(sys.argv) > 1 else os.environ["TRAINYARD_SERVICE_PORT"])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
