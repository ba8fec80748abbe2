"""Which inputs name trainyard's artifact store, however spelt, and what is asked of their keys."""

import pytest

from trainyard.errors import InvalidSpec
from trainyard.services.store_inputs import check

STORE = "s3://bucket/trainyard"


@pytest.mark.parametrize("url, key", [
    ("s3://bucket/trainyard/snapshots/x.tar.gz", "snapshots/x.tar.gz"),
    ("s3a://bucket/trainyard/jobs/j-1/1/outputs", "jobs/j-1/1/outputs"),
    ("S3://bucket//trainyard///jobs/j-1/1/outputs/", "jobs/j-1/1/outputs"),
    ("s3://bucket/other/../trainyard/./values/sha256-1", "values/sha256-1"),
])
def test_every_spelling_of_a_store_url_is_asked_about_by_its_key(url, key):
    asked = []
    with pytest.raises(InvalidSpec) as e:
        check({"data": url}, STORE, lambda k: asked.append(k) or False)
    assert asked == [key] and e.value.errors[0]["field"] == "inputs.data"


def test_urls_beside_the_store_are_not_its_business():
    for url in ("s3://bucket/trainyard-other/jobs/j-1/1/outputs", "s3://other/trainyard/x", "gs://bucket/trainyard/x",
                "/data/x", "rel/trainyard/x", "https://bucket/trainyard/x"):
        check({"data": url}, STORE, lambda k: pytest.fail(f"asked about {k} for {url}"))


def test_azure_and_local_stores_are_matched_by_their_other_names():
    with pytest.raises(InvalidSpec):
        check({"d": "az://c/t/snapshots/x"}, "abfs://c/t", lambda k: False)
    with pytest.raises(InvalidSpec):
        check({"d": "/home/artifacts/snapshots/x"}, "file:///home/artifacts", lambda k: False)
    check({"d": "local:///home/artifacts/jobs/j-1/1/outputs"}, "file:///home/artifacts", lambda k: True)


@pytest.mark.parametrize("url, key", [
    ("/home/a b/artifacts/jobs/j-1/1/outputs", "jobs/j-1/1/outputs"),  # the path the encoded URL names
    ("file:///home/a%20b/artifacts/jobs/j-2/1/outputs/%2E%2E/%2e%2e/%2e%2e/j-1/1/outputs", "jobs/j-1/1/outputs"),
    ("local:///home/a%20b/artifacts/snapshots/x", "snapshots/x"),
])
def test_a_local_store_url_is_asked_about_as_the_launcher_decodes_it(url, key):
    asked = []
    with pytest.raises(InvalidSpec):
        check({"d": url}, "file:///home/a%20b/artifacts", lambda k: asked.append(k) or False)
    assert asked == [key]
