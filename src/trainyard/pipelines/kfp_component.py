"""A Kubeflow Pipelines v1 ``component.yaml``, parsed and checked, with errors naming the field and line.

What is read (anything else is refused by name, never ignored):

- ``name``, ``description``, ``metadata``, ``version``
- ``inputs`` / ``outputs``: ``name``, ``type``, ``description``, ``annotations``; inputs also
  ``default`` and ``optional``
- ``implementation.container``: ``image``, ``command``, ``args``, ``env``, with the v1 placeholders
  (``inputValue``, ``inputPath``, ``outputPath``, ``concat``, ``if``/``isPresent``) and the v2 ones
  inside strings (``{{$.inputs.parameters['x']}}``, ``{{$.inputs.artifacts['x'].path}}``,
  ``{{$.outputs.artifacts['y'].path}}``, ``{{$.outputs.parameters['y'].output_file}}``)
- ``implementation.graph``: ``tasks`` (``componentRef``, ``arguments``) and ``outputValues``
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from trainyard.errors import InvalidSpec
from trainyard.spec.lines import Path_, compose, error_entry, line_for, validation_errors

V2 = re.compile(r"\{\{\$\.(inputs|outputs)\.(parameters|artifacts)\['([^']+)'\](?:\.([A-Za-z_]+))?\}\}")
V2_ANY = re.compile(r"\{\{\$[^}]*\}\}")
PLACEHOLDERS = ("inputValue", "inputPath", "outputPath", "concat", "if")
UNSUPPORTED = {"inputUri": "artifact URIs", "outputUri": "artifact URIs", "executorInput": "the v2 executor input",
               "inputMetadata": "artifact metadata", "outputMetadata": "artifact metadata"}
Scalar = Union[str, int, float, bool]
# arguments and placeholders (concat parts, if branches, v2 placeholders) of one container's command and args: far
# past any real component, and what bounds the walks over them, whose input may repeat one node by YAML aliases
MAX_NODES = 10_000


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class InputSpec(_Strict):
    name: str
    type: Any = None
    description: str | None = None
    default: Any = None
    optional: bool = False
    annotations: dict[str, Any] = Field(default_factory=dict)


class OutputSpec(_Strict):
    name: str
    type: Any = None
    description: str | None = None
    annotations: dict[str, Any] = Field(default_factory=dict)


class ContainerSpec(_Strict):
    image: str
    command: list[Any] = Field(default_factory=list)
    args: list[Any] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _argv(self) -> "ContainerSpec":
        if not self.command and not self.args:
            raise ValueError("give command (and args): the image's entrypoint is unknown outside the image")
        return self


class ComponentRef(_Strict):
    name: str | None = None
    digest: str | None = None
    tag: str | None = None
    url: str | None = None
    spec: Any = None

    @model_validator(mode="after")
    def _some(self) -> "ComponentRef":
        if not (self.name or self.digest or self.url or self.spec):
            raise ValueError("give one of url, digest, name or spec")
        return self


class TaskSpec(_Strict):
    componentRef: ComponentRef  # noqa: N815 (KFP's spelling)
    arguments: dict[str, Any] = Field(default_factory=dict)
    annotations: dict[str, Any] = Field(default_factory=dict)


class GraphSpec(_Strict):
    tasks: dict[str, TaskSpec]
    outputValues: dict[str, Any] = Field(default_factory=dict)  # noqa: N815

    @field_validator("tasks")
    @classmethod
    def _tasks(cls, v: dict) -> dict:
        if not v:
            raise ValueError("a graph needs at least one task")
        return v


class Implementation(_Strict):
    container: ContainerSpec | None = None
    graph: GraphSpec | None = None

    @model_validator(mode="after")
    def _one(self) -> "Implementation":
        if (self.container is None) == (self.graph is None):
            raise ValueError("give exactly one of container or graph")
        return self


class ComponentSpec(_Strict):
    name: str = "component"
    description: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    version: str | None = None
    inputs: list[InputSpec] = Field(default_factory=list)
    outputs: list[OutputSpec] = Field(default_factory=list)
    implementation: Implementation


@dataclass
class Component:
    """A parsed component: the spec, where it came from, and the line of every field (for messages)."""

    spec: ComponentSpec
    source: str
    text: str
    lines: dict[Path_, int] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        return digest_of(self.text)

    @property
    def inputs(self) -> dict[str, InputSpec]:
        return {i.name: i for i in self.spec.inputs}

    @property
    def outputs(self) -> dict[str, OutputSpec]:
        return {o.name: o for o in self.spec.outputs}

    def error(self, path: Path_, message: str) -> InvalidSpec:
        return InvalidSpec(errors=[self.entry(path, message)])

    def entry(self, path: Path_, message: str) -> dict[str, Any]:
        return error_entry(self.source, line_for(path, self.lines), dotted(path), message)


def digest_of(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def dotted(path: Path_) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def parse_component(text: str, source: str = "<component>") -> Component:
    """A component from its YAML text, read as a spec is (:func:`compose`): bounded, each field's line known."""
    data, lines = compose(text, source)
    if not isinstance(data, dict):
        raise InvalidSpec(errors=[error_entry(source, 1, "", "expected a KFP component (a mapping with implementation)")])
    return component_from_data(data, source, text, lines)


def component_from_data(data: Any, source: str, text: str, lines: dict[Path_, int] | None = None) -> Component:
    lines = lines or {}
    try:
        spec = ComponentSpec.model_validate(data)
    except ValidationError as e:
        raise InvalidSpec(errors=validation_errors(e, lines, source)) from None
    comp = Component(spec, source, text, lines)
    _check_names(comp)
    if spec.implementation.container is not None:
        problems: list[dict[str, Any]] = []
        nodes = [0]
        for key in ("command", "args"):
            for i, item in enumerate(getattr(spec.implementation.container, key)):
                _check_placeholder(comp, item, ("implementation", "container", key, i), problems, nodes)
        if problems:
            raise InvalidSpec(errors=problems)
    return comp


def _check_names(comp: Component) -> None:
    for kind, items in (("inputs", comp.spec.inputs), ("outputs", comp.spec.outputs)):
        seen: dict[str, str] = {}
        for i, item in enumerate(items):
            key = safe_name(item.name)
            if not key:
                raise comp.error((kind, i, "name"), f"{item.name!r}: a name needs a letter or digit")
            if key in seen:
                raise comp.error((kind, i, "name"), f"{item.name!r} clashes with {seen[key]!r} (both read as {key!r})")
            seen[key] = item.name


def safe_name(name: str) -> str:
    """A KFP name (``Training data``) as trainyard writes it in ``{{inputs.x}}``: ``training_data``."""
    out = re.sub(r"[^a-z0-9]+", "_", str(name).lower()).strip("_")
    return f"_{out}" if out[:1].isdigit() else out


def _check_placeholder(comp: Component, item: Any, path: Path_, problems: list[dict[str, Any]],
                       nodes: list[int]) -> None:
    """Each placeholder in ``item`` checked; ``nodes`` counts what the component's command holds so far."""
    nodes[0] += 1 + (len(V2_ANY.findall(item)) if isinstance(item, str) else 0)
    if nodes[0] > MAX_NODES:  # raised at once: what follows would only repeat the walk
        raise comp.error(path, f"command and args hold more than {MAX_NODES} arguments and placeholders "
                               f"(concat parts, if branches and v2 placeholders counted): not a component's command")

    def bad(where: Path_, message: str) -> None:
        problems.append(comp.entry(where, message))

    def need(kind: str, name: Any, where: Path_) -> None:
        names = comp.inputs if kind == "input" else comp.outputs
        if not isinstance(name, str):
            bad(where, f"expected the name of an {kind}")
        elif name not in names:
            known = ", ".join(names) or "none declared"
            bad(where, f"unknown {kind} {name!r} ({kind}s: {known})")

    if isinstance(item, bool) or item is None:
        bad(path, f"{item!r} is not a command-line argument; quote it")
    elif isinstance(item, str):
        for m in V2_ANY.finditer(item):
            v2 = V2.fullmatch(m.group(0))
            if not v2:
                bad(path, f"unknown placeholder {m.group(0)}")
                continue
            side, kind, name, attr = v2.groups()
            ok = {("inputs", "parameters"): None, ("inputs", "artifacts"): "path",
                  ("outputs", "artifacts"): "path", ("outputs", "parameters"): "output_file"}[(side, kind)]
            if attr != ok:
                bad(path, f"{m.group(0)}: not supported (use {_v2_form(side, kind, name, ok)})")
            need(side[:-1], name, path)
    elif isinstance(item, dict):
        if len(item) != 1:
            bad(path, f"a placeholder has exactly one key, one of {', '.join(PLACEHOLDERS)}")
            return
        (key, value), = item.items()
        where = path + (key,)
        if key in ("inputValue", "inputPath"):
            need("input", value, where)
        elif key == "outputPath":
            need("output", value, where)
        elif key == "concat":
            if not isinstance(value, list):
                bad(where, "expected a list of arguments to join")
            else:
                for i, part in enumerate(value):
                    _check_placeholder(comp, part, where + (i,), problems, nodes)
        elif key == "if":
            _check_if(comp, value, where, problems, nodes, need, bad)
        elif key in UNSUPPORTED:
            bad(where, f"{key}: {UNSUPPORTED[key]} are not supported by trainyard (use inputPath/outputPath)")
        else:
            bad(where, f"unknown placeholder {key!r}; use one of {', '.join(PLACEHOLDERS)}")
    elif not isinstance(item, (int, float)):
        bad(path, "expected a string, a number or a placeholder")


def _check_if(comp, value, where, problems, nodes, need, bad) -> None:  # noqa: ANN001
    if not isinstance(value, dict) or "cond" not in value or not set(value) <= {"cond", "then", "else"}:
        bad(where, "expected {cond: ..., then: [...], else: [...]}")
        return
    cond = value["cond"]
    if isinstance(cond, dict):
        if set(cond) == {"isPresent"}:
            need("input", cond["isPresent"], where + ("cond", "isPresent"))
        elif set(cond) == {"inputValue"}:
            need("input", cond["inputValue"], where + ("cond", "inputValue"))
        else:
            bad(where + ("cond",), "a condition is {isPresent: input}, {inputValue: input}, true or false")
    elif not isinstance(cond, (bool, str)):
        bad(where + ("cond",), "a condition is {isPresent: input}, {inputValue: input}, true or false")
    for branch in ("then", "else"):
        items = value.get(branch, [])
        for i, part in enumerate(items if isinstance(items, list) else [items]):
            _check_placeholder(comp, part, where + (branch, i) if isinstance(items, list) else where + (branch,),
                               problems, nodes)


def _v2_form(side: str, kind: str, name: str, attr: str | None) -> str:
    return f"{{{{$.{side}.{kind}['{name}']" + (f".{attr}" if attr else "") + "}}"
