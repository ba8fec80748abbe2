"""Schemathesis against a live server's /openapi.json: every operation, bad input included, never a 500.

Why the Python API and not ``st run`` in a subprocess: the cases are ours before
they are sent, so a generated job cannot run a fuzzed shell command or copy a
fuzzed input path on the CI machine (see :func:`defang`), GET operations can be
pointed at a real, finished job and pipeline run (their logs, ``follow=true``
streams and waits included, which then end at once), and the time per
operation is bounded by us. The checks are schemathesis' own
(``not_a_server_error``).

Figures are printed at the end (see bench/RESULTS.md). Knobs:
``TRAINYARD_FUZZ_EXAMPLES`` (per operation and generation mode, default 12: what CI's
30-minute budget has room for, and still every operation in both modes, see the
printed pairs; 25 or more for a deeper run),
``TRAINYARD_FUZZ_SECONDS`` (hard budget for both passes, default 120),
``TRAINYARD_FUZZ_SEED`` (default 0; ``random`` for a new one each run).
"""

from __future__ import annotations

import collections
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from tests.conftest import need_module

schemathesis = need_module("schemathesis", "pip install -e '.[dev]'")  # the dev extra has it

from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.core.failures import FailureGroup  # noqa: E402
from schemathesis.generation import GenerationMode  # noqa: E402

pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("TRAINYARD_FUZZ_EXAMPLES", "12"))
BUDGET_S = float(os.environ.get("TRAINYARD_FUZZ_SECONDS", "120"))
_SEED = os.environ.get("TRAINYARD_FUZZ_SEED", "0")
SEED = random.randrange(2**32) if _SEED == "random" else int(_SEED)
# what a fuzzed job must not have on a real machine: a virtualenv install, files copied in or uploaded
RISKY_JOB_KEYS = ("env", "image", "inputs", "workdir", "outputs", "job")
# answered without a token even once authentication is mandatory
PUBLIC = {"GET /healthz"}


class OutOfTime(Exception):
    """An operation's share of the budget is spent (raised to end its hypothesis loop early)."""


@dataclass
class Tally:
    """What one pass sent and got back."""

    requests: int = 0
    statuses: collections.Counter = field(default_factory=collections.Counter)
    per_operation: collections.Counter = field(default_factory=collections.Counter)
    per_mode: collections.Counter = field(default_factory=collections.Counter)  # (operation, mode) → requests
    server_errors: list[str] = field(default_factory=list)  # one curl line per 5xx, to replay it
    unexpected: list[str] = field(default_factory=list)     # a pass-specific rule broken (e.g. not 401)


def defang(job: Any) -> None:
    """A job spec as generated, less what could touch this machine: it runs `true` if it runs at all.

    Only a command that would pass validation is replaced, so bad types still reach the server.
    """
    if not isinstance(job, dict):
        return
    for key in RISKY_JOB_KEYS:
        job.pop(key, None)
    if isinstance(job.get("command"), (str, list)):
        job["command"] = ["true"]


def defang_case(case: Any) -> None:
    body = case.body if isinstance(getattr(case, "body", None), dict) else None
    if body is None or not isinstance(body.get("spec"), dict):
        return
    if case.operation.path in ("/api/v1/jobs", "/api/v1/services"):  # a service's replicas are jobs
        defang(body["spec"])
    elif case.operation.path in ("/api/v1/schedules", "/api/v1/sweeps"):  # each fire, each trial, is its job
        defang(body["spec"].get("job"))
    elif case.operation.path == "/api/v1/pipelines" and isinstance(body["spec"].get("steps"), dict):
        for step in body["spec"]["steps"].values():
            defang(step)


def fuzz(schema: Any, base_url: str, headers: dict[str, str], known: dict[str, str], budget_s: float,
         examples: int, expect: Any = None) -> Tally:
    """Every operation, positive and negative cases, each operation in its fair share of ``budget_s``.

    ``expect(label, status)`` returns a complaint or None, for rules beyond "no 5xx".
    """
    tally = Tally()
    operations = [r.ok() for r in schema.get_all_operations()]
    deadline = time.monotonic() + budget_s
    for i, op in enumerate(operations):
        label = f"{op.method.upper()} {op.path}"
        op_deadline = time.monotonic() + (deadline - time.monotonic()) / (len(operations) - i)
        strategy = st.one_of(op.as_strategy(generation_mode=GenerationMode.POSITIVE),
                             op.as_strategy(generation_mode=GenerationMode.NEGATIVE))
        sent = [0]

        @seed(SEED)
        @settings(max_examples=2 * examples, deadline=None, database=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck), derandomize=False)
        @given(case=strategy)
        def run(case: Any) -> None:
            # the first case of an operation always goes, so each one is covered however slow the machine;
            # after its time, stop hypothesis: a case skipped by returning still costs its generation, and
            # the 2 × examples of every operation past the budget were what ran a loaded machine past
            # pytest's timeout (the server answered each request in under 3 s)
            if sent[0] and time.monotonic() > op_deadline:
                raise OutOfTime
            sent[0] += 1
            if op.method.upper() == "GET" and sent[0] % 2:  # half of the reads: a real, finished object
                for name in set(case.path_parameters or {}) & set(known):
                    case.path_parameters[name] = known[name]
            defang_case(case)
            response = case.call(base_url=base_url, headers=headers, timeout=30)
            tally.requests += 1
            tally.statuses[response.status_code] += 1
            tally.per_operation[label] += 1
            if case.meta is not None:
                tally.per_mode[(label, case.meta.generation.mode.value)] += 1
            try:
                case.validate_response(response, checks=[not_a_server_error], headers=headers)
            except (AssertionError, FailureGroup):
                tally.server_errors.append(f"{response.status_code} {case.as_curl_command(headers)}")
            complaint = expect(label, response.status_code) if expect else None
            if complaint:
                tally.unexpected.append(f"{complaint}: {case.as_curl_command(headers)}")

        try:
            run()
        except OutOfTime:
            pass
    return tally


def finished_objects(srv: Any, headers: dict[str, str] | None = None) -> dict[str, str]:
    """A job and a pipeline run that have ended, for reads to find (their waits and log streams end at once)."""
    with httpx.Client(base_url=srv.url, headers=headers or srv.headers, timeout=60) as http:
        job = http.post("/api/v1/jobs", json={"spec": {"name": "seen", "command": ["true"]}})
        assert job.status_code == 201, job.text
        run = http.post("/api/v1/pipelines", json={"spec": {"steps": {"a": {"command": ["true"]}}}})
        assert run.status_code == 201, run.text
        job_id, run_id = job.json()["id"], run.json()["id"]
        assert http.get(f"/api/v1/jobs/{job_id}/wait", params={"timeout": 60}).json()["status"] == "succeeded"
        assert http.get(f"/api/v1/pipelines/{run_id}/wait", params={"timeout": 60}).json()["status"] == "succeeded"
    return {"job_id": job_id, "run_id": run_id, "name": "default"}


def test_no_input_makes_the_server_answer_500(server, capsys):
    # given a live server, a finished job and run, and the schema it publishes
    known = finished_objects(server)
    schema = schemathesis.openapi.from_url(server.url + "/openapi.json", headers=server.headers)
    started = time.monotonic()
    # when every operation is fuzzed with the headers a client sends
    authed = fuzz(schema, server.url, server.headers, known, BUDGET_S * 0.75, EXAMPLES)
    # and again with none: once a token is required, only 401s (and public routes) may come back
    locked = bool(server.headers)

    def unauthorized_only(label: str, status: int) -> str | None:
        if locked and label not in PUBLIC and status != 401:
            return f"{label} answered {status} without a token"
        return None

    anonymous = fuzz(schema, server.url, {}, known, max(BUDGET_S - (time.monotonic() - started), 10),
                     max(EXAMPLES // 5, 2), unauthorized_only)
    took = time.monotonic() - started
    # then: the figures, for bench/RESULTS.md
    operations = len(list(schema.get_all_operations()))
    with capsys.disabled():
        print(f"\nfuzz (schemathesis {schemathesis.__version__}, seed {SEED}, {EXAMPLES} examples/operation/mode):"
              f" {operations} operations; with headers: {authed.requests} requests, {len(authed.per_mode)} "
              f"operation×mode pairs, statuses "
              f"{dict(sorted(authed.statuses.items()))}, {len(authed.server_errors)} server errors; "
              f"without: {anonymous.requests} requests, {len(anonymous.per_mode)} pairs, statuses "
              f"{dict(sorted(anonymous.statuses.items()))}, {len(anonymous.server_errors)} server errors; "
              f"{took:.0f}s")
    # and every operation was reached, none answered 5xx, and without a token only 401s where one is required
    assert len(authed.per_operation) == operations and len(anonymous.per_operation) == operations
    assert authed.server_errors == [] and anonymous.server_errors == [], \
        "\n".join((authed.server_errors + anonymous.server_errors)[:20])
    assert anonymous.unexpected == [], "\n".join(anonymous.unexpected[:20])


def only_401(label: str, status: int) -> str | None:
    """Nothing but a 401, except where no user token is asked for: /healthz, and launcher reports, which
    take their attempt's own credential (checked with the report: a user's token never applies one)."""
    if label in PUBLIC or status == 401 or (" /internal/" in label and status >= 400):
        return None
    return f"{label} answered {status}"


def test_with_users_on_no_input_answers_500_and_no_route_opens_without_a_live_token(tmp_path, capsys):
    # given a server with --auth, a member of one team, and a token of hers that was revoked
    from tests.support.servers import ServerProcess

    srv = ServerProcess(tmp_path / "home", ["--auth", "--cpus", "2", "--memory", "4Gi"])
    srv.start()
    try:
        with httpx.Client(base_url=srv.url, headers=srv.headers, timeout=60) as admin:
            made = admin.post("/api/v1/users", json={"name": "alice", "team": "vision", "role": "member"})
            alice = {"Authorization": f"Bearer {made.json()['token']['secret']}"}
            spare = admin.post("/api/v1/tokens", json={"name": "spare", "user": "alice"}).json()
            assert admin.post(f"/api/v1/tokens/{spare['info']['id']}/revoke").status_code == 200
        revoked = {"Authorization": f"Bearer {spare['secret']}"}
        known = finished_objects(srv, alice)
        schema = schemathesis.openapi.from_url(srv.url + "/openapi.json", headers=srv.headers)
        # when every operation is fuzzed as the member, then with the revoked token, then with none
        as_member = fuzz(schema, srv.url, alice, known, BUDGET_S * 0.5, EXAMPLES)
        as_revoked = fuzz(schema, srv.url, revoked, known, BUDGET_S * 0.2, max(EXAMPLES // 5, 2), only_401)
        anonymous = fuzz(schema, srv.url, {}, known, BUDGET_S * 0.2, max(EXAMPLES // 5, 2), only_401)
        with capsys.disabled():
            print(f"\nfuzz with --auth: as a member {as_member.requests} requests, {len(as_member.per_mode)} "
                  f"operation×mode pairs, statuses "
                  f"{dict(sorted(as_member.statuses.items()))}; revoked {dict(sorted(as_revoked.statuses.items()))}; "
                  f"anonymous {dict(sorted(anonymous.statuses.items()))}")
        # then no 5xx, and nothing but /healthz answers without a live token
        operations = len(list(schema.get_all_operations()))
        assert len(as_member.per_operation) == operations
        errors = as_member.server_errors + as_revoked.server_errors + anonymous.server_errors
        assert errors == [], "\n".join(errors[:20])
        assert as_revoked.unexpected == [] and anonymous.unexpected == [], \
            "\n".join((as_revoked.unexpected + anonymous.unexpected)[:20])
        assert 403 in as_member.statuses  # the admin routes were reached, and refused
    finally:
        srv.stop_all()
