"""Finding a component: inlined by the client, a URL, a digest, a catalog name, or a graph task's ``componentRef``."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from trainyard.pipelines.catalog import Catalog, invalid, is_url
from trainyard.pipelines.kfp_component import Component, ComponentRef, component_from_data, parse_component

_DIGEST_REF = re.compile(r"^(sha256:)?[0-9a-f]{64}$")


@dataclass
class Context:
    catalog: Catalog
    params: dict[str, Any]
    files: dict[str, str] = field(default_factory=dict)  # local component files the client inlined, by path
    depth: int = 0


def load(value: Any, ctx: Context, where: str) -> Component:
    """A step's ``component:`` value: inlined by the client, a URL, a digest, a name, or a componentRef."""
    if isinstance(value, dict) and "inline" in value:
        ctx.files.update(value.get("files") or {})
        text, source = str(value["inline"]), str(value.get("source") or "<inline>")
        ctx.catalog.remember(text)
        return parse_component(text, source)
    if isinstance(value, dict):
        try:
            ref = ComponentRef.model_validate(value)
        except ValidationError as e:
            raise invalid(where, "; ".join(err["msg"] for err in e.errors())) from None
        return load_ref(ref, None, ctx, where)
    if not isinstance(value, str) or not value.strip():
        raise invalid(where, "expected a path, a URL, a digest or a catalog name")
    if is_url(value):
        return parse_component(*ctx.catalog.by_url(value, where))
    if _DIGEST_REF.match(value.lower()):
        return parse_component(*ctx.catalog.by_digest(value, where))
    return parse_component(*ctx.catalog.by_name(value, where))


def load_ref(ref: ComponentRef, parent: str | None, ctx: Context, where: str) -> Component:
    """A ``componentRef``: inline ``spec``, ``url`` (relative to the parent component), ``digest`` or ``name``."""
    if ref.spec is not None:
        text = ref.spec if isinstance(ref.spec, str) else yaml.safe_dump(ref.spec, sort_keys=False)
        data = yaml.safe_load(text) if isinstance(ref.spec, str) else ref.spec
        return component_from_data(data, f"{parent or '<inline>'} ({where}.spec)", text)
    if ref.url:
        url = ref.url
        if not is_url(url) and parent and not posixpath.isabs(url):
            url = _join(parent, url)
        if is_url(url):
            return parse_component(*ctx.catalog.by_url(url, f"{where}.url", digest=ref.digest))
        if url in ctx.files:
            return parse_component(ctx.files[url], url)
        if ctx.catalog.trusted(url) and Path(url).is_file():  # a graph's task beside it in a catalog folder
            return parse_component(Path(url).read_text(), url)
        raise invalid(f"{where}.url", f"component file {ref.url!r} not found (looked for {url})")
    if ref.digest:
        return parse_component(*ctx.catalog.by_digest(ref.digest, f"{where}.digest"))
    return parse_component(*ctx.catalog.by_name(str(ref.name), f"{where}.name"))


def _join(parent: str, rel: str) -> str:
    if is_url(parent):
        from urllib.parse import urljoin

        return urljoin(parent, rel)
    return posixpath.normpath(posixpath.join(posixpath.dirname(parent), rel))
