"""A container component's ``command``/``args`` turned into a plain step's argv, inputs and outputs.

How each placeholder is written in the plain step (the pipeline runner substitutes the ``{{...}}``):

================================  ==================================================================
``{inputValue: x}``               the argument's text; ``{{params.p}}`` stays for the runner; a step
                                  output (``{{steps.S.outputs.O}}``) is read from its file at run time
``{inputPath: x}``                ``{{inputs.x}}``, with ``inputs: {x: <reference or {value: text}>}``
``{outputPath: y}``               ``{{outputs.y}}``, with ``y`` in ``outputs``
``{concat: [...]}``               one argument, the parts joined
``{if: {cond, then, else}}``      the arguments of the branch taken, decided now
================================  ==================================================================

A value that only exists at run time (a step output used by ``inputValue``) is written as the token
``@@kfp:x@@`` and the argv is wrapped in ``python -m trainyard.pipelines.kfp_exec``, which reads the
file and puts its text in place before it execs the command.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from trainyard.pipelines.kfp_component import V2, Component, safe_name
from trainyard.spec.lines import Path_
from trainyard.templates import PARAM_REF

STEP_REF = re.compile(r"^\{\{\s*steps\.[^}]+\}\}")
TOKEN = "@@kfp:{}@@"
# characters of one step's translated command, counted as it is built: past what exec takes anyway (Linux: 128 KiB
# an argument, 2 MiB all of them), and without it a value repeated by concat or v2 placeholders grows without end
MAX_COMMAND = 1 << 20
# and of all the commands one component step makes (a graph's tasks together): a run is bounded as a whole
# (spec.pipeline.MAX_RUN_TEXT) only once they are made
MAX_COMMANDS = 16 << 20


@dataclass
class Binding:
    """How one input is given: ``literal`` text (may hold ``{{params.x}}``), ``ref`` (a step output
    ``{{steps.S.outputs.O}}``, or ``{path: p}``: a file or URL, as a plain step's inputs take it), or ``absent``."""

    kind: str
    value: str = ""

    @property
    def present(self) -> bool:
        return self.kind != "absent"


def render(value: Any) -> str:
    """An argument value as command-line text, the way KFP serializes it (lists and dicts as JSON)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


def bind(value: Any) -> Binding:
    if isinstance(value, dict) and set(value) == {"value"}:
        return Binding("literal", render(value["value"]))
    if isinstance(value, dict) and set(value) == {"path"}:
        return Binding("ref", str(value["path"]))
    if isinstance(value, str) and STEP_REF.match(value):
        return Binding("ref", value)
    return Binding("literal", render(value))


@dataclass
class Translated:
    argv: list[str]
    inputs: dict[str, Any] = field(default_factory=dict)
    outputs: list[str] = field(default_factory=list)
    value_files: dict[str, str] = field(default_factory=dict)  # input -> reference read at run time

    def command(self) -> list[str]:
        if not self.value_files:
            return self.argv
        wrap = ["python", "-m", "trainyard.pipelines.kfp_exec"]
        for name in self.value_files:
            wrap += ["--value", f"{name}={{{{inputs.{name}}}}}"]
        return [*wrap, "--", *self.argv]


class Resolver:
    """Resolves one container component for one step, given each input's :class:`Binding`."""

    def __init__(self, comp: Component, bindings: dict[str, Binding], params: dict[str, Any], step: str,
                 made: list[int] | None = None) -> None:
        self.comp, self.bindings, self.params, self.step = comp, bindings, params, step
        self.out = Translated([])
        self.made = 0  # characters of arguments made so far (see grow)
        self.all_made = made if made is not None else [0]  # and by the other tasks of the step's graph

    def translate(self) -> Translated:
        container = self.comp.spec.implementation.container
        assert container is not None
        for key in ("command", "args"):
            for i, item in enumerate(getattr(container, key)):
                self.out.argv += self.items(item, ("implementation", "container", key, i))
        return self.out

    def grow(self, more: int, path: Path_) -> None:
        """Count ``more`` characters about to be made, refused past :data:`MAX_COMMAND` before they are.

        Every argument and every join is counted as it is made (a concat's parts again in the join), so
        the count is at least the command's length and bounds the memory the translation takes."""
        self.made += more
        self.all_made[0] += more
        if self.made > MAX_COMMAND:
            raise self.comp.error(path, f"step {self.step!r}: the command would be longer than {MAX_COMMAND} "
                                        f"characters, with the arguments put in")
        if self.all_made[0] > MAX_COMMANDS:
            raise self.comp.error(path, f"step {self.step!r}: its tasks' commands together would be longer than "
                                        f"{MAX_COMMANDS} characters, with the arguments put in")

    # -- one placeholder -> a list of arguments ------------------------------------------------------

    def items(self, item: Any, path: Path_) -> list[str]:
        if isinstance(item, str):
            return [self.text(item, path)]
        if isinstance(item, (int, float)):
            return [str(item)]
        (key, value), = item.items()
        where = path + (key,)
        if key in ("inputValue", "inputPath", "outputPath"):
            arg = self.value(value, where) if key == "inputValue" else (
                self.path(value, where) if key == "inputPath" else self.output(value))
            self.grow(len(arg), where)
            return [arg]
        if key == "concat":
            parts = [a for i, p in enumerate(value) for a in self.items(p, where + (i,))]
            self.grow(sum(map(len, parts)), where)
            return ["".join(parts)]
        branch = "then" if self.condition(value["cond"], where + ("cond",)) else "else"
        chosen = value.get(branch, [])
        chosen = chosen if isinstance(chosen, list) else [chosen]
        return [a for i, p in enumerate(chosen) for a in self.items(p, where + (branch, i))]

    def text(self, item: str, path: Path_) -> str:
        self.grow(len(item), path)

        def one(m: re.Match) -> str:
            value = self.v2(m, path)
            self.grow(len(value), path)
            return value

        return V2.sub(one, item)

    def v2(self, m: re.Match, path: Path_) -> str:
        side, kind, name, _ = m.groups()
        if side == "outputs":
            return self.output(name)
        return self.value(name, path) if kind == "parameters" else self.path(name, path)

    def binding(self, name: str, path: Path_) -> Binding:
        b = self.bindings[name]
        if not b.present:
            raise self.comp.error(path, f"step {self.step!r}: optional input {name!r} is not given; use it only "
                                        f"inside {{if: {{cond: {{isPresent: {name}}}, then: [...]}}}}")
        return b

    def value(self, name: str, path: Path_) -> str:
        b = self.binding(name, path)
        if b.kind == "literal":
            return b.value
        key = safe_name(name)
        self.out.inputs[key] = b.value
        self.out.value_files[key] = b.value
        return TOKEN.format(key)

    def path(self, name: str, path: Path_) -> str:
        b = self.binding(name, path)
        key = safe_name(name)
        # a literal becomes a file holding it; params are known now, so put their values in
        self.out.inputs[key] = b.value if b.kind == "ref" else {"value": self.with_params(b.value, path)}
        return f"{{{{inputs.{key}}}}}"

    def output(self, name: str) -> str:
        key = safe_name(name)
        if key not in self.out.outputs:
            self.out.outputs.append(key)
        return f"{{{{outputs.{key}}}}}"

    def condition(self, cond: Any, path: Path_) -> bool:
        if isinstance(cond, dict) and "isPresent" in cond:
            return self.bindings[cond["isPresent"]].present
        if isinstance(cond, dict):
            if not self.bindings[cond["inputValue"]].present:
                return False  # an optional input not given reads as false
            b = self.bindings[cond["inputValue"]]
            if b.kind != "literal":
                raise self.comp.error(path, f"step {self.step!r}: a condition needs a value known before the run, "
                                            f"not a step output")
            cond = self.with_params(b.value, path)
        if isinstance(cond, str):
            if cond.strip().lower() not in ("true", "false"):
                raise self.comp.error(path, f"step {self.step!r}: condition {cond!r} is neither true nor false")
            return cond.strip().lower() == "true"
        return bool(cond)

    def with_params(self, text: str, path: Path_) -> str:
        def sub(m: re.Match) -> str:
            if m.group(1) not in self.params:
                raise self.comp.error(path, f"step {self.step!r}: unknown param {m.group(1)!r}")
            return render(self.params[m.group(1)])

        return PARAM_REF.sub(sub, text)
