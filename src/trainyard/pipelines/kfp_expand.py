"""A component step (``component:`` + ``arguments:``) expanded into plain pipeline steps."""

from __future__ import annotations

from typing import Any

from trainyard.pipelines.catalog import Catalog, invalid
from trainyard.pipelines.expansion import Expansion
from trainyard.pipelines.kfp_component import Component, safe_name
from trainyard.pipelines.kfp_graph import expand_graph
from trainyard.pipelines.kfp_load import Context, load
from trainyard.pipelines.kfp_placeholders import Binding, Resolver, bind, render
from trainyard.spec.pipeline import MAX_STEP_JOBS

MAX_DEPTH = 8
NOT_ON_COMPONENT = {"command": "the component's container gives the command",
                    "inputs": "a component step gets its inputs from arguments",
                    "outputs": "a component's outputs are declared in the component", "foreach": None}


def expand_component_step(name: str, raw: dict[str, Any], catalog: Catalog, params: dict[str, Any],
                          images: bool = True) -> Expansion:
    """``images``: whether the server has a container runtime to run the component's image in."""
    ctx = Context(catalog, params, step=name, images=images)
    comp = load(raw["component"], ctx, f"steps.{name}.component")
    arguments = raw.get("arguments") or {}
    if not isinstance(arguments, dict):
        raise invalid(f"steps.{name}.arguments", "expected a mapping of input name to value")
    extras = {k: v for k, v in raw.items() if k not in ("component", "arguments")}
    for key, why in NOT_ON_COMPONENT.items():
        if key in extras and why:
            raise invalid(f"steps.{name}.{key}", f"not allowed on a component step: {why}")
    return expand_component(name, comp, arguments, extras, ctx, f"steps.{name}.arguments")


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
        if "foreach" in extras:  # each task would fan out on its own, and their wiring would not follow
            raise invalid(f"{where.rsplit('.', 1)[0]}.foreach",
                          "not allowed on a graph component: fan out a container component, or a step that uses the graph's output")

        if ctx.depth >= MAX_DEPTH:
            raise comp.error(("implementation", "graph"), f"graph components nest deeper than {MAX_DEPTH}: a cycle?")
        return expand_graph(step, comp, bound, extras, ctx, expand_component)
    container = impl.container
    assert container is not None
    ctx.steps[0] += 1
    if ctx.steps[0] > MAX_STEP_JOBS:  # counted as they are made: W tasks nested 8 deep are W**8 of them
        raise invalid(f"steps.{ctx.step}", f"expands to more than {MAX_STEP_JOBS} steps: a run makes at most "
                                           f"{MAX_STEP_JOBS} step jobs")
    t = Resolver(comp, bound, ctx.params, step, ctx.made).translate()
    plain = {**extras, "command": t.command(), "inputs": t.inputs, "outputs": t.outputs}
    if container.env:
        plain["env_vars"] = {**container.env, **(extras.get("env_vars") or {})}
    if "env" not in extras:  # a step that names its own env runs on the host in it, as before
        plain["image"] = container.image
        plain["image_fallback"] = "fresh-venv"
    warnings = [] if not ctx.images else [
        f"component image {container.image!r}: runs in it where a container runtime is (podman, "
        f"docker), else on the host in a fresh virtualenv"] if "env" not in extras else [
        f"component image {container.image!r} not used: the step's env runs on the host"]
    for name in comp.outputs:
        if safe_name(name) not in t.outputs:
            warnings.append(f"output {name!r} of component {comp.spec.name!r} has no outputPath "
                            f"in the command, so nothing writes it")
    return Expansion({step: plain}, {o: f"{step}.{o}" for o in t.outputs}, warnings)
