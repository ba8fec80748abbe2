"""A client shown in a notebook names its server and never its token (notebook outputs get shared)."""

from trainyard.sdk.client import Client


def test_a_client_shows_its_server_and_not_its_token():
    c = Client("http://127.0.0.1:9/", token="ty-secret-never-shown")
    try:
        assert repr(c) == "<trainyard.Client http://127.0.0.1:9>"
        assert "ty-secret" not in repr(c) + str(c)
    finally:
        c.close()
