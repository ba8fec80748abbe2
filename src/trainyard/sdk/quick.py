"""Submit a self-contained job spec file and wait for its end, on the standard library (and, for ``--wait``
on this machine, the SDK's plain connection) alone.

For ``trainyard run JOB.yaml --wait``, a command that may live a few hundred milliseconds: the full
SDK (:class:`~trainyard.sdk.client.Client`) imports httpx and pydantic and builds the spec's models
and the job's records, about half a second of CPU before its first byte is sent. A spec with nothing
to prepare on this side (no work dir to pack, no requirements file or input path to read, not a
Kubeflow or service document) needs none of that: its YAML text goes to the server as it is (the
API takes ``application/yaml``, unparsed here), and the server validates it as it validates every
submission.

Everything else raises :class:`NotQuick` before the job exists, and the caller takes the full SDK:
a spec that needs preparing, a server that is not already known and running (finding or starting
the local one is the full SDK's work), and any refusal (4xx: nothing was created), so errors are
reported the one way the CLI reports them.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from trainyard import errors
from trainyard.home import moved_leader
from trainyard.locations import server_url
from trainyard.sdk.known import NotQuick, known_server
from trainyard.sdk.trust import context_for
from trainyard.status import JobStatus

if TYPE_CHECKING:
    from http.client import HTTPConnection

    from trainyard.sdk.plain_http import PlainConnection

WAIT = 60.0  # seconds one long poll may last; the server answers at the job's end or then
LOST_AFTER = 60.0  # seconds a followed log stream may stay down before the server counts as lost


def submit_and_wait(path: Path, on_submitted: Any = None) -> dict[str, Any]:
    """Submit the spec file at ``path`` and wait for the job's end; the ended job as the API's JSON.

    ``on_submitted(job_id)`` is called once the job exists. Raises :class:`NotQuick` (nothing
    submitted), or after submission the :mod:`trainyard.errors` error the server answered."""
    text = _self_contained(path)
    url, token = known_server()
    link, headers = _link(url), _auth(token)
    try:
        job = _submit(link, headers, text)
        if on_submitted is not None:
            on_submitted(job["id"])
        while not JobStatus(job["status"]).is_terminal():
            try:
                job = _json(*_call(link, "GET", f"/api/v1/jobs/{quote(job['id'])}/wait?timeout={WAIT:g}", headers))
            except OSError:
                moved = moved_leader(url)  # in a job: the servers' new leader, once one is named
                if moved is None:
                    raise
                link.close()
                url, token = moved
                link, headers = _link(url), _auth(token)
        return job
    except OSError as e:
        raise errors.ServerUnavailable(f"lost the trainyard server at {url}: {e}") from None
    finally:
        link.close()


def submit_and_follow(path: Path, on_submitted: Any, on_chunk: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Submit the spec file at ``path`` and stream its logs until it ends, as the full SDK's
    ``Client.logs(follow=True)`` does (reconnecting from the last event id after a dropped stream);
    the ended job and its metric points, as the API's JSON.

    ``on_submitted(job)`` is called once the job exists, ``on_chunk(chunk)`` with each log chunk (a
    dict: attempt, replica, data, ...) in order. Raises as :func:`submit_and_wait` does."""
    from http.client import HTTPException  # a stream is read line by line: http.client's, not the plain link

    text = _self_contained(path)
    url, base, headers = _at(*known_server())
    link = _Std(url)
    conn = link.conn
    try:
        job = _submit(link, headers, text)
    except OSError as e:
        conn.close()
        raise errors.ServerUnavailable(f"lost the trainyard server at {url}: {e}") from None
    on_submitted(job)
    job_path = f"/api/v1/jobs/{quote(job['id'])}"
    after, down_since = 0, None
    while True:  # reconnect after a dropped stream (a server restart), from the last event id
        try:
            conn.request("GET", f"{base}{job_path}/logs?after={after}&follow=true",
                         headers={**headers, "Accept": "text/event-stream", "Cache-Control": "no-store"})
            resp = conn.getresponse()
            if resp.status >= 400:
                _json(resp.status, resp.read())
            down_since = None
            for event, event_id, data in _events(resp):
                if event == "end":  # a fresh connection for the rest: draining this one could wait on the server
                    conn.close()
                    conn = _connect(url)
                    return _get(conn, base + job_path, headers), _get(conn, f"{base}{job_path}/metrics", headers)
                after = int(event_id)
                on_chunk(json.loads(data))
            raise ConnectionResetError("the log stream ended before the job")
        except (OSError, HTTPException) as e:
            conn.close()
            down_since = down_since or time.monotonic()
            if time.monotonic() - down_since > LOST_AFTER:
                raise errors.ServerUnavailable(f"lost the trainyard server at {url}: {e}") from None
            time.sleep(0.5)
            moved = moved_leader(url, wait=0)  # in a job: the servers' new leader, if one is named yet
            if moved is not None:
                url, base, headers = _at(*moved)
            elif server_url() is None:  # a restarted local server may listen elsewhere; never start one from here
                try:
                    url, _ = known_server()
                    base = urlsplit(url).path.rstrip("/")
                except NotQuick:
                    pass
            conn = _connect(url)


def _at(url: str, token: str | None) -> tuple[str, str, dict[str, str]]:
    """The server's URL, the API's base path there, the auth header."""
    return url, urlsplit(url).path.rstrip("/"), _auth(token)


def _events(resp: Any) -> Iterator[tuple[str, str, str]]:
    """``(event, id, data)`` of each server-sent event with data, as the SSE spec dispatches them;
    comments (the keep-alive) and empty events are skipped."""
    event, event_id, data = "", "", []
    while line := resp.readline():
        line = line.decode().rstrip("\r\n")
        if not line:
            if data:
                yield event or "message", event_id, "\n".join(data)
            event, data = "", []
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "data":
            data.append(value)
        elif field == "event":
            event = value
        elif field == "id":
            event_id = value


def _submit(link: Any, headers: dict[str, str], text: str) -> dict[str, Any]:
    """The job the spec's text became; :class:`NotQuick` when the server did not take it (nothing sent,
    or refused: nothing created)."""
    try:
        status, body = _call(link, "POST", "/api/v1/jobs", {**headers, "Content-Type": "application/yaml"},
                             text.encode(), idempotent=False, unsent=True)
    except _Unsent:
        raise NotQuick("the server did not take the request") from None
    if 400 <= status < 500:
        raise NotQuick(f"refused ({status}): the full SDK reports why")
    return _json(status, body)


class _Unsent(OSError):
    """Nothing of the request reached the server."""


def _link(url: str) -> PlainConnection | _Std:
    """A connection for JSON requests to ``url``: the SDK's plain one to this machine (the common case:
    http.client's e-mail header parser and ``ssl`` cost more to import than the job takes to run),
    http.client's for anything else (TLS, another machine, a proxy named in the environment)."""
    from trainyard.sdk.plain_http import PlainConnection, plain_http_for

    if plain_http_for(url):
        return PlainConnection(url, WAIT + 10)
    return _Std(url)


class _Std:
    """:class:`~trainyard.sdk.plain_http.PlainConnection`'s ``call`` on http.client, its errors as OSError."""

    def __init__(self, url: str) -> None:
        self.conn = _connect(url)
        self.base = urlsplit(url).path.rstrip("/")

    def call(self, method: str, target: str, body: bytes | None, headers: dict[str, str], *, idempotent: bool,
             timeout: float | None = None) -> tuple[int, bytes]:
        from http.client import HTTPException

        try:
            self.conn.request(method, self.base + target, body=body, headers=headers)
        except OSError as e:
            raise _Unsent(str(e)) from None
        try:
            return _answer(self.conn)
        except HTTPException as e:
            raise ConnectionError(f"{type(e).__name__}: {e}") from None

    def close(self) -> None:
        self.conn.close()


def _call(link: Any, method: str, target: str, headers: dict[str, str], body: bytes | None = None, *,
          idempotent: bool = True, unsent: bool = False) -> tuple[int, bytes]:
    """``(status, body)``; OSError when the server could not be reached (:class:`_Unsent` where
    ``unsent`` and nothing was sent)."""
    answer = link.call(method, target, body, headers, idempotent=idempotent)
    if answer is None:  # the plain connection declines only what never reached the server, or may go again
        raise _Unsent("no connection to the server") if unsent else ConnectionError("no answer from the server")
    return answer


def _auth(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def _get(conn: HTTPConnection, path: str, headers: dict[str, str]) -> Any:
    conn.request("GET", path, headers=headers)
    return _json(*_answer(conn), checked=False)


# keys whose values name files on this side (a work dir to pack, input paths and a requirements file to
# read, relative to the spec's folder: trainyard.sdk.prepare), or that make the file another kind of
# document (a Kubeflow manifest, a service)
PREPARED = ("workdir", "inputs", "requirements", "kind", "apiVersion", "service")
# what in a double-quoted YAML scalar may spell a letter: a character by its code, and an escaped line
# break, which joins two lines (every other escape stands for a character that is not a letter)
_SPELLS = re.compile(r"\\(?:x([0-9A-Fa-f]{2})|u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|\r?\n[ \t]*)")


def _self_contained(path: Path) -> str:
    """The spec's text, if the server can take it as it is.

    Read as text, not parsed (yaml costs more to import than a short job takes to run): a spec in which
    any of :data:`PREPARED` appears anywhere, as written or as its escapes spell it, is the full SDK's.
    Every way YAML has of writing a key keeps its letters in the text (quoted, in flow style, explicit,
    merged from an anchor) or in its escapes, so none is missed; a word in a command only costs the full
    SDK's way. What is not a valid spec goes to the server, which refuses it (4xx): then the full SDK
    says why, naming the line."""
    if path.suffix not in (".yaml", ".yml"):
        raise NotQuick("not a YAML spec")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError):
        raise NotQuick("unreadable: the full SDK says why") from None
    spelled = _SPELLS.sub(_spelled, text) if "\\" in text else text
    if any(word in text or word in spelled for word in PREPARED):
        raise NotQuick("the spec may have files to read or pack on this side")
    return text


def _spelled(m: re.Match[str]) -> str:
    code = next((int(g, 16) for g in m.groups() if g), None)
    return "" if code is None or code > 0x10FFFF else chr(code)


def _connect(url: str) -> HTTPConnection:
    from http.client import HTTPConnection, HTTPSConnection

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise NotQuick(f"not an http(s) URL: {url!r}")
    if parts.scheme == "https":
        return HTTPSConnection(parts.hostname, parts.port, timeout=WAIT + 10, context=context_for(url))
    return HTTPConnection(parts.hostname, parts.port, timeout=WAIT + 10)


def _answer(conn: HTTPConnection) -> tuple[int, bytes]:
    resp = conn.getresponse()
    return resp.status, resp.read()


def _json(status: int, body: bytes, checked: bool = True) -> Any:
    """The answer's JSON; the typed error a failed answer carries, as the full SDK raises it."""
    try:
        data = json.loads(body or b"null")
    except ValueError:
        data = None
    if status >= 400:
        if isinstance(data, dict) and "code" in data:
            raise errors.from_dict(data)
        raise errors.TrainyardError(f"HTTP {status} from the server: {body[:500].decode(errors='replace')}")
    if checked and (not isinstance(data, dict) or not isinstance(data.get("id"), str) or "status" not in data):
        raise errors.TrainyardError(f"an answer the client cannot read (HTTP {status}): {body[:200]!r}")
    return data
