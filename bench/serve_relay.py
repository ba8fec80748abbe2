"""The floor of bench/serve.py: a byte relay on uvloop, the least any user-space hop between a caller and a
replica can be here. It parses nothing, authenticates nobody and counts nothing; each caller's connection gets
its own connection to the replica, and bytes pass both ways as they come.

    python bench/serve_relay.py PORT HOST:PORT
"""

import asyncio
import sys

import uvloop


class _Back(asyncio.Protocol):
    def __init__(self, front: asyncio.Transport) -> None:
        self.front = front

    def data_received(self, data: bytes) -> None:
        self.front.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.front.close()


class _Front(asyncio.Protocol):
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.early: list[bytes] = []  # what came before the connection to the replica opened
        self.back: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.opening = asyncio.ensure_future(self._open())

    async def _open(self) -> None:
        loop = asyncio.get_running_loop()
        back, _ = await loop.create_connection(lambda: _Back(self.transport), self.host, self.port)
        for data in self.early:
            back.write(data)
        self.back = back

    def data_received(self, data: bytes) -> None:
        if self.back is None:
            self.early.append(data)
        else:
            self.back.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.back is not None:
            self.back.close()


async def main(port: int, host: str, upstream: int) -> None:
    server = await asyncio.get_running_loop().create_server(lambda: _Front(host, upstream), "127.0.0.1", port)
    await server.serve_forever()


if __name__ == "__main__":
    target_host, _, target_port = sys.argv[2].rpartition(":")
    uvloop.run(main(int(sys.argv[1]), target_host, int(target_port)))
