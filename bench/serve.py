"""Proxy overhead and cold start of a service: through ``/serve/NAME`` against straight to the replica.

    PYTHONPATH=src:bench .venv/bin/python bench/serve.py [--repeats 5] [--n 300] [--seconds 3] [--concurrency 16]
        [--cold 3] [--no-lane] [--front nginx]

``--no-lane`` sends every proxied request the usual way (the server's ``TRAINYARD_SERVE_LANE=off``), for a
side-by-side with the short way small requests take (api/serve_lane.py). ``--front nginx`` starts the server with
nginx in front (trainyard/front/): the proxied way is then nginx's fast path, and the server's CPU counts nginx's.

Starts its own trainyard server in a temporary home and two services of one replica each:
``bench/serve_app.py`` (a trivial Starlette app on uvicorn: what the proxy itself costs) and the
built-in model server (what ``trainyard serve`` runs, built by the same ``serve_spec``) over a
scikit-learn digits model trained here (a realistic replica). Then, in one run, alternating which
goes first each round, for each of the two:

- latency: ``--n`` sequential requests each way (``GET /predict``; for the model server
  ``POST /v2/models/digits/infer`` with one row), direct, through the proxy and through the relay below,
  each way on its own kept-alive connection, sent in turns of 25 requests a way; p50 of each way and round
  (target: proxy p50 ≤ 1.2 × direct); every way but the proxy's sends the replica's token
  (``X-Trainyard-Service-Token``, read from its environment) as the proxy's hop does: the model server refuses a
  request without it;
- throughput: ``--concurrency`` clients for ``--seconds``, direct and through the proxy;
  requests per second (target: proxy ≥ 0.8 × direct);
- the floor: the same requests through a byte relay to each replica (bench/serve_relay.py: uvloop,
  no HTTP parsing, auth or accounting), the least any user-space hop costs on this machine; and through
  a lean HTTP hop (bench/serve_lean.py: parses, checks the token, routes by name, and nothing more), the
  least a hop in Python that must read each request costs;
- cold start: a service with ``autoscale: {min: 0}`` and no replica: time from the request to
  its answer, against starting the same process by hand and polling its port until it
  answers (the baseline: what a cold start costs without trainyard); for the trivial replica,
  and for the digits model server as ``trainyard serve --min 0`` applies it (its readiness
  probe's period, 1 s, as users get it) against ``python -m trainyard.serving.model_server``
  started by hand and asked to infer until it answers.

Prints the medians over the rounds, the ratios and PASS/MISS; a latency ratio is the worse of the medians'
ratio and the median of the rounds' own ratios. It is a measurement: it exits 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

from trainyard.spec.serve import serve_spec

from benchserver import BenchServer

APP = str(Path(__file__).resolve().parent / "serve_app.py")
RELAY = str(Path(__file__).resolve().parent / "serve_relay.py")
LEAN = str(Path(__file__).resolve().parent / "serve_lean.py")
COLD_INFER = "/v2/models/colddigits/infer"
LATENCY_RATIO, THROUGHPUT_RATIO = 1.2, 0.8
BLOCK = 25  # requests a way in a row, in p50_side_by_side


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def digits_model(folder: Path) -> tuple[Path, bytes]:
    """A LogisticRegression on scikit-learn's digits (joblib), and a v2 infer body of one row."""
    import joblib
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression

    x, y = load_digits(return_X_y=True)
    path = folder / "digits.joblib"
    joblib.dump(LogisticRegression(max_iter=300).fit(x[:1200], y[:1200]), path)
    body = {"inputs": [{"name": "input-0", "shape": [1, 64], "datatype": "FP64", "data": x[1200].tolist()}]}
    return path, json.dumps(body).encode()


def send(http: httpx.Client, url: str, body: bytes | None) -> None:
    r = http.get(url) if body is None else http.post(url, content=body, headers={"content-type": "application/json"})
    r.raise_for_status()


def p50_latency(url: str, headers: dict, n: int, body: bytes | None = None) -> float:
    return p50_side_by_side({"one": (url, body)}, headers, n)["one"]


def p50_side_by_side(ways: dict[str, tuple[str, bytes | None]], headers: dict, n: int,
                     signed: dict[str, dict] | None = None) -> dict[str, float]:
    """p50 (ms) of ``n`` sequential requests each way, each way on its own kept-alive connection, sent in turns of
    :data:`BLOCK` requests a way (the order reversed every other turn): whatever the machine does meanwhile hits every
    way alike. On the lent H200 a replica's own p50 moved 0.43-0.85 ms between rounds of 400 requests, more than
    the hop costs (bench/RESULTS.md, session 19), so ways timed one whole round after another compared poorly.
    Turns of one request each were steadier still but measured something else: every request found the caches
    full of the other ways' processes (the VM's direct p50 0.62 -> 0.82 ms). ``signed``: some ways' own headers
    (a replica's token, which the proxy adds on its way)."""
    clients = {name: httpx.Client(headers={**headers, **(signed or {}).get(name, {})}, timeout=30) for name in ways}
    try:
        for name, (url, body) in ways.items():
            for _ in range(10):  # warm each connection (and the proxy's pool)
                send(clients[name], url, body)
        names = list(ways)
        times: dict[str, list[float]] = {name: [] for name in names}
        for turn in range(-(-n // BLOCK)):
            for name in names if turn % 2 == 0 else names[::-1]:
                url, body = ways[name]
                http, got = clients[name], times[name]
                for _ in range(min(BLOCK, n - turn * BLOCK)):
                    t = time.perf_counter()
                    send(http, url, body)
                    got.append(time.perf_counter() - t)
    finally:
        for http in clients.values():
            http.close()
    return {name: statistics.median(v) * 1000 for name, v in times.items()}


async def _throughput(url: str, headers: dict, seconds: float, concurrency: int, body: bytes | None) -> float:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(headers=headers, timeout=30, limits=limits) as http:
        async def one() -> None:
            r = await (http.get(url) if body is None else
                       http.post(url, content=body, headers={"content-type": "application/json"}))
            r.raise_for_status()

        await asyncio.gather(*(one() for _ in range(concurrency)))
        done = 0
        end = time.perf_counter() + seconds

        async def worker() -> None:
            nonlocal done
            while time.perf_counter() < end:
                await one()
                done += 1

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return done / (time.perf_counter() - began)


def throughput(url: str, headers: dict, seconds: float, concurrency: int, body: bytes | None = None) -> float:
    return asyncio.run(_throughput(url, headers, seconds, concurrency, body))


def by_hand(model: Path | None = None, body: bytes | None = None) -> float:
    """Seconds from starting the replica's process (the trivial app, or the model server over ``model``) to its
    first answer (to ``body`` on the model's infer path)."""
    port = free_port()
    argv = [sys.executable, APP, str(port)] if model is None else [
        sys.executable, "-m", "trainyard.serving.model_server", "--model", str(model), "--name", "colddigits",
        "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    url = f"http://127.0.0.1:{port}" + ("/predict" if model is None else COLD_INFER)
    began = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with httpx.Client(timeout=5) as http:
            while True:
                try:
                    r = http.get(url) if body is None else http.post(url, content=body)
                    if r.status_code == 200:
                        return time.perf_counter() - began
                except httpx.TransportError:
                    pass
                time.sleep(0.01)
    finally:
        proc.terminate()
        proc.wait()


def wait_answer(url: str, timeout: float = 60.0, headers: dict | None = None) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(url, timeout=1, headers=headers).status_code == 200:
                return
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def cold(srv: BenchServer, headers: dict, name: str = "cold", body: bytes | None = None) -> float:
    """Seconds from a request to a service at zero replicas to its answer (a GET of the trivial app's
    /predict, or ``body`` to the model server's infer); waits for zero first."""
    c = srv.client
    while c.services.get(name).replicas:
        time.sleep(0.1)
    url = f"{srv.url}/serve/{name}" + ("/predict" if body is None else COLD_INFER)
    began = time.perf_counter()
    r = (httpx.get(url, headers=headers, timeout=120) if body is None
         else httpx.post(url, headers=headers, content=body, timeout=120))
    r.raise_for_status()
    return time.perf_counter() - began


def listener(port: int) -> psutil.Process:
    """The process listening on ``port`` (the replica itself, not a launcher or shell above it)."""
    for proc in psutil.process_iter(["cmdline"]):
        if APP not in (proc.info["cmdline"] or []):
            continue
        try:
            if any(c.status == psutil.CONN_LISTEN and c.laddr.port == port for c in proc.net_connections("tcp")):
                return proc
        except psutil.Error:
            continue
    raise RuntimeError(f"no process of {APP} listens on port {port}")


def service_token(address: str) -> dict[str, str]:
    """The header with the token of the replica listening at ``address`` (from its environment: the bench's user
    is the replica's), which a request that does not come through /serve/ must carry, as the proxy's do."""
    port = int(address.rsplit(":", 1)[1])
    for proc in psutil.process_iter():
        try:
            if any(c.status == psutil.CONN_LISTEN and c.laddr.port == port for c in proc.net_connections("tcp")):
                token = proc.environ().get("TRAINYARD_SERVICE_TOKEN")
                return {"X-Trainyard-Service-Token": token} if token else {}
        except psutil.Error:
            continue
    raise RuntimeError(f"no process listens on port {port}")


def cpu_seconds(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def parse_with_lane(ap: argparse.ArgumentParser) -> argparse.Namespace:
    """``ap``'s arguments, with ``--no-lane``: the server this bench starts sends every proxied request the usual
    way (``TRAINYARD_SERVE_LANE=off``; api/serve_lane.py)."""
    ap.add_argument("--no-lane", action="store_true", help="every proxied request the usual way (api/serve_lane.py)")
    ap.add_argument("--front", choices=("none", "nginx"), default="none", help="the server's --front")
    args = ap.parse_args()
    if args.no_lane:
        os.environ["TRAINYARD_SERVE_LANE"] = "off"  # the server's environment is this one
    return args


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--n", type=int, default=300, help="sequential requests per latency round")
    ap.add_argument("--seconds", type=float, default=3.0, help="length of one throughput round")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--cold", type=int, default=3, help="cold starts to measure (0: none)")
    args = parse_with_lane(ap)
    if args.repeats < 3 or args.cold < 0:
        ap.error("--repeats must be at least 3, --cold at least 0")

    with tempfile.TemporaryDirectory(prefix="trainyard-bench-serve-") as tmp:
        srv = BenchServer(Path(tmp) / "home", [sys.executable, "-m", "trainyard", "server", "--front", args.front,
                                               "--container-runtime", "none"])
        try:
            headers = {"Authorization": f"Bearer {(Path(tmp) / 'home' / 'token').read_text().strip()}"}
            readiness = {"path": "/healthz", "period": "1s"}
            job = {"command": [sys.executable, APP], "resources": {"cpu": 0.1}}
            info = srv.client.services.apply({"name": "bench", **job, "service": {"replicas": 1, "readiness": readiness}})
            model_path, infer_body = digits_model(Path(tmp))
            # what `trainyard serve file://… --name digits` applies, on this interpreter and a tenth of a core
            srv.client.services.apply(serve_spec(f"file://{model_path}", "digits", replicas=1, cpu=0.1,
                                                 python=sys.executable))
            info = srv.client.services.wait_ready("bench", 1, timeout=120)
            model_info = srv.client.services.wait_ready("digits", 1, timeout=120)
            direct = f"http://{info.replicas[0].address}/predict"
            proxied = f"{srv.url}/serve/bench/predict"
            infer = "/v2/models/digits/infer"
            model_direct = f"http://{model_info.replicas[0].address}{infer}"
            model_proxied = f"{srv.url}/serve/digits{infer}"
            ports = [free_port(), free_port()]
            relays = [subprocess.Popen([sys.executable, RELAY, str(port), replica.replicas[0].address],
                                       stdout=subprocess.DEVNULL) for port, replica in zip(ports, (info, model_info))]
            relay, model_relay = f"http://127.0.0.1:{ports[0]}/predict", f"http://127.0.0.1:{ports[1]}{infer}"
            lean_port = free_port()
            relays.append(subprocess.Popen(
                [sys.executable, LEAN, str(lean_port), f"bench={info.replicas[0].address}",
                 f"digits={model_info.replicas[0].address}"],
                env={**os.environ, "BENCH_TOKEN": headers["Authorization"].removeprefix("Bearer ")},
                stdout=subprocess.DEVNULL))
            lean, model_lean = (f"http://127.0.0.1:{lean_port}/serve/bench/predict",
                                f"http://127.0.0.1:{lean_port}/serve/digits{infer}")
            # every way but the proxy's goes straight to a replica, so carries its token, as the proxy's hop does
            tokens = [service_token(info.replicas[0].address), service_token(model_info.replicas[0].address)]
            signed = {name: tokens[name.startswith("model")] for name in ("direct", "relay", "lean", "model direct",
                                                                          "model relay", "model lean")}
            wait_answer(relay)
            wait_answer(f"http://127.0.0.1:{ports[1]}/v2/health/ready")
            wait_answer(f"http://127.0.0.1:{lean_port}/serve/digits/v2/health/ready", headers=headers)
            floor = p50_latency(f"{srv.url}/healthz", {}, args.n)
            print(f"server {srv.url}; replica {info.replicas[0].address}, model server "
                  f"{model_info.replicas[0].address}; load average {os.getloadavg()[0]:.1f}; "
                  f"the server's own /healthz p50 {floor:.2f} ms", flush=True)

            server = psutil.Process(srv.proc.pid)  # with nginx's processes where it is in front: the hop is theirs
            server_procs = [server, *[p for p in server.children(True) if p.name() == "nginx"]]
            replica_proc = listener(int(info.replicas[0].address.rsplit(":", 1)[1]))
            lat: dict[str, list[float]] = {k: [] for k in ("direct", "proxy", "relay", "lean", "model direct",
                                                            "model proxy", "model relay", "model lean")}
            cpu = {"server": [], "replica": []}
            rps = {"direct": [], "proxy": [], "model direct": [], "model proxy": []}
            bodies = {"model direct": infer_body, "model proxy": infer_body, "model relay": infer_body,
                      "model lean": infer_body}
            for i in range(args.repeats):
                order = [("direct", direct), ("proxy", proxied), ("relay", relay), ("lean", lean)][
                    :: 1 if i % 2 == 0 else -1]
                model_order = [("model direct", model_direct), ("model proxy", model_proxied),
                               ("model relay", model_relay), ("model lean", model_lean)][:: 1 if i % 2 == 0 else -1]
                for ways in (order, model_order):
                    before = (sum(map(cpu_seconds, server_procs)), cpu_seconds(replica_proc))
                    got = p50_side_by_side({name: (url, bodies.get(name)) for name, url in ways}, headers, args.n,
                                           signed)
                    for name, p50 in got.items():
                        lat[name].append(p50)
                    if ways is order:  # CPU each request costs the server (proxied ones) and the replica (all 4 ways)
                        cpu["server"].append((sum(map(cpu_seconds, server_procs)) - before[0]) / (args.n + 10) * 1000)
                        cpu["replica"].append((cpu_seconds(replica_proc) - before[1]) / (args.n + 10) / 4 * 1000)
                for name, url in [(n, u) for n, u in order + model_order if "relay" not in n and "lean" not in n]:
                    rps[name].append(throughput(url, {**headers, **signed.get(name, {})}, args.seconds,
                                                args.concurrency, bodies.get(name)))
                print(f"round {i + 1}: p50 direct {lat['direct'][-1]:.2f} ms, proxy {lat['proxy'][-1]:.2f} ms "
                      f"(relay {lat['relay'][-1]:.2f}, lean {lat['lean'][-1]:.2f} ms); "
                      f"throughput direct {rps['direct'][-1]:.0f}/s, proxy {rps['proxy'][-1]:.0f}/s; "
                      f"model server p50 direct {lat['model direct'][-1]:.2f} ms, proxy {lat['model proxy'][-1]:.2f} ms "
                      f"(relay {lat['model relay'][-1]:.2f}, lean {lat['model lean'][-1]:.2f} ms), "
                      f"throughput direct {rps['model direct'][-1]:.0f}/s, proxy {rps['model proxy'][-1]:.0f}/s",
                      flush=True)

            for proc in relays:
                proc.terminate()
                proc.wait()
            # probed often: a held request goes on at the first probe that answers
            srv.client.services.apply({"name": "cold", **job, "service": {
                "readiness": {**readiness, "period": "0.1s"},
                "autoscale": {"min": 0, "max": 1, "scale_down_after": "1s"}}})
            srv.client.services.apply(serve_spec(f"file://{model_path}", "colddigits", minimum=0, maximum=1,
                                                 scale_down_after="1s", cpu=0.1, python=sys.executable))
            colds, hands, model_colds, model_hands = [], [], [], []
            for _ in range(args.cold):
                hands.append(by_hand())
                colds.append(cold(srv, headers))
                model_hands.append(by_hand(model_path, infer_body))
                model_colds.append(cold(srv, headers, "colddigits", infer_body))
            print(f"cold starts: through trainyard {[round(c, 2) for c in colds]} s; "
                  f"by hand {[round(h, 2) for h in hands]} s; model server through trainyard "
                  f"{[round(c, 2) for c in model_colds]} s, by hand {[round(h, 2) for h in model_hands]} s",
                  flush=True)
        finally:
            for name in ("bench", "digits", "cold", "colddigits"):  # replicas outlive the server otherwise, as jobs do
                try:
                    srv.client.services.delete(name)
                except Exception:  # noqa: BLE001 (never created)
                    pass
            while any(s.replicas for s in srv.client.services.list()):
                time.sleep(0.2)
            srv.close()

    print()
    print(f"the /serve/ lane: {'off (--no-lane)' if args.no_lane else 'on'}; front: {args.front}")
    for title, d, p in (("trivial replica (serve_app.py, GET /predict)", "direct", "proxy"),
                        ("model server (digits, POST /v2/models/digits/infer, one row)", "model direct", "model proxy")):
        ld, lp = statistics.median(lat[d]), statistics.median(lat[p])
        td, tp = statistics.median(rps[d]), statistics.median(rps[p])
        print(f"{title}:")
        # the verdict takes the worse of two readings: the medians' ratio, and the median of each round's own
        # (the session-19 H200 rounds read 1.07 one way and 1.23 the other)
        rounds = [p_ / d_ for p_, d_ in zip(lat[p], lat[d])]
        ratio = max(lp / ld, statistics.median(rounds))
        print(f"  latency p50 (median of {args.repeats} rounds): direct {ld:.2f} ms, proxy {lp:.2f} ms, "
              f"ratio {ratio:.2f} (target ≤ {LATENCY_RATIO}) {verdict(ratio <= LATENCY_RATIO)}; of the medians "
              f"{lp / ld:.2f}, the rounds' own {statistics.median(rounds):.2f} "
              f"({sum(r <= LATENCY_RATIO for r in rounds)} of {len(rounds)} within)")
        lr = statistics.median(lat[d.replace("direct", "relay")])
        print(f"  the floor of a hop here: a byte relay (serve_relay.py), p50 {lr:.2f} ms, ratio {lr / ld:.2f}")
        ll = statistics.median(lat[d.replace("direct", "lean")])
        print(f"  a lean HTTP hop (serve_lean.py: parse, token, route), p50 {ll:.2f} ms, ratio {ll / ld:.2f}")
        print(f"  throughput ({args.concurrency} clients): direct {td:.0f}/s, proxy {tp:.0f}/s, "
              f"ratio {tp / td:.2f} (target ≥ {THROUGHPUT_RATIO}) {verdict(tp >= THROUGHPUT_RATIO * td)}")
    print(f"CPU per proxied request to the trivial replica: the server {statistics.median(cpu['server']):.2f} ms, "
          f"the replica {statistics.median(cpu['replica']):.2f} ms (machine load average {os.getloadavg()[0]:.1f})")
    if colds:  # --cold 0: latency and throughput only
        for what, through, hand in (("trivial replica", colds, hands), ("model server (digits)", model_colds,
                                                                          model_hands)):
            cd, ch = statistics.median(through), statistics.median(hand)
            print(f"cold start to first answer, {what}: through trainyard {cd:.2f} s, by hand {ch:.2f} s, "
                  f"ratio {cd / ch:.1f}")


if __name__ == "__main__":
    main()
