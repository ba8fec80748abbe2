"""Which URLs a job's ``inputs`` may name. The launcher, which may be root, fetches a URL input into a cache every
job on the node reads; a local file it is given by path or ``file://`` is read in place, by the job's own account.
So no form may make the launcher read a local file for the job: fsspec's chains (``simplecache::file://…``), its
``local://`` and its archive and cache wrappers are refused, and only remote stores' protocols are fetched."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, ValidationInfo

from trainyard.spec.submitted import submitting

MAX_URL = 4096
# fetched by the launcher: object stores, HTTP, Hugging Face; memory:// is a process's own (tests' artifact stores)
REMOTE = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "http", "https", "hf", "hdfs", "webhdfs",
                    "memory"})
REFS = frozenset({"file", "job", "artifact", "pipeline"})  # read in place, or refs the server resolves first


def check_input_url(url: str, info: ValidationInfo) -> str:
    """``url`` if it is a path or a URL of a protocol in REMOTE or REFS; ValueError saying why not (at submit: a
    spec stored before this check loads as it was, spec.submitted)."""
    if submitting(info) and (why := why_not(url)) is not None:
        raise ValueError(why)
    return url


def why_not(url: str) -> str | None:
    """What is wrong with ``url`` as an input, or None."""
    if not url or len(url) > MAX_URL or any(ord(c) < 32 or c == "\x7f" for c in url):
        return f"a path or URL of 1 to {MAX_URL} printable characters"
    if "::" in url:
        return f"{url[:100]!r} is a chain of URLs, which is not taken: give a path, or the URL of a remote store"
    protocol, sep, _ = url.partition("://")
    if sep and protocol.lower() not in REMOTE | REFS:
        return (f"{protocol}:// is not taken: give a path, file://, or a remote store's URL "
                f"({', '.join(sorted(REMOTE - {'memory'}))})")
    return None


InputUrl = Annotated[str, AfterValidator(check_input_url)]
