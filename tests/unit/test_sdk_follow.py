"""The SDK's log follow against a scripted event stream (httpx MockTransport): framing edge cases."""

import httpx

from trainyard.sdk.client import Client

CHUNK = '{"attempt":1,"replica":0,"offset":%d,"data":"%s"}'


def stream(body: str) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.params["follow"] == "true"
        return httpx.Response(200, headers={"Content-Type": "text/event-stream"}, content=body.encode())
    return httpx.MockTransport(handler)


def test_a_keep_alive_after_a_chunk_is_not_an_event():
    # what sse-starlette sends while a job is quiet: a comment, then the blank line that ends a frame
    body = ("id: 1\ndata: " + CHUNK % (0, "one\\n") + "\n\n"
            ": keep-alive\n\n"
            "id: 2\ndata: " + CHUNK % (4, "two\\n") + "\n\n"
            ": keep-alive\n\n"
            'event: end\ndata: {"status": "succeeded"}\n\n')
    client = Client(transport=stream(body))
    assert [c.data for c in client.logs("j-1", follow=True)] == ["one\n", "two\n"]
