"""A graph component (``implementation.graph``): each task becomes sub-steps named ``{step}-{task}``.

Task arguments are a literal, ``{graphInput: {inputName: x}}`` (the graph's own argument, passed on
as given: a literal, a ``{{params.x}}`` or another step's output) or ``{taskOutput: {taskId: t,
outputName: o}}`` (a reference to the sub-step that makes it). ``outputValues`` say which task output
is each output of the graph.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Callable

from trainyard.pipelines.expansion import Expansion
from trainyard.pipelines.kfp_component import Component, safe_name
from trainyard.pipelines.kfp_load import Context, load_ref
from trainyard.pipelines.kfp_placeholders import Binding

# expands one task's component: kfp_expand.expand_component, passed in because a task may itself be a graph
ExpandComponent = Callable[[str, Component, dict[str, Any], dict[str, Any], Context, str], Expansion]


def task_step(step: str, task: str) -> str:
    return f"{step}-{re.sub(r'[^a-z0-9]+', '-', task.lower()).strip('-')}"


def expand_graph(step: str, comp: Component, bound: dict[str, Binding], extras: dict[str, Any],
                 ctx: Context, expand_component: ExpandComponent) -> Expansion:
    graph = comp.spec.implementation.graph
    assert graph is not None
    base = ("implementation", "graph")
    out = Expansion({}, {}, [])
    done: dict[str, Expansion] = {}
    names: dict[str, str] = {}
    for task in _order(comp):
        sub = task_step(step, task)
        if sub in names.values():
            raise comp.error(base + ("tasks", task), f"task {task!r} gets the same step name {sub!r} as another")
        names[task] = sub
        spec = graph.tasks[task]
        path = base + ("tasks", task)
        args = {k: _argument(comp, v, path + ("arguments", k), bound, done) for k, v in spec.arguments.items()}
        args = {k: v for k, v in args.items() if v is not None}
        where = comp.entry(path, "")["where"]  # "file:line implementation.graph.tasks.t"
        child = load_ref(spec.componentRef, comp.source, ctx, where + ".componentRef")
        sub_ctx = replace(ctx, depth=ctx.depth + 1)
        exp = expand_component(sub, child, args, extras, sub_ctx, f"{where}.arguments")
        done[task] = exp
        out.steps.update(exp.steps)
        out.warnings += [w for w in exp.warnings if w not in out.warnings]
    for name, value in graph.outputValues.items():
        path = base + ("outputValues", name)
        if name not in comp.outputs:
            raise comp.error(path, f"unknown output {name!r} (outputs: {', '.join(comp.outputs) or 'none'})")
        ref = _task_output(comp, value, path, done)
        out.outputs[safe_name(name)] = ref
    for name in comp.outputs:
        if safe_name(name) not in out.outputs:
            out.warnings.append(f"graph output {name!r} has no outputValues entry, so nothing makes it")
    return out


def _argument(comp: Component, value: Any, path: tuple, bound: dict[str, Binding],
              done: dict[str, Expansion]) -> Any:
    """A task argument as a step argument; None for an absent optional graph input (the task's default holds)."""
    if isinstance(value, dict) and "graphInput" in value:
        gi = value["graphInput"]
        name = gi.get("inputName") if isinstance(gi, dict) else gi
        if name not in bound:
            raise comp.error(path + ("graphInput",), f"unknown graph input {name!r} "
                                                     f"(inputs: {', '.join(comp.inputs) or 'none'})")
        b = bound[name]
        if not b.present:
            return None
        return {"path": b.value} if b.kind == "ref" else {"value": b.value}
    if isinstance(value, dict) and "taskOutput" in value:
        sub, output = _task_output(comp, value, path, done).split(".", 1)
        return f"{{{{steps.{sub}.outputs.{output}}}}}"
    if isinstance(value, dict):
        raise comp.error(path, "an argument is a literal, {graphInput: {inputName: x}} "
                               "or {taskOutput: {taskId: t, outputName: o}}")
    return {"value": value}


def _task_output(comp: Component, value: Any, path: tuple, done: dict[str, Expansion]) -> str:
    to = value.get("taskOutput") if isinstance(value, dict) else None
    if not isinstance(to, dict) or "taskId" not in to or "outputName" not in to:
        raise comp.error(path, "expected {taskOutput: {taskId: t, outputName: o}}")
    task, output = str(to["taskId"]), str(to["outputName"])
    if task not in done:
        raise comp.error(path + ("taskOutput", "taskId"), f"unknown task {task!r}")
    provided = done[task].outputs
    if safe_name(output) not in provided:
        raise comp.error(path + ("taskOutput", "outputName"),
                         f"task {task!r} has no output {output!r} (it has: {', '.join(provided) or 'none'})")
    return provided[safe_name(output)]


def _order(comp: Component) -> list[str]:
    """Tasks so that each comes after the tasks whose outputs it takes; a cycle is an error naming it."""
    graph = comp.spec.implementation.graph
    assert graph is not None
    deps: dict[str, set[str]] = {}
    for task, spec in graph.tasks.items():
        deps[task] = set()
        for k, v in spec.arguments.items():
            to = v.get("taskOutput") if isinstance(v, dict) else None
            if isinstance(to, dict) and "taskId" in to:
                if to["taskId"] not in graph.tasks:
                    raise comp.error(("implementation", "graph", "tasks", task, "arguments", k, "taskOutput", "taskId"),
                                     f"unknown task {to['taskId']!r} (tasks: {', '.join(graph.tasks)})")
                deps[task].add(str(to["taskId"]))
    order: list[str] = []
    state: dict[str, int] = {}

    def visit(t: str, trail: list[str]) -> None:
        if state.get(t) == 2:
            return
        if state.get(t) == 1:
            cycle = " -> ".join(trail[trail.index(t):] + [t])
            raise comp.error(("implementation", "graph", "tasks", t), f"tasks form a cycle: {cycle}")
        state[t] = 1
        for d in sorted(deps[t]):
            visit(d, trail + [t])
        state[t] = 2
        order.append(t)

    for t in graph.tasks:
        visit(t, [])
    return order
