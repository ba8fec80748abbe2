"""A second floor for bench/serve.py: the least a ``/serve/NAME`` hop costs that, like trainyard's, parses each
request and answer, checks the caller's bearer token and routes by the service's name; what it leaves out is
trainyard's own work per request (counting, spreading, the autoscaler's notes, hop-by-hop rules beyond the
basics, errors and retries). Beside ``serve_relay.py`` (no parsing at all) it splits the hop's cost into what
any HTTP-aware proxy in Python pays and what trainyard adds (bench/RESULTS.md, session 21).

    BENCH_TOKEN=... python bench/serve_lean.py PORT NAME=HOST:PORT [NAME=HOST:PORT ...]

Kept-alive connections both ways, one request at a time per caller's connection; a body needs a content-length.
"""

import asyncio
import hashlib
import os
import sys

import httptools
import uvloop

HOP_BY_HOP = frozenset({b"connection", b"keep-alive", b"transfer-encoding", b"te", b"upgrade", b"trailer",
                        b"proxy-authorization", b"authorization", b"content-length"})


class _Replica(asyncio.Protocol):
    """One kept-alive connection to a replica; reads one answer at a time for ``caller``."""

    def __init__(self, address: tuple[str, int], idle: dict) -> None:
        self.address, self.idle = address, idle
        self.caller: "_Caller | None" = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def send(self, caller: "_Caller", data: bytes) -> None:
        self.caller, self.headers, self.body, self.done = caller, [], [], False
        self.parser = httptools.HttpResponseParser(self)
        self.transport.write(data)

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.done = True

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)
        if self.done and self.caller is not None:
            caller, self.caller = self.caller, None
            self.idle.setdefault(self.address, []).append(self)
            caller.answer(self.parser.get_status_code(), self.headers, b"".join(self.body))

    def connection_lost(self, exc: Exception | None) -> None:
        if self.caller is not None:
            self.caller.transport.close()
        pool = self.idle.get(self.address, [])
        if self in pool:
            pool.remove(self)


class _Caller(asyncio.Protocol):
    def __init__(self, routes: dict[bytes, tuple[str, int]], tokens: set[bytes], idle: dict) -> None:
        self.routes, self.tokens, self.idle = routes, tokens, idle

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.parser = httptools.HttpRequestParser(self)
        self.peer = transport.get_extra_info("peername")[0].encode()

    def on_message_begin(self) -> None:
        self.url, self.headers, self.body = b"", [], []

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        url = self.url
        end = url.find(b"/", 7)
        address = self.routes.get(url[7:end]) if url.startswith(b"/serve/") and end > 0 else None
        if address is None:
            return self.reply(404, b"no such service")
        authorization = next((v for n, v in self.headers if n == b"authorization"), None)
        if authorization is None or hashlib.sha256(authorization).digest() not in self.tokens:
            return self.reply(401, b"who are you")
        body = b"".join(self.body)
        head = b"".join([b"%s %s HTTP/1.1\r\n" % (self.parser.get_method(), url[end:]),
                         *[b"%s: %s\r\n" % h for h in self.headers if h[0] not in HOP_BY_HOP],
                         b"x-forwarded-for: %s\r\nx-forwarded-prefix: %s\r\ncontent-length: %d\r\n\r\n"
                         % (self.peer, url[:end], len(body))])
        waiting = self.idle.get(address)
        if waiting:
            waiting.pop().send(self, head + body)
        else:
            asyncio.ensure_future(self._open(address, head + body))

    async def _open(self, address: tuple[str, int], data: bytes) -> None:
        _, replica = await asyncio.get_running_loop().create_connection(lambda: _Replica(address, self.idle), *address)
        replica.send(self, data)

    def answer(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        self.transport.write(b"".join([b"HTTP/1.1 %d \r\n" % status,
                                       *[b"%s: %s\r\n" % h for h in headers if h[0] not in HOP_BY_HOP],
                                       b"content-length: %d\r\n\r\n" % len(body), body]))

    def reply(self, status: int, text: bytes) -> None:
        self.transport.write(b"HTTP/1.1 %d \r\ncontent-length: %d\r\n\r\n%s" % (status, len(text), text))

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)


async def main(port: int, routes: dict[bytes, tuple[str, int]], tokens: set[bytes]) -> None:
    idle: dict = {}
    server = await asyncio.get_running_loop().create_server(lambda: _Caller(routes, tokens, idle), "127.0.0.1", port)
    await server.serve_forever()


if __name__ == "__main__":
    named = {}
    for arg in sys.argv[2:]:
        name, _, address = arg.partition("=")
        host, _, replica_port = address.rpartition(":")
        named[name.encode()] = (host, int(replica_port))
    token = os.environ["BENCH_TOKEN"].encode()
    uvloop.run(main(int(sys.argv[1]), named, {hashlib.sha256(b"Bearer " + token).digest()}))
