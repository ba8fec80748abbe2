"""The reference checks of a pipeline's graph builder: needs, ``{{steps.…}}``, ``{{params.…}}``, ``{{inputs.…}}``.

A mixin of :class:`trainyard.spec.pipeline_graph._Builder`, which owns the state
read here (its steps, groups, options, params and errors); split out so that
each file reads as one concern.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainyard.spec.lines import Path_, suggestion
from trainyard.templates import IO_REF, ITEM_REF, LEADING_STEP_REF, PARAM_REF, STEP_REF

if TYPE_CHECKING:
    from trainyard.spec.pipeline import Errors, StepOptions


class References:
    plain: dict
    groups: dict[str, list[str]]
    opaque: set
    aliases: dict[tuple[str, str], tuple[str, str]]
    opts: dict[str, StepOptions]
    jobs: dict[str, dict]
    params: dict
    origin: dict[str, str]
    deps: dict[str, set[str]]
    errs: Errors

    def loc(self, name: str, *rest: object) -> Path_:
        raise NotImplementedError

    def _names(self) -> set[str]:
        return {*self.plain, *self.groups, *self.opaque}

    def _known(self, name: str) -> bool:
        return name in self.plain or name in self.groups or name in self.opaque

    def _resolve(self, loc: Path_, step: str, output: str) -> tuple[str, str] | None:
        """The plain step and output behind ``{{steps.step.outputs.output}}``; None (and an error) if none."""
        if step in self.groups:
            if (step, output) in self.aliases:
                return self.aliases[(step, output)]
            has = sorted(o for s, o in self.aliases if s == step)
        elif step in self.opaque:
            return step, output
        elif step in self.plain:
            if step not in self.opts:
                return None  # its own errors are already reported
            if output in self.opts[step].outputs:
                return step, output
            has = self.opts[step].outputs
        else:
            self.errs.add(loc, f"unknown step {step!r} in {{{{steps.{step}.outputs.{output}}}}}"
                               + suggestion(step, self._names()))
            return None
        self.errs.add(loc, f"step {step!r} has no output {output!r} "
                           f"(it has: {', '.join(has) if has else 'no outputs'})")
        return None

    def _check_references(self, name: str) -> None:
        opts, rest = self.opts[name], self.jobs[name]
        deps: set[str] = set()
        step_params = rest.get("params") if isinstance(rest.get("params"), dict) else {}
        known_params = {**self.params, **step_params}
        for dep in opts.needs:
            if dep == self.origin[name] or dep == name:
                self.errs.add(self.loc(name, "needs"), f"a step cannot need itself ({dep!r})")
            elif not self._known(dep):
                self.errs.add(self.loc(name, "needs"), f"unknown step {dep!r}" + suggestion(dep, self._names()))
            else:
                deps.update(self.groups.get(dep, [dep]))
        for loc, text in self._strings(name):
            for p in PARAM_REF.findall(text):  # a command's too: the job's own check names neither line nor params
                if p not in known_params:
                    self.errs.add(loc, f"unknown param {p!r} (declared: {', '.join(known_params) or 'none'})"
                                       + suggestion(p, set(known_params)))
            if opts.foreach is None and ITEM_REF.search(text) and loc[-1] != "foreach":
                self.errs.add(loc, "{{item}} and {{index}} are only set in a foreach step")
            for s, o in STEP_REF.findall(text):
                target = self._resolve(loc, s, o)
                if target is not None:
                    deps.add(target[0])
            if loc[2] == "serve" and STEP_REF.search(text) and (loc[3] != "model" or not LEADING_STEP_REF.match(text)):
                self.errs.add(loc, "only serve.model names a step's output, and the reference starts it: "
                                   "\"{{steps.S.outputs.O}}\" or \"{{steps.S.outputs.O}}/model.pkl\"")
            if loc[2] == "command":
                for kind, io in IO_REF.findall(text):
                    declared = opts.inputs if kind == "inputs" else opts.outputs
                    if io not in declared:
                        self.errs.add(loc, f"{{{{{kind}.{io}}}}}: the step declares no {kind[:-1]} {io!r}")
        for in_name, value in opts.inputs.items():
            if isinstance(value, str) and STEP_REF.search(value) and not LEADING_STEP_REF.match(value):
                self.errs.add(self.loc(name, "inputs", in_name),
                              "a step reference must start the value: \"{{steps.S.outputs.O}}/sub/path\"")
        self.deps[name] = deps - {name}

    def _strings(self, name: str) -> list[tuple[Path_, str]]:
        """Every text of a step where references may appear, with where it is."""
        opts, rest = self.opts[name], self.jobs[name]
        out: list[tuple[Path_, str]] = []
        # a step whose job fields failed their check is still read here (its references are reported too),
        # so a command or env_vars of the wrong type, already an error naming it, is passed over
        command = rest.get("command")
        if isinstance(command, str):
            out.append((self.loc(name, "command"), command))
        elif isinstance(command, list):
            out += [(self.loc(name, "command", i), part) for i, part in enumerate(command) if isinstance(part, str)]
        for k, v in opts.inputs.items():
            out.append((self.loc(name, "inputs", k), v if isinstance(v, str) else v.value))
        env_vars = rest.get("env_vars")
        for k, v in (env_vars.items() if isinstance(env_vars, dict) else ()):
            out.append((self.loc(name, "env_vars", k), str(v)))
        if isinstance(opts.foreach, str):
            out.append((self.loc(name, "foreach"), opts.foreach))
        serve = rest.get("serve")
        for key in ("model", "name", "module", "queue") if isinstance(serve, dict) else ():
            if isinstance(serve.get(key), str):
                out.append((self.loc(name, "serve", key), serve[key]))
        return out
