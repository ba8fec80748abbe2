"""Where components come from: folders and URLs named in the server configuration, and a cache by digest.

Every component text the catalog hands out is also stored under ``<cache>/sha256/<digest>.yaml``
(the digest is the sha256 of the text, as KFP's ``componentRef.digest``), and each URL remembers the
digest it last served. So a component referenced by URL runs offline once it was fetched, and a
``digest:`` reference finds any component seen before.

Sources (``ServerSettings.component_catalog``):

- a local folder (or ``file://`` folder): every ``*.yaml``/``*.yml`` in it that is a component, found
  by its ``name``, by its file name, or, for ``x/component.yaml``, by its folder ``x``
- a URL of one component file (ends in ``.yaml``/``.yml``): found by its ``name``
- any other URL is a base: the name ``x`` is looked up as ``<base>/x.yaml``, then ``<base>/x/component.yaml``
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import yaml

from trainyard.errors import InvalidSpec
from trainyard.pipelines.fetch import Refused, get_text
from trainyard.pipelines.kfp_component import digest_of

log = logging.getLogger(__name__)
_DIGEST = re.compile(r"^(?:sha256:)?([0-9a-f]{64})$")


def invalid(field: str, message: str) -> InvalidSpec:
    return InvalidSpec(errors=[{"field": field, "line": None, "where": field, "message": message}])


def is_url(text: str) -> bool:
    return "://" in text


def catalog_key(name: str) -> str:
    """Names compare loosely: ``Add numbers``, ``add-numbers`` and ``add_numbers`` are one name."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


class Catalog:
    """Finds component texts by URL, digest or name. ``field`` in each method names the reference in errors."""

    def __init__(self, sources: list[str] | tuple[str, ...] = (), cache_dir: Path | str | None = None,
                 timeout: float = 10.0) -> None:
        from trainyard.config import home

        self.sources = list(sources)
        self.cache_dir = Path(cache_dir) if cache_dir else home() / "components"
        self.timeout = timeout
        self._folder_index: dict[str, list[tuple[str, str]]] | None = None

    @classmethod
    def from_settings(cls, settings: Any) -> "Catalog":
        return cls(getattr(settings, "component_catalog", None) or [], Path(settings.home) / "components")

    # -- the cache -------------------------------------------------------------------------------------

    def remember(self, text: str) -> str:
        digest = digest_of(text)
        path = self.cache_dir / "sha256" / f"{digest}.yaml"
        if not path.exists():
            _write_atomic(path, text)
        return digest

    def cached(self, digest: str) -> str | None:
        path = self.cache_dir / "sha256" / f"{digest}.yaml"
        return path.read_text() if path.exists() else None

    def _url_file(self, url: str) -> Path:
        return self.cache_dir / "urls" / hashlib.sha256(url.encode()).hexdigest()

    # -- lookups ---------------------------------------------------------------------------------------

    def by_digest(self, digest: str, field: str = "digest") -> tuple[str, str]:
        m = _DIGEST.match(digest.strip().lower())
        if not m:
            raise invalid(field, f"{digest!r}: expected a sha256 digest (64 hex digits, optionally 'sha256:')")
        hexd = m.group(1)
        if (text := self.cached(hexd)) is not None:
            return text, f"sha256:{hexd}"
        for entries in self._folders().values():
            for path, text in entries:
                if digest_of(text) == hexd:
                    self.remember(text)
                    return text, path
        raise invalid(field, f"no component with digest {hexd[:12]}… in the cache or the catalog folders")

    def by_url(self, url: str, field: str = "url", digest: str | None = None) -> tuple[str, str]:
        """Fetch ``url``; when that fails, the copy it served last time (or the one with ``digest``)."""
        m = _DIGEST.match(digest.strip().lower()) if digest else None
        want = m.group(1) if m else None
        if want and (text := self.cached(want)) is not None:
            return text, url
        try:
            text = self._fetch(url)
        except Refused as e:  # not this server's to fetch: no copy of an earlier fetch stands in for it
            raise invalid(field, f"cannot fetch {url}: {e}") from None
        except Exception as e:  # noqa: BLE001 - any failure to fetch falls back to the cache
            memo = self._url_file(url)
            if memo.exists() and (text := self.cached(memo.read_text().strip())) is not None:
                log.warning("cannot fetch %s (%s): using the cached copy", url, e)
                return text, url
            raise invalid(field, f"cannot fetch {url}: {e}; it is not in the component cache either") from None
        got = self.remember(text)
        if want and got != want:
            raise invalid(field, f"{url} has digest {got[:12]}…, not the {want[:12]}… the reference asks for")
        _write_atomic(self._url_file(url), got)
        return text, url

    def by_name(self, name: str, field: str = "name") -> tuple[str, str]:
        key = catalog_key(name)
        found = self._folders().get(key, [])
        if len(found) > 1:
            raise invalid(field, f"{name!r} is ambiguous in the catalog: {', '.join(p for p, _ in found)}")
        if found:
            path, text = found[0]
            self.remember(text)
            return text, path
        for src in self.sources:
            if not is_url(src) or src.startswith("file://"):
                continue
            if src.endswith((".yaml", ".yml")):
                try:
                    text, where = self.by_url(src, field)
                except InvalidSpec:
                    continue
                if catalog_key(str(_load(text).get("name", ""))) == key:
                    return text, where
                continue
            base = src.rstrip("/")
            for candidate in (f"{base}/{name}.yaml", f"{base}/{name}/component.yaml"):
                try:
                    return self.by_url(candidate, field)
                except InvalidSpec:
                    pass
        where = ", ".join(self.sources) or "none configured (server setting component_catalog)"
        raise invalid(field, f"no component named {name!r} in the catalog ({where})")

    # -- sources ---------------------------------------------------------------------------------------

    def trusted(self, location: str) -> bool:
        """Whether ``location`` (a URL, or a path on this server) is under a source the admin configured."""
        for src in self.sources:
            if is_url(src) and not src.startswith("file://"):
                if location == src or location.startswith(src.rstrip("/") + "/"):
                    return True
            elif not is_url(location):
                folder = os.path.realpath(src.removeprefix("file://"))
                if os.path.realpath(location).startswith(folder.rstrip("/") + "/"):
                    return True
        return False

    def _fetch(self, url: str) -> str:
        """The text at ``url``. A URL a user named (not under a configured source) is fetched over http(s) only and
        never from a private address (:mod:`.fetch`): this server's files, its store credentials and the networks
        it reaches are not the user's to read through a component (whose parse errors would quote what came back)."""
        if url.startswith(("http://", "https://")):
            return get_text(url, self.timeout, self.trusted)
        if not self.trusted(url):
            raise Refused("only http(s) URLs are fetched for a pipeline; file and store URLs only from the server's "
                          "component_catalog")
        import fsspec

        with fsspec.open(url, "rt", encoding="utf-8") as f:
            return f.read()

    def _folders(self) -> dict[str, list[tuple[str, str]]]:
        if self._folder_index is None:
            index: dict[str, list[tuple[str, str]]] = {}
            for src in self.sources:
                folder = Path(src.removeprefix("file://")) if not is_url(src) or src.startswith("file://") else None
                if folder is None or not folder.is_dir():
                    if folder is not None:
                        log.warning("component catalog folder %s does not exist", folder)
                    continue
                for path in sorted(folder.rglob("*.y*ml")):
                    _index_file(path, index)
            self._folder_index = index
        return self._folder_index


def _load(text: str) -> dict:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return {}
    return data if isinstance(data, dict) else {}


def _index_file(path: Path, index: dict[str, list[tuple[str, str]]]) -> None:
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError):
        return
    data = _load(text)
    if "implementation" not in data:
        return
    keys = {catalog_key(str(data.get("name", "")))}
    keys.add(catalog_key(path.parent.name if path.stem == "component" else path.stem))
    for key in keys - {""}:
        index.setdefault(key, []).append((str(path), text))


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)
