"""The /serve proxy's hop to a replica (api/upstream.py) against real servers on 127.0.0.1: a scripted asyncio
server for the ways a replica can misbehave, and uvicorn (what model servers run on) for streaming."""

from __future__ import annotations

import asyncio
import hashlib
import socket

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from tests.support.aio import run
from trainyard.api.upstream import ConnectFailed, NoAnswer, UpstreamBroken, UpstreamPool


class Scripted:
    """Reads one request per answer and writes the next scripted answer; ``None`` closes the connection
    without answering (a replica that dropped a kept-alive connection), ``(answer, CLOSE)`` after answering."""

    def __init__(self, answers: list) -> None:
        self.answers = answers
        self.connections = 0
        self.requests: list[bytes] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while self.answers:
                head = await reader.readuntil(b"\r\n\r\n")
                self.requests.append(head)
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                await reader.readexactly(length)
                answer = self.answers.pop(0)
                if answer is None:
                    break
                writer.write(answer[0] if isinstance(answer, tuple) else answer)
                await writer.drain()
                if isinstance(answer, tuple):
                    break
        except asyncio.IncompleteReadError:
            pass
        finally:
            writer.close()

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        return "127.0.0.1:%d" % self.server.sockets[0].getsockname()[1]

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()


OK = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
CLOSE = "close"


def test_a_connection_the_replica_dropped_is_retried_once_for_a_get_and_reported_for_a_post():
    async def main() -> None:
        pool = UpstreamPool()
        replica = Scripted([OK, None, OK])
        async with replica as address:
            r = await pool.request(address, b"GET", b"/a?x=1", [(b"x-test", b"1")], None)
            assert (r.status, await r.read()) == (200, b"ok")
            r.release()
            # reuses the kept-alive connection, which the replica closes unanswered: sent again on a new one
            r = await pool.request(address, b"GET", b"/b", [], None)
            assert (r.status, await r.read()) == (200, b"ok")
            r.release()
            assert replica.connections == 2
            assert [h.split(b"\r\n")[0] for h in replica.requests] == [b"GET /a?x=1 HTTP/1.1", b"GET /b HTTP/1.1",
                                                                      b"GET /b HTTP/1.1"]
            assert b"\r\nx-test: 1\r\n" in replica.requests[0] and b"\r\nhost: " + address.encode() in replica.requests[0]

        replica = Scripted([OK, None, OK])
        async with replica as address:
            (await pool.request(address, b"POST", b"/p", [], b"{}")).release()
            with pytest.raises(UpstreamBroken, match="closed the connection without an answer"):
                await pool.request(address, b"POST", b"/p", [], b"{}")  # it may have acted on it: not sent twice
            assert len(replica.requests) == 2
        await pool.close()

    run(main())


def test_a_new_connection_closed_unanswered_is_no_answer_for_a_get_and_broken_for_a_post_or_a_garbled_answer():
    async def main() -> None:
        pool = UpstreamPool()
        async with Scripted([None]) as address:  # closes the first connection at its first request
            with pytest.raises(NoAnswer, match="closed the connection without an answer"):
                await pool.request(address, b"GET", b"/", [], None)  # the caller may send it to another replica
        async with Scripted([None]) as address:
            with pytest.raises(UpstreamBroken, match="closed the connection without an answer") as post:
                await pool.request(address, b"POST", b"/p", [], b"{}")
            assert not isinstance(post.value, NoAnswer)  # it may have acted on it: not sent elsewhere
        async with Scripted([(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok", CLOSE)]) as address:
            r = await pool.request(address, b"GET", b"/", [], None)  # answered, then closed: not a NoAnswer
            assert await r.read() == b"ok"
            r.release()
        async with Scripted([(b"NOT HTTP\r\n\r\n", CLOSE)]) as address:
            with pytest.raises(UpstreamBroken) as garbled:
                await pool.request(address, b"GET", b"/", [], None)
            assert not isinstance(garbled.value, NoAnswer)  # it answered, badly: the request reached it
        await pool.close()

    run(main())


def test_a_connection_freed_while_paused_reads_again_so_the_next_request_on_it_is_answered():
    async def main() -> None:
        pool = UpstreamPool()
        replica = Scripted([OK, OK])
        async with replica as address:
            r = await pool.request(address, b"GET", b"/a", [], None)
            assert await r.read() == b"ok"
            # what data_received does when an answer arrives faster than its caller reads it: were it freed so,
            # the next request on the connection (sent at once: api/serve_express.py) would never hear its answer
            r._conn.transport.pause_reading()
            r.release()
            conn = pool.send_now(address, b"GET", b"/b", [], None)
            assert conn is not None and conn.transport.is_reading()
            while not conn.parsed.done:
                await conn.wait()
            assert conn.parsed.body == [b"ok"]
            assert replica.connections == 1
        await pool.close()

    run(main())


def test_answers_without_a_body_until_close_or_broken_off_are_read_as_they_are():
    async def main() -> None:
        pool = UpstreamPool()
        replica = Scripted([b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n",  # an answer to HEAD
                            b"HTTP/1.1 204 No Content\r\n\r\n",
                            (b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nall of it", CLOSE),  # ends at close
                            (b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly this", CLOSE)])
        async with replica as address:
            r = await pool.request(address, b"HEAD", b"/", [], None)
            assert (r.status, r.length, await r.read()) == (200, 5, b"")
            r.release()
            r = await pool.request(address, b"DELETE", b"/", [], None)
            assert (r.status, await r.read()) == (204, b"")
            r.release()
            r = await pool.request(address, b"GET", b"/", [], None)
            assert (r.status, await r.read(), r.length) == (200, b"all of it", None)
            r.release()
            assert replica.connections == 1  # HEAD and 204 kept the connection
            r = await pool.request(address, b"GET", b"/", [], None)
            with pytest.raises(UpstreamBroken, match="in the middle of its answer"):
                await r.read()
            r.release()
        with pytest.raises(ConnectFailed):  # nothing listens there any more
            await pool.request(address, b"GET", b"/", [], None)
        await pool.close()

    run(main())


def test_bodies_stream_both_ways_chunked_through_a_uvicorn_replica():
    async def upload(request: Request) -> JSONResponse:
        digest, size = hashlib.sha256(), 0
        async for chunk in request.stream():
            digest.update(chunk)
            size += len(chunk)
        return JSONResponse({"size": size, "sha256": digest.hexdigest(), "chunked":
                             request.headers.get("transfer-encoding") == "chunked"})

    async def download(request: Request) -> StreamingResponse:
        async def parts():  # noqa: ANN202
            for i in range(20):
                yield bytes([65 + i]) * 100_000
                await asyncio.sleep(0)
        return StreamingResponse(parts())  # no length: sent chunked

    app = Starlette(routes=[Route("/up", upload, methods=["POST"]), Route("/down", download)])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    address = "127.0.0.1:%d" % sock.getsockname()[1]
    data = bytes(range(256)) * 12_000  # 3 MB, more than the proxy's buffer

    async def main() -> None:
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        serving = asyncio.ensure_future(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.01)
        pool = UpstreamPool()

        async def body():  # noqa: ANN202
            for i in range(0, len(data), 250_000):
                yield data[i:i + 250_000]

        r = await pool.request(address, b"POST", b"/up", [], body())
        assert r.status == 200 and (await r.read()).decode() == (
            '{"size":3072000,"sha256":"%s","chunked":true}' % hashlib.sha256(data).hexdigest())
        r.release()
        r = await pool.request(address, b"GET", b"/down", [], None)
        chunks = [c async for c in r.chunks()]
        r.release()
        assert r.length is None and len(chunks) > 1
        assert b"".join(chunks) == b"".join(bytes([65 + i]) * 100_000 for i in range(20))
        await pool.close()
        server.should_exit = True
        await serving

    run(main())


def test_a_replica_whose_answer_head_never_ends_is_cut_off_past_the_bound():
    class Endless(Scripted):
        async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nx-endless: ")
            try:
                for _ in range(4096):  # 64 MiB if nothing stopped it
                    writer.write(b"a" * 16384)
                    await writer.drain()
                    self.requests.append(b"")  # what it got to send
            except (ConnectionError, OSError):
                pass
            finally:
                writer.close()

    async def main() -> None:
        pool = UpstreamPool()
        replica = Endless([])
        async with replica as address:
            with pytest.raises(UpstreamBroken, match="answer head is over 64 KiB"):
                await pool.request(address, b"GET", b"/", [], None)
            assert len(replica.requests) < 1024  # it was cut off long before 16 MiB
        await pool.close()

    run(main())


def test_interim_answers_are_skipped_and_their_connection_is_not_reused():
    async def main() -> None:
        pool = UpstreamPool()
        hints = b"HTTP/1.1 103 Early Hints\r\nlink: </a.css>; rel=preload\r\n\r\n"
        replica = Scripted([(hints + b"HTTP/1.1 100 Continue\r\n\r\n" + OK, CLOSE)])
        async with replica as address:
            r = await pool.request(address, b"GET", b"/", [], None)  # the interim answers and the final one at once
            assert (r.status, r.headers, await r.read()) == (200, [(b"content-length", b"2")], b"ok")
            r.release()

            class Later(Scripted):  # the final answer after a pause
                async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                    await reader.readuntil(b"\r\n\r\n")
                    writer.write(hints)
                    await asyncio.sleep(0.2)
                    writer.write(OK)
                    await reader.read()
                    writer.close()

        async with Later([]) as address:
            r = await pool.request(address, b"GET", b"/", [], None)
            assert (r.status, await r.read()) == (200, b"ok")
            r.release()
            assert pool.idle(address) is None  # no final answer left owed on it, but no reuse on a rare path
        await pool.close()

    run(main())


def test_bytes_past_an_answer_are_never_read_as_part_of_it_and_its_connection_is_not_reused():
    async def main() -> None:
        pool = UpstreamPool()
        second = b"HTTP/1.1 200 OK\r\ncontent-length: 8\r\n\r\nINJECTED"
        for method, answer in ((b"GET", OK + second), (b"GET", b"HTTP/1.1 204 No Content\r\n\r\nstray"),
                               (b"HEAD", OK + second)):
            async with Scripted([(answer, CLOSE)]) as address:
                with pytest.raises(UpstreamBroken, match="more than its answer"):  # with the head, or with the body
                    r = await pool.request(address, method, b"/", [], None)
                    try:
                        await r.read()
                    finally:
                        r.release()
                assert pool.idle(address) is None
        async with Scripted([(OK, CLOSE)]) as address:  # an answer to HEAD, with the body a GET would get
            r = await pool.request(address, b"HEAD", b"/", [], None)
            assert (r.status, r.length, await r.read()) == (200, 2, b"")
            r.release()
            assert pool.idle(address) is None
        await pool.close()

    run(main())


@pytest.mark.parametrize("framing", ["chunked", "length"])
def test_the_end_of_an_answer_that_arrives_while_the_caller_writes_the_last_part_is_not_lost(framing):
    """The caller is slow (a client reading slowly): while it passes one part on, the rest of the answer and its end
    arrive together. Read as done before the rest was passed on, the answer came out short but whole-looking (the
    caller sent a clean end): seen once through nginx on a loaded CI machine, the last 130 bytes of 1.5 MB gone."""
    async def main() -> None:
        gate = asyncio.Event()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            framing_head = b"transfer-encoding: chunked" if framing == "chunked" else b"content-length: 8"
            writer.write(b"HTTP/1.1 200 OK\r\n" + framing_head + b"\r\n\r\n"
                         + (b"4\r\nfirs\r\n" if framing == "chunked" else b"firs"))
            await writer.drain()
            await gate.wait()  # the caller holds the first part: the rest and the end come in one write
            writer.write(b"4\r\nlast\r\n0\r\n\r\n" if framing == "chunked" else b"last")
            await writer.drain()
            await reader.read()  # until the pool lets the kept-alive connection go
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        pool = UpstreamPool()
        r = await pool.request("127.0.0.1:%d" % server.sockets[0].getsockname()[1], b"GET", b"/", [], None)
        got = []
        async for part in r.chunks():
            got.append(part)
            if len(got) == 1:
                gate.set()
                await asyncio.sleep(0.2)  # the rest arrives meanwhile, and is parsed as the answer's end
        r.release()
        await pool.close()
        server.close()
        await server.wait_closed()
        assert b"".join(got) == b"firslast"

    run(main())
