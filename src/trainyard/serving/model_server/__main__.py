"""``python -m trainyard.serving.model_server --model PATH --name NAME --port PORT``: serve one model.

Bad arguments and unreadable paths fail before the server listens (exit status 2); a model
that fails to load after it listens stops the server with exit status 1, so a service replica
is restarted rather than left up and never ready.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import time
from pathlib import Path

from trainyard import envvars
from trainyard.serving.model_server.loaders import FORMATS, ModelError, load, resolve

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
log = logging.getLogger("trainyard.model_server")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m trainyard.serving.model_server", description=__doc__.split("\n")[0])
    p.add_argument("--model", type=Path, required=True, help="a model file, or a folder holding one")
    p.add_argument("--name", required=True, help="the model's name in URLs (/v2/models/NAME)")
    p.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8080")))
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--format", default="auto", choices=FORMATS,
                   help="auto picks by extension, then by content")
    p.add_argument("--module", help="pkg.mod:Factory that builds the torch module a state dict fills")
    p.add_argument("--version", default="1", help="the model version reported and accepted in URLs")
    p.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    args = p.parse_args(argv)
    if not NAME.match(args.name):
        p.error(f"--name: {args.name!r} must be letters, digits, '.', '_' or '-' (at most 100), starting with a "
                "letter or digit")
    if not 0 <= args.port <= 65535:
        p.error(f"--port: {args.port} is not a TCP port")
    if not NAME.match(args.version):
        p.error(f"--version: {args.version!r} must be letters, digits, '.', '_' or '-'")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(message)s")
    try:
        source = resolve(args.model, args.format, args.module)
    except ModelError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    # a --module next to the command (the IMDB example's serving.py) imports as under `python -m`
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())

    import uvicorn

    from trainyard.api.bounded_http import BoundedProtocol, EveryFew
    from trainyard.serving.model_server.app import ServedModel, create_app

    failed: list[str] = []

    def timed_load():  # noqa: ANN202
        start = time.perf_counter()
        predictor = load(source)
        log.info("model %s ready: %s (%s) loaded in %.2fs on %s", args.name, source.path, source.format,
                 time.perf_counter() - start, getattr(predictor, "device", "cpu"))
        return predictor

    def on_load_error(message: str) -> None:
        failed.append(message)
        log.error("model %s failed to load: %s", args.name, message)
        server.should_exit = True

    served = ServedModel(args.name, args.version, timed_load)
    # a service replica's token (services/service_tokens.py): out of the environment that a --module's code and
    # anything it starts inherit
    app = create_app(served, on_load_error, token=os.environ.pop(envvars.SERVICE_TOKEN, None))
    # the head bounds the trainyard server has (api/bounded_http.py): a model server is reached from its /serve/
    # address and, on a shared node, straight at its port
    server = uvicorn.Server(uvicorn.Config(app, host=args.host, port=args.port, log_level=args.log_level,
                                           access_log=False, http=BoundedProtocol))
    logging.getLogger("uvicorn.error").addFilter(EveryFew())  # garbage requests would fill the replica's log
    server.run()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
