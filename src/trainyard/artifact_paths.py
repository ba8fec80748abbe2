"""What an artifact path may be: a relative posix path that stays inside its folder.

Paths come from launchers (and so, indirectly, from jobs) and from URLs of
users asking for a file; both are joined to a base URL, where ``..`` or an
absolute path would reach any file the server can read. So a path is refused,
not repaired, unless it is already in its one normal form.
"""

from __future__ import annotations

import posixpath
from urllib.parse import unquote, urlsplit

MAX_LENGTH = 4096


def check_artifact_path(path: object) -> str:
    """``path`` itself when it is a safe relative path; ``ValueError`` saying why otherwise."""
    if not isinstance(path, str) or not path:
        raise ValueError("must be a non-empty string")
    if len(path) > MAX_LENGTH:
        raise ValueError(f"is longer than {MAX_LENGTH} characters")
    if "\x00" in path or "\\" in path:
        raise ValueError("must not contain NUL or backslashes")
    if path.startswith("/"):
        raise ValueError("must be relative, not absolute")
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise ValueError("must not have empty, '.' or '..' parts")
    return path


def check_sub_path(sub: str) -> str:
    """``sub`` itself when it is "" or a path inside an artifact as written after a pipeline step's reference
    (``/shard/0``); ``ValueError`` saying why otherwise: it is appended to the artifact's URL, where ``/..``
    would reach any other job's artifacts in the store."""
    if sub:
        if not sub.startswith("/"):
            raise ValueError("must start with '/'")
        if sub.startswith("//"):
            raise ValueError("must not have empty, '.' or '..' parts")
        check_artifact_path(sub[1:])
    return sub


def is_artifact_path(path: object) -> bool:
    try:
        check_artifact_path(path)
    except ValueError:
        return False
    return True


def output_record_problem(item: object) -> tuple[str, str] | None:
    """``(field, why)`` when an uploaded file's record ``{"path", "size", "digest"}`` is not usable."""
    if not isinstance(item, dict):
        return "", "must be an object with path, size and digest"
    try:
        check_artifact_path(item.get("path"))
    except ValueError as e:
        return "path", str(e)
    size = item.get("size")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        return "size", "must be a non-negative integer"
    digest = item.get("digest")
    if not isinstance(digest, str) or not digest or len(digest) > 80:
        return "digest", "must be a string of at most 80 characters"
    return None


# fsspec's several names of one store
URL_ALIASES = {"s3a": "s3", "gcs": "gs", "abfss": "abfs", "az": "abfs", "local": "file"}


def plain_url(url: str) -> str:
    """``url`` spelt one way: protocol aliases, ``file://`` as a path, no ``.``, ``..`` or doubled slashes; a path
    relative to a work dir is in no store (""). Whether one URL lies under another is asked of these.

    A ``file://`` URL is decoded first, as the launcher and the artifact store read it (``launch.files.local_path``,
    ``transfer.open_fs``): the default store of a home with a space is ``file:///home/a%20b/…``, the same folder as
    the path ``/home/a b/…``, and an encoded ``%2e%2e`` climbs out of a folder once read."""
    protocol, sep, rest = url.partition("://")
    if not sep:
        if not url.startswith("/"):
            return ""
        protocol, rest = "file", url
    protocol = URL_ALIASES.get(protocol.lower(), protocol.lower())
    if sep and protocol == "file":
        rest = unquote(urlsplit(url).path)
    return f"{protocol}://{posixpath.normpath('/' + rest).lstrip('/')}"


def under_url(url: str, base: str) -> str | None:
    """The key of ``url`` below ``base`` ("" for ``base`` itself), or None when it is not there, however spelt."""
    found, top = plain_url(url), plain_url(base)
    if not top or (found != top and not found.startswith(top + "/")):
        return None
    return found[len(top) + 1:]
