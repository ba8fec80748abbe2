"""Relaying one WebSocket's messages both ways: an ASGI side (a caller, through uvicorn) and a ``websockets``
client side (the far end), until either closes, its close code passed on to the other. Used by the server's
``/serve/`` and dashboard proxies and by ``trainyard cluster dashboard``'s local port.

ASGI hands over whole messages, so one message is what a relay holds at a time.
"""

from __future__ import annotations

import asyncio
from typing import Any

from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed
from websockets.frames import EXTERNAL_CLOSE_CODES, CloseCode


async def relay(receive: Any, send: Any, far: ClientConnection) -> None:
    """Messages both ways until one side closes; its close code goes to the other."""
    async def from_caller() -> bool:
        """True once the caller closed; False when the far end's side closed first."""
        try:
            while True:
                message = await receive()
                if message["type"] == "websocket.receive":
                    text = message.get("text")
                    await far.send(text if text is not None else message.get("bytes") or b"")
                elif message["type"] == "websocket.disconnect":
                    code = message.get("code", CloseCode.NORMAL_CLOSURE)
                    # a caller gone without a close frame (1006): the far end hears that it went away
                    await far.close(_sendable(code, gone=CloseCode.GOING_AWAY), message.get("reason") or "")
                    return True
        except ConnectionClosed:
            return False

    async def from_far() -> None:
        try:
            async for data in far:
                await send({"type": "websocket.send", "text": data} if isinstance(data, str)
                           else {"type": "websocket.send", "bytes": data})
        except ConnectionClosed:
            pass
        except OSError:  # the caller is gone (uvicorn's ClientDisconnected): its side is closing already
            return
        # the far end's connection broke without a close frame (1006): a bad gateway, as the caller sees it
        await send({"type": "websocket.close", "code": _sendable(far.close_code, gone=CloseCode.BAD_GATEWAY),
                    "reason": far.close_reason or ""})

    caller_side, far_side = asyncio.ensure_future(from_caller()), asyncio.ensure_future(from_far())
    tasks = [caller_side, far_side]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        if caller_side.done() and not caller_side.result():  # the far end closed: its code goes to the caller
            await far_side
        if far_side.done():
            far_side.result()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _sendable(code: int | None, gone: int) -> int:
    """A close code one may send: 1005 (none given) becomes 1000, 1006 (no close frame) and others ``gone``."""
    if code is None or code == CloseCode.ABNORMAL_CLOSURE:
        return gone
    if code == CloseCode.NO_STATUS_RCVD:
        return CloseCode.NORMAL_CLOSURE
    return code if code in EXTERNAL_CLOSE_CODES or 3000 <= code < 5000 else gone
