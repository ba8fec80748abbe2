"""A component step (``component:`` + ``arguments:``) expanded into plain pipeline steps."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from trainyard.pipelines.catalog import Catalog, invalid, is_url
from trainyard.pipelines.kfp_component import Component, ComponentRef, component_from_data, parse_component, safe_name
from trainyard.pipelines.kfp_placeholders import Binding, Resolver, bind, render
from trainyard.pipelines.special import Expansion

MAX_DEPTH = 8
_DIGEST_REF = re.compile(r"^(sha256:)?[0-9a-f]{64}$")
NOT_ON_COMPONENT = {"command": "the component's container gives the command",
                    "inputs": "a component step gets its inputs from arguments",
                    "outputs": "a component's outputs are declared in the component", "foreach": None}


@dataclass
class Context:
    catalog: Catalog
    params: dict[str, Any]
    files: dict[str, str] = field(default_factory=dict)  # local component files the client inlined, by path
    depth: int = 0


def expand_component_step(name: str, raw: dict[str, Any], catalog: Catalog, params: dict[str, Any]) -> Expansion:
    ctx = Context(catalog, params)
    comp = load(raw["component"], ctx, f"steps.{name}.component")
    arguments = raw.get("arguments") or {}
    if not isinstance(arguments, dict):
        raise invalid(f"steps.{name}.arguments", "expected a mapping of input name to value")
    extras = {k: v for k, v in raw.items() if k not in ("component", "arguments")}
    for key, why in NOT_ON_COMPONENT.items():
        if key in extras and why:
            raise invalid(f"steps.{name}.{key}", f"not allowed on a component step: {why}")
    return expand_component(name, comp, arguments, extras, ctx, f"steps.{name}.arguments")


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
        if Path(url).is_file():
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


def bindings(comp: Component, arguments: dict[str, Any], where: str) -> dict[str, Binding]:
    """Each input's binding; unknown arguments and missing required ones are errors naming the field."""
    by_key = {safe_name(n): n for n in comp.inputs}
    given: dict[str, Any] = {}
    for key, value in arguments.items():
        name = key if key in comp.inputs else by_key.get(safe_name(str(key)))
        if name is None:
            known = ", ".join(comp.inputs) or "none"
            raise invalid(f"{where}.{key}", f"unknown argument: component {comp.spec.name!r} ({comp.source}) "
                                             f"has inputs: {known}")
        given[name] = value
    out: dict[str, Binding] = {}
    for name, spec in comp.inputs.items():
        if name in given:
            out[name] = bind(given[name])
        elif spec.default is not None:
            out[name] = Binding("literal", render(spec.default))
        elif spec.optional:
            out[name] = Binding("absent")
        else:
            raise invalid(f"{where}.{name}", f"field required: component {comp.spec.name!r} ({comp.source}) "
                                              f"needs input {name!r}")
    return out


def expand_component(step: str, comp: Component, arguments: dict[str, Any], extras: dict[str, Any],
                     ctx: Context, where: str) -> Expansion:
    bound = bindings(comp, arguments, where)
    impl = comp.spec.implementation
    if impl.graph is not None:
        from trainyard.pipelines.kfp_graph import expand_graph

        if "foreach" in extras:  # each task would fan out on its own, and their wiring would not follow
            raise invalid(f"{where.rsplit('.', 1)[0]}.foreach",
                          "not allowed on a graph component: fan out a container component, or a step that uses the graph's output")

        if ctx.depth >= MAX_DEPTH:
            raise comp.error(("implementation", "graph"), f"graph components nest deeper than {MAX_DEPTH}: a cycle?")
        return expand_graph(step, comp, bound, extras, ctx)
    container = impl.container
    assert container is not None
    t = Resolver(comp, bound, ctx.params, step).translate()
    plain = {**extras, "command": t.command(), "inputs": t.inputs, "outputs": t.outputs}
    if container.env:
        plain["env_vars"] = {**container.env, **(extras.get("env_vars") or {})}
    warnings = [f"component image {container.image!r} not runnable here: runs on the host in the step's env"]
    for name in comp.outputs:
        if safe_name(name) not in t.outputs:
            warnings.append(f"output {name!r} of component {comp.spec.name!r} has no outputPath "
                            f"in the command, so nothing writes it")
    return Expansion({step: plain}, {o: f"{step}.{o}" for o in t.outputs}, warnings)
