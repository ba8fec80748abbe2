"""The ``{{…}}`` references of specs and pipelines, as patterns: one place for their syntax.

Standard library only, so the launcher (which puts in ``{{inputs.x}}`` and ``{{outputs.x}}``
on the node) shares them with the spec (:mod:`trainyard.spec.params` substitutes params;
:mod:`trainyard.spec.pipeline_graph` resolves step, item and input/output references).
Kubeflow's own ``{{$.inputs…}}`` placeholders are another language, read in
:mod:`trainyard.pipelines.kfp_component`.
"""

import re

PARAM_REF = re.compile(r"\{\{\s*params\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")                # {{params.lr}}
WHOLE_PARAM_REF = re.compile(r"^\s*\{\{\s*params\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}\s*$")  # nothing else around it
IO_REF = re.compile(r"\{\{\s*(inputs|outputs)\.([A-Za-z_][A-Za-z0-9_-]*)\s*\}\}")          # {{outputs.model}}
STEP_REF = re.compile(r"\{\{\s*steps\.([^.\s{}]+)\.outputs\.([^.\s{}]+)\s*\}\}")        # {{steps.a.outputs.m}}
LEADING_STEP_REF = re.compile(r"^\s*\{\{\s*steps\.([^.\s{}]+)\.outputs\.([^.\s{}]+)\s*\}\}(.*)$", re.S)  # + a subpath
ITEM_REF = re.compile(r"\{\{\s*(item|index)((?:\.[A-Za-z0-9_]+)*)\s*\}\}")               # {{item.lr}}, {{index}}
PORT_REF = re.compile(r"\{\{\s*port\s*\}\}")                                              # {{port}} of a service replica
