"""From a pipeline spec to its step instances: references, needs, cycles, foreach fan-out.

Everything is checked before anything runs, and every error names the field
(and the YAML line where the spec came from a file). A ``foreach`` step
``train`` with N items becomes instances ``train-0`` … ``train-<N-1>``; a
reference to its output from another step is a fan-in folder with one entry
per item (``0``, ``1``, …).
"""

from __future__ import annotations

import graphlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from pydantic import ValidationError

from trainyard import envvars
from trainyard.artifact_paths import check_sub_path
from trainyard.errors import InvalidSpec
from trainyard.spec.job import JobSpec
from trainyard.spec.labels import MAX_LABELS
from trainyard.spec.lines import Path_
from trainyard.spec.params import refs, render, substitute, word
from trainyard.templates import ITEM_REF, LEADING_STEP_REF, PARAM_REF, STEP_REF, WHOLE_PARAM_REF
from trainyard.spec.pipeline import (MAX_ITEMS, MAX_RUN_TEXT, MAX_STEP_JOBS, SERVE_KEYS, Errors, PipelineSpec, StepOptions,
                                     ValueInput, is_serve, is_special, split_step)
from trainyard.spec.pipeline_refs import References
from trainyard.spec.serve import ServeStep


Expand = Callable[[str, dict, dict], Any]  # (name, raw step, params) -> special.Expansion


@dataclass
class StepInstance:
    """One job of a run: a step, or one item of a foreach step."""

    name: str                      # job name: "train-3", or the step's name
    step: str                      # the step it comes from
    index: int | None              # the item's index in a foreach step
    item: Any                      # the item itself
    job: dict[str, Any]            # job spec fields, with {{item}} and {{params.x}} of inputs resolved
    needs: list[str]               # instances that must succeed first
    inputs: dict[str, dict[str, Any]]  # NAME -> {"kind": "step"|"path"|"value", ...}
    outputs: list[str]             # named outputs the step must write
    cache: bool
    workdir: str                   # the workdir as written (its snapshot is keyed by it)


@dataclass
class Graph:
    instances: list[StepInstance] = field(default_factory=list)  # in an order where needs come first
    warnings: list[str] = field(default_factory=list)


def build(spec: PipelineSpec, params: dict[str, Any], *, lines: dict[Path_, int] | None = None,
          source: str = "<pipeline>", expand: Expand | None = None) -> Graph:
    """Check a pipeline and expand it into step instances; raises InvalidSpec with every error.

    With no ``expand`` (the client, which has no catalog), notebook and
    component steps are opaque: references to them are checked by step name
    only, and no instances are returned.
    """
    return _Builder(spec, params, Errors(source, lines), expand).run()


class _Builder(References):
    def __init__(self, spec: PipelineSpec, params: dict[str, Any], errs: Errors, expand: Expand | None) -> None:
        self.spec, self.params, self.errs, self.expand = spec, params, errs, expand
        self.plain: dict[str, dict[str, Any]] = {}        # plain step -> raw
        self.text: dict[str, int] = {}                    # plain step -> characters of its raw as JSON
        self.origin: dict[str, str] = {}                  # plain step -> the step of the file it comes from
        self.groups: dict[str, list[str]] = {}            # special step -> its plain steps
        self.aliases: dict[tuple[str, str], tuple[str, str]] = {}  # (special, output) -> (plain, output)
        self.opaque: set[str] = set()
        self.opts: dict[str, StepOptions] = {}
        self.jobs: dict[str, dict[str, Any]] = {}
        self.serves: dict[str, ServeStep] = {}            # serve step -> its serve: block
        self.deps: dict[str, set[str]] = {}
        self.warnings: list[str] = []

    def loc(self, name: str, *rest: Any) -> Path_:
        return ("steps", self.origin.get(name, name), *rest)

    def run(self) -> Graph:
        self._expand_special()
        if len(self.plain) + len(self.opaque) > MAX_STEP_JOBS:
            self.errs.add(("steps",), f"more than {MAX_STEP_JOBS} steps, with component steps expanded: a run "
                                      f"makes at most {MAX_STEP_JOBS} step jobs")
            self.errs.raise_if_any()
        for name, raw in self.plain.items():
            self._validate_step(name, raw)
        for name in self.jobs:
            self._check_references(name)
        self._check_cycles()
        self.errs.raise_if_any()
        items = {name: self._items(name) for name in self.jobs}
        self._check_total(items)
        self.errs.raise_if_any()
        if self.opaque:
            return Graph(warnings=self.warnings)
        instances = self._instances(items)
        self.errs.raise_if_any()
        return Graph(instances=instances, warnings=self.warnings)

    # -- special steps -------------------------------------------------------

    def _expand_special(self) -> None:
        for name, raw in self.spec.steps.items():
            if len(self.plain) + len(self.opaque) > MAX_STEP_JOBS:  # stop: each expansion may make thousands more
                break
            if sum(self.text.values()) > MAX_RUN_TEXT:  # likewise: each may make MBs more
                self.errs.add(("steps",), f"its steps' specs come to more than {MAX_RUN_TEXT} characters, with "
                                          f"component steps expanded: more than a run may make")
                break
            if not is_special(raw):
                self.plain[name], self.origin[name], self.text[name] = raw, name, _size(raw)
                continue
            if self.expand is None:
                self.opaque.add(name)
                continue
            try:
                exp = self.expand(name, raw, self.params)
            except InvalidSpec as e:
                for item in e.errors:
                    sub = tuple(p for p in str(item.get("field") or "").split(".") if p)
                    self.errs.add(("steps", name, *sub), item.get("message", str(e)))
                continue
            except Exception as e:  # a component that cannot be read or translated
                self.errs.add(("steps", name), str(e))
                continue
            for sub, sub_raw in exp.steps.items():
                if sub in self.plain or (sub != name and sub in self.spec.steps):
                    self.errs.add(("steps", name), f"expands to a step named {sub!r}, which already exists")
                self.plain[sub], self.origin[sub], self.text[sub] = sub_raw, name, _size(sub_raw)
            self.groups[name] = list(exp.steps)
            for out, ref in exp.outputs.items():
                sub, _, sub_out = ref.partition(".")
                self.aliases[(name, out)] = (sub, sub_out)
            self.warnings += [f"step {name}: {w}" for w in exp.warnings]

    # -- one step ------------------------------------------------------------

    def _validate_step(self, name: str, raw: dict[str, Any]) -> None:
        if is_serve(raw):
            self._validate_serve(name, raw)
            return
        options, rest = split_step(raw)
        try:
            self.opts[name] = StepOptions.model_validate(options)
        except ValidationError as e:
            self.errs.add_validation(self.loc(name), e)
            return
        if "after" in rest:  # a job id is no step's to know: steps wait for steps
            self.errs.add((*self.loc(name), "after"), "a step waits for other steps with needs:, not for jobs")
        step_params = rest.get("params") if isinstance(rest.get("params"), dict) else {}
        # a param the command names but no one declares is said by the reference check, at the command's line
        # with the params there are: the job's own check would say it at the step's, without them
        unknown = {p: "" for p in _command_params(rest.get("command")) if p not in self.params and p not in step_params}
        try:
            JobSpec.model_validate({**rest, "name": name, "params": {**self.params, **step_params, **unknown}})
        except ValidationError as e:
            self.errs.add_validation(self.loc(name), e, JobSpec)  # its references are still checked below
        labels = rest.get("labels")
        if isinstance(labels, dict) and len(labels) > MAX_LABELS - 2:  # with_own would leave the run's out, unseen
            self.errs.add(self.loc(name, "labels"), f"at most {MAX_LABELS - 2} labels here: each step's job also "
                                                    "gets trainyard.io/pipeline-run and trainyard.io/step")
        self.jobs[name] = rest

    def _validate_serve(self, name: str, raw: dict[str, Any]) -> None:
        for key in raw:
            if key not in SERVE_KEYS:
                self.errs.add(self.loc(name, key), "a serve step has only serve:, needs: and workdir: it runs the "
                                                   "built-in model server, not a command of its own")
        try:
            self.opts[name] = StepOptions.model_validate({"needs": raw.get("needs") or [], "cache": False})
        except ValidationError as e:
            self.errs.add_validation(self.loc(name), e)
            return
        try:
            self.serves[name] = ServeStep.model_validate(raw["serve"])
        except ValidationError as e:
            self.errs.add_validation(self.loc(name, "serve"), e, ServeStep)
        self.jobs[name] = {k: raw[k] for k in ("serve", "workdir") if k in raw}

    def _check_cycles(self) -> None:
        graph = {name: self.deps.get(name, set()) for name in [*self.plain, *self.opaque]}
        try:
            graphlib.TopologicalSorter(graph).prepare()
        except graphlib.CycleError as e:
            cycle = list(reversed(e.args[1]))
            names = [self.origin.get(c, c) for c in cycle]
            first = cycle[0]
            where = "needs" if self.opts.get(first) and self.opts[first].needs else None
            self.errs.add(self.loc(first, *([where] if where else [])), "cycle: " + " → ".join(names))

    # -- fan-out and instances -----------------------------------------------

    def _items(self, name: str) -> list[Any] | None:
        value = self.opts[name].foreach
        if value is None:
            return None
        loc = self.loc(name, "foreach")
        shown = value
        if isinstance(value, str):
            m = WHOLE_PARAM_REF.match(value)
            if not m:
                self.errs.add(loc, "give a number, a list, or \"{{params.NAME}}\"")
                return None
            if m.group(1) not in self.params:
                return None  # reported as an unknown param
            shown, value = f"params.{m.group(1)} = {self.params[m.group(1)]!r}", self.params[m.group(1)]
        if isinstance(value, bool) or not isinstance(value, (int, list)):
            self.errs.add(loc, f"{shown}: not a number or a list")
            return None
        if (value if isinstance(value, int) else len(value)) > MAX_ITEMS:
            self.errs.add(loc, f"{str(shown)[:80]}: more than {MAX_ITEMS} items")
            return None
        items = list(range(value)) if isinstance(value, int) else value
        if not items:
            self.errs.add(loc, f"{shown}: no items to run")
            return None
        return items

    def _check_total(self, items: dict[str, list[Any] | None]) -> None:
        """Refuse, before any is built, more step jobs than a run may make; named where the count passes it."""
        total, over = len(self.opaque), None
        for name in self.jobs:
            total += 1 if items[name] is None else len(items[name])
            if over is None and total > MAX_STEP_JOBS:
                over = name
        if over is not None:
            loc = self.loc(over, "foreach") if items[over] is not None else ("steps",)
            self.errs.add(loc, f"{total} step jobs (each foreach item is one), more than the {MAX_STEP_JOBS} a run "
                               f"may make")
            return
        text = 0
        for name in self.jobs:
            text += self.text.get(name, 0) * (1 if items[name] is None else len(items[name]))
            if text > MAX_RUN_TEXT:
                loc = self.loc(name, "foreach") if items[name] is not None else ("steps",)
                self.errs.add(loc, f"its step jobs' specs come to more than {MAX_RUN_TEXT} characters (each foreach "
                                   f"item counted): more than a run may make")
                return

    def _instances(self, items: dict[str, list[Any] | None]) -> list[StepInstance]:
        names = {n: ([n] if items[n] is None else [f"{n}-{i}" for i in range(len(items[n]))]) for n in self.jobs}
        seen: dict[str, str] = {}
        for step, insts in names.items():
            for inst in insts:
                if inst in seen and seen[inst] != step:
                    self.errs.add(self.loc(step), f"its job {inst!r} has the name of another step's job")
                seen[inst] = step
        order = list(graphlib.TopologicalSorter({n: self.deps[n] for n in self.jobs}).static_order())
        out = []
        for step in order:
            for i, inst in enumerate(names[step]):
                item = None if items[step] is None else items[step][i]
                if step in self.serves:
                    out.append(self._serve_instance(step, names, items))
                    continue
                out.append(self._instance(step, inst, None if items[step] is None else i, item, names, items))
        return out

    def _instance(self, step: str, inst: str, index: int | None, item: Any, names: dict[str, list[str]],
                  items: dict[str, list[Any] | None]) -> StepInstance:
        opts, rest = self.opts[step], dict(self.jobs[step])
        step_params = rest.get("params") if isinstance(rest.get("params"), dict) else {}
        all_params = {**self.params, **step_params}

        def sub(text: str, params: bool = True, shell: bool = False) -> str:
            # in a string command {{item}} is one shell word, as a param is (items may come from -p)
            text = ITEM_REF.sub(lambda m: word(_item_text(m, item, index, self.errs, self.loc(step)), shell), text)
            return substitute(text, all_params) if params else text

        inputs: dict[str, dict[str, Any]] = {}

        def source(s: str, o: str, subpath: str) -> dict[str, Any]:
            target = self._resolve(self.loc(step), s, o) or (s, o)
            return {"kind": "step", "step": target[0], "output": target[1], "subpath": subpath,
                    "from": names.get(target[0], []), "fan_in": items.get(target[0]) is not None}

        def implicit(m: re.Match) -> str:
            in_name = f"step_{m.group(1)}_{m.group(2)}".replace("-", "_")
            inputs[in_name] = source(m.group(1), m.group(2), "")
            return "{{inputs.%s}}" % in_name

        command = rest["command"]
        if isinstance(command, str):
            command = STEP_REF.sub(implicit, sub(command, params=False, shell=True))
        else:
            command = [STEP_REF.sub(implicit, sub(p, params=False)) for p in command]
        for in_name, value in opts.inputs.items():
            if isinstance(value, ValueInput):
                inputs[in_name] = {"kind": "value", "value": sub(value.value)}
                continue
            text = sub(value)
            m = LEADING_STEP_REF.match(text)
            if m is None:
                inputs[in_name] = {"kind": "path", "url": text}
                continue
            subpath = _sub_path(m.group(3), self.errs, self.loc(step, "inputs", in_name))
            inputs[in_name] = source(m.group(1), m.group(2), subpath)
        used = set(PARAM_REF.findall(" ".join([command] if isinstance(command, str) else command)))
        env_vars = {k: sub(str(v)) for k, v in (rest.get("env_vars") or {}).items()}
        env_vars[envvars.STEP] = step
        if opts.outputs:
            env_vars[envvars.OUTPUT_NAMES] = ",".join(opts.outputs)
        if index is not None:
            env_vars.update({envvars.INDEX: str(index), envvars.ITEM: render(item)})
        workdir = str(rest.get("workdir") or ".")
        job = {**rest, "name": inst, "command": command, "env_vars": env_vars, "workdir": workdir,
               "params": {**{p: self.params[p] for p in sorted(used) if p in self.params}, **step_params}}
        needs = sorted({n for d in self.deps[step] for n in names.get(d, [])})
        return StepInstance(name=inst, step=step, index=index, item=item, job=job, needs=needs, inputs=inputs,
                            outputs=list(opts.outputs), cache=opts.cache, workdir=workdir)


    def _serve_instance(self, step: str, names: dict[str, list[str]],
                        items: dict[str, list[Any] | None]) -> StepInstance:
        """A serve step: its ``serve:`` block with params filled in (the service spec is built from it once
        the model's URL is known), and the model as its one input when it is another step's output."""
        loc = self.loc(step, "serve")
        data = self.serves[step].model_dump(mode="json", exclude_none=True)
        for key in ("model", "name", "module", "queue"):
            if isinstance(data.get(key), str):
                data[key] = substitute(data[key], self.params)
        inputs: dict[str, dict[str, Any]] = {}
        m = LEADING_STEP_REF.match(data["model"])
        if m is not None:
            target = self._resolve((*loc, "model"), m.group(1), m.group(2)) or (m.group(1), m.group(2))
            subpath = _sub_path(m.group(3), self.errs, (*loc, "model"))
            if items.get(target[0]) is not None:
                self.errs.add((*loc, "model"), f"step {target[0]!r} runs once per item, so its output is a folder "
                                               "of models: serve one, or merge them in a step first")
            inputs["model"] = {"kind": "step", "step": target[0], "output": target[1], "subpath": subpath,
                               "from": names.get(target[0], []), "fan_in": False}
        try:
            ServeStep.model_validate(data).service("pipeline://model" if m else data["model"])
        except InvalidSpec as e:
            for err in e.errors:
                self.errs.add((*loc, *[p for p in str(err.get("field") or "").split(".") if p]), err["message"])
        workdir = str(self.jobs[step].get("workdir") or ".")
        needs = sorted({n for d in self.deps[step] for n in names.get(d, [])})
        return StepInstance(name=step, step=step, index=None, item=None, job={"serve": data, "workdir": workdir},
                            needs=needs, inputs=inputs, outputs=[], cache=False, workdir=workdir)


def _sub_path(written: str, errs: Errors, loc: Path_) -> str:
    """The path after a step reference, as stored ("" or ``/a/b``); an error at ``loc`` unless it stays inside
    the output (with items and params put in: an item may be ``..`` too)."""
    subpath = written.strip()
    try:
        return check_sub_path(subpath.rstrip("/"))
    except ValueError as e:
        errs.add(loc, f"after the reference comes a path inside it, starting with '/': {subpath!r} {e}")
        return ""


def _item_text(m: re.Match, item: Any, index: int | None, errs: Errors, loc: Path_) -> str:
    if m.group(1) == "index":
        return str(index)
    value = item
    for key in [k for k in m.group(2).split(".") if k]:
        if isinstance(value, dict) and key in value:
            value = value[key]
        else:
            errs.add(loc, f"{{{{item{m.group(2)}}}}}: the item {item!r} has no {key!r}")
            return ""
    return render(value)


def workdirs(spec: PipelineSpec) -> list[str]:
    """The distinct step workdirs as written (default: the pipeline file's folder, "."); one snapshot each."""
    return sorted({str(raw.get("workdir") or ".") for raw in spec.steps.values()})


def _size(raw: dict[str, Any]) -> int:
    """Characters of a step as JSON: what each of its jobs stores, about."""
    return len(json.dumps(raw, default=str))


def _command_params(command: Any) -> list[str]:
    """The params a step's command names, as the job's check reads them (a command of the wrong type: none)."""
    parts = [command] if isinstance(command, str) else command if isinstance(command, list) else []
    return [p for part in parts if isinstance(part, str) for p in refs(part)]
