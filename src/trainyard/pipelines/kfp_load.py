"""Finding a component: inlined by the client, a URL, a digest, a catalog name, or a graph task's ``componentRef``."""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trainyard.pipelines.catalog import Catalog, invalid, is_url
from trainyard.pipelines.kfp_component import Component, ComponentRef, component_from_data, parse_component
from trainyard.spec.lines import MAX_VALUES

_DIGEST_REF = re.compile(r"^(sha256:)?[0-9a-f]{64}$")


@dataclass
class Context:
    catalog: Catalog
    params: dict[str, Any]
    files: dict[str, str] = field(default_factory=dict)  # local component files the client inlined, by path
    depth: int = 0
    step: str = ""  # the pipeline's step being expanded: what a bound on the whole expansion names
    # values of every component text read for one step, shared by the graph's nested contexts: each text is
    # bounded on its own, but a graph may name one text (an alias) from many tasks on many levels
    values: list[int] = field(default_factory=lambda: [0])
    steps: list[int] = field(default_factory=lambda: [0])  # plain steps made so far, shared likewise
    made: list[int] = field(default_factory=lambda: [0])  # characters of their commands made so far, likewise
    # whether the server may run a component's image: with --container-runtime none every step runs on the host,
    # as its owner chose, and a warning on each image would tell them only that
    images: bool = True


def _parse(ctx: Context, text: str, source: str, where: str) -> Component:
    comp = parse_component(text, source)
    ctx.values[0] += len(comp.lines)
    if ctx.values[0] > MAX_VALUES:
        raise invalid(where, f"the component and those its graph uses hold more than {MAX_VALUES} values together")
    return comp


def load(value: Any, ctx: Context, where: str) -> Component:
    """A step's ``component:`` value: inlined by the client, a URL, a digest, a name, or a componentRef."""
    if isinstance(value, dict) and "inline" in value:
        ctx.files.update(value.get("files") or {})
        text, source = str(value["inline"]), str(value.get("source") or "<inline>")
        ctx.catalog.remember(text)
        return _parse(ctx, text, source, where)
    if isinstance(value, dict):
        try:
            ref = ComponentRef.model_validate(value)
        except ValidationError as e:
            raise invalid(where, "; ".join(err["msg"] for err in e.errors())) from None
        return load_ref(ref, None, ctx, where)
    if not isinstance(value, str) or not value.strip():
        raise invalid(where, "expected a path, a URL, a digest or a catalog name")
    if is_url(value):
        return _parse(ctx, *ctx.catalog.by_url(value, where), where)
    if _DIGEST_REF.match(value.lower()):
        return _parse(ctx, *ctx.catalog.by_digest(value, where), where)
    return _parse(ctx, *ctx.catalog.by_name(value, where), where)


def load_ref(ref: ComponentRef, parent: str | None, ctx: Context, where: str) -> Component:
    """A ``componentRef``: inline ``spec``, ``url`` (relative to the parent component), ``digest`` or ``name``."""
    if ref.spec is not None:
        source = f"{parent or '<inline>'} ({where}.spec)"
        if isinstance(ref.spec, str):  # read as inline: is, with its budget: anchors could repeat it without end
            return _parse(ctx, ref.spec, source, f"{where}.spec")
        # data already read (and bounded) with the text it sits in; its text as JSON (which YAML reads), as
        # yaml.safe_dump takes a graph's every level seconds: the whole subtree again on each
        return component_from_data(ref.spec, source, json.dumps(ref.spec, default=str))
    if ref.url:
        url = ref.url
        if not is_url(url) and parent and not posixpath.isabs(url):
            url = _join(parent, url)
        if is_url(url):
            return _parse(ctx, *ctx.catalog.by_url(url, f"{where}.url", digest=ref.digest), f"{where}.url")
        if url in ctx.files:
            return _parse(ctx, ctx.files[url], url, f"{where}.url")
        if ctx.catalog.trusted(url) and Path(url).is_file():  # a graph's task beside it in a catalog folder
            return _parse(ctx, Path(url).read_text(), url, f"{where}.url")
        raise invalid(f"{where}.url", f"component file {ref.url!r} not found (looked for {url})")
    if ref.digest:
        return _parse(ctx, *ctx.catalog.by_digest(ref.digest, f"{where}.digest"), f"{where}.digest")
    return _parse(ctx, *ctx.catalog.by_name(str(ref.name), f"{where}.name"), f"{where}.name")


def _join(parent: str, rel: str) -> str:
    if is_url(parent):
        from urllib.parse import urljoin

        return urljoin(parent, rel)
    return posixpath.normpath(posixpath.join(posixpath.dirname(parent), rel))
