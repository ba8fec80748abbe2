"""A Kubeflow ``PyTorchJob`` (``kubeflow.org/v1``) read as the equivalent trainyard job.

What maps (everything else is named in a warning, never dropped silently):

=====================================================  ==================================
PyTorchJob                                             JobSpec
=====================================================  ==================================
``metadata.name``                                      ``name``
``Master.replicas`` (must be 1) + ``Worker.replicas``  ``replicas``; ``distributed: torch``
container ``command`` + ``args``                       ``command`` (an argv list)
container ``resources.limits`` (else ``requests``):    ``resources.cpu``, ``.memory``,
``cpu``, ``memory``, ``nvidia.com/gpu``                ``.gpu`` (per replica)
pod ``nodeSelector``                                   ``resources.node_selector``
``runPolicy.backoffLimit``                             ``retry.max``
``runPolicy.activeDeadlineSeconds``                    ``timeout`` (trainyard: per attempt)
``spec.nprocPerNode``                                  ``procs_per_replica``
annotation ``trainyard.io/workdir``                    ``workdir`` (where the code is)
container ``env`` (``name``/``value``)                 ``env_vars``
``env`` ``valueFrom.secretKeyRef`` ``{name, key}``     ``secrets`` (the team's secret ``NAME.KEY``)
container ``image``                                    ``image`` (and :attr:`Converted.image`)
the Worker's ``image`` where it differs                ``worker_image``
container ``imagePullPolicy``                          ``image_pull_policy``
=====================================================  ==================================

The container is the one named ``pytorch`` (as the training operator wants),
else the first. Each replica keeps its own image; otherwise every replica runs
like the Master, and where a Worker differs (command, env, resources), a
warning says so. ``image`` is kept with ``image_fallback: host``: the command
runs in the image where a container runtime is, else on the host as before.
Kubernetes ignores ``trainyard.io/*`` annotations, so one manifest serves both.
A manifest has no params (Kubernetes substitutes nothing into ``args``), so
``trainyard run MANIFEST -p k=v`` is refused, naming ``params.k``.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

import yaml
from pydantic import ValidationError

from trainyard.errors import InvalidSpec
from trainyard.spec.job import JobSpec
from trainyard.spec.lines import Path_, compose, error_entry, line_for

API_VERSION = "kubeflow.org/v1"
KIND = "PyTorchJob"
WORKDIR_ANNOTATION = "trainyard.io/workdir"
GPU_RESOURCE = "nvidia.com/gpu"
log = logging.getLogger(__name__)

_REPLICAS = ("spec", "pytorchReplicaSpecs")
_TORCHRUN = re.compile(r"(^|/)torchrun$|^torch\.distributed\.(run|launch)$")
_PULL_POLICIES = {"IfNotPresent": "if-not-present", "Always": "always", "Never": "never"}  # Kubernetes -> ours
_IGNORED = "not supported by trainyard; ignored"


@dataclass
class Converted:
    """A converted manifest.

    ``env_vars`` are the container's plain variables (in ``spec`` too) and ``image`` its image. ``warnings`` name
    what was not used; each has the shape of an :class:`InvalidSpec` error
    (``field``, ``line``, ``message``, ``where``).
    """

    spec: JobSpec
    env_vars: dict[str, str] = field(default_factory=dict)
    image: str | None = None
    warnings: list[dict[str, Any]] = field(default_factory=list)

    def warning_lines(self) -> list[str]:
        return [f"{w['where']}: {w['message']}" for w in self.warnings]


def is_pytorchjob(data: Any) -> bool:
    return isinstance(data, dict) and data.get("kind") == KIND


def is_pytorchjob_text(text: str) -> bool:
    """Cheap test for the loader: a job spec never has ``kind`` (unknown fields are refused)."""
    if KIND not in text:
        return False
    try:
        return is_pytorchjob(yaml.safe_load(text))
    except (yaml.YAMLError, RecursionError):  # compose(), which reads it next, says what is wrong and where
        return False


def parse_pytorchjob(text: str, source: str = "<manifest>") -> Converted:
    data, lines = compose(text, source)
    return convert(data, lines, source)


def convert(data: Any, lines: dict[Path_, int] | None = None, source: str = "<manifest>") -> Converted:
    """Convert a loaded manifest; ``lines`` (from :func:`trainyard.spec.lines.compose`) puts lines in messages."""
    return _Converter(data, lines or {}, source).run()


def load_pytorchjob(text: str, source: str) -> JobSpec:
    """For ``load_job``: convert, and log each warning."""
    out = parse_pytorchjob(text, source)
    for line in out.warning_lines():
        log.warning("%s", line)
    return out.spec


def _path(path: Path_) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _secret_ref(item: dict[str, Any]) -> str | None:
    ref = (item.get("valueFrom") or {}).get("secretKeyRef") if isinstance(item.get("valueFrom"), dict) else None
    if isinstance(ref, dict) and isinstance(ref.get("name"), str) and isinstance(ref.get("key"), str):
        return f"{ref['name']}.{ref['key']}"
    return None


class _Converter:
    def __init__(self, data: Any, lines: dict[Path_, int], source: str) -> None:
        self.data, self.lines, self.source = data, lines, source
        self.errors: list[dict[str, Any]] = []
        self.warnings: list[dict[str, Any]] = []
        self.origin: dict[str, Path_] = {}  # JobSpec field -> where in the manifest it came from

    # -- reporting -------------------------------------------------------------

    def _entry(self, path: Path_, message: str) -> dict[str, Any]:
        return error_entry(self.source, line_for(path, self.lines), _path(path), message)

    def error(self, path: Path_, message: str) -> None:
        self.errors.append(self._entry(path, message))

    def warn(self, path: Path_, message: str = _IGNORED) -> None:
        self.warnings.append(self._entry(path, message))

    def unmapped(self, value: dict, path: Path_, used: set[str]) -> None:
        for key in value:
            if key not in used:
                self.warn(path + (key,))

    def mapping(self, value: Any, path: Path_, required: bool = True) -> dict | None:
        if value is None and not required:
            return {}
        if not isinstance(value, dict):
            self.error(path, "field required" if value is None else "expected a mapping")
            return None
        return value

    def fail(self) -> None:
        if self.errors:
            raise InvalidSpec(errors=self.errors)

    # -- the manifest ----------------------------------------------------------

    def run(self) -> Converted:
        doc = self.mapping(self.data, ())
        self.fail()
        if doc.get("kind") != KIND:
            self.error(("kind",), f"expected kind: {KIND}")
        if doc.get("apiVersion") != API_VERSION:
            self.warn(("apiVersion",), f"{doc.get('apiVersion')!r}: read as {API_VERSION}")
        self.unmapped(doc, (), {"apiVersion", "kind", "metadata", "spec"})
        out: dict[str, Any] = {"distributed": "torch"}
        self.metadata(doc.get("metadata"), out)
        spec = self.mapping(doc.get("spec"), ("spec",))
        self.fail()
        self.unmapped(spec, ("spec",), {"pytorchReplicaSpecs", "runPolicy", "nprocPerNode"})
        replicas = self.replica_specs(spec.get("pytorchReplicaSpecs"))
        self.fail()
        master = replicas["Master"]
        out["replicas"] = 1 + (replicas["Worker"]["count"] if "Worker" in replicas else 0)
        self.origin["replicas"] = _REPLICAS
        out["command"], self.origin["command"] = master["command"], master["path"] + ("command",)
        out["resources"], self.origin["resources"] = master["resources"], master["path"] + ("resources",)
        if "Worker" in replicas:
            self.compare(master, replicas["Worker"])
        self.run_policy(spec.get("runPolicy"), out)
        if "nprocPerNode" in spec:
            out["procs_per_replica"] = self.nproc(spec["nprocPerNode"], master["resources"].get("gpu", 0))
            self.origin["procs_per_replica"] = ("spec", "nprocPerNode")
        self.fail()
        if master["image"]:  # where no container runtime is, on the host as before (and warned so)
            out["image"], self.origin["image"] = master["image"], master["path"] + ("image",)
            out["image_fallback"] = "host"
            self.warn(master["path"] + ("image",), f"image {master['image']}: runs in it where a container "
                      "runtime is (podman, docker), else on the host in the job's env")
        worker = replicas.get("Worker")
        if worker and worker["count"] and worker["image"] and worker["image"] != master["image"]:
            if not master["image"]:
                self.error(master["path"] + ("image",), "field required: the Worker names an image, so the "
                           "Master needs one too")
                self.fail()
            out["worker_image"], self.origin["worker_image"] = worker["image"], worker["path"] + ("image",)
        if master["pull_policy"]:
            out["image_pull_policy"] = master["pull_policy"]
        env = master["env"]
        if env:
            out["env_vars"], self.origin["env_vars"] = env, master["path"] + ("env",)
        if master["secrets"]:
            out["secrets"] = master["secrets"]
        job = self.validate(out)
        self.warnings.sort(key=lambda w: w["line"] or 0)
        return Converted(job, env, master["image"], self.warnings)

    def metadata(self, value: Any, out: dict[str, Any]) -> None:
        meta = self.mapping(value, ("metadata",))
        if meta is None:
            return
        if "name" in meta:
            out["name"], self.origin["name"] = str(meta["name"]), ("metadata", "name")
        else:
            self.error(("metadata", "name"), "field required")
        annotations = self.mapping(meta.get("annotations"), ("metadata", "annotations"), required=False) or {}
        for key, v in annotations.items():
            if key == WORKDIR_ANNOTATION:
                out["workdir"], self.origin["workdir"] = str(v), ("metadata", "annotations", key)
            else:
                self.warn(("metadata", "annotations", key))
        self.unmapped(meta, ("metadata",), {"name", "annotations"})

    def replica_specs(self, value: Any) -> dict[str, dict[str, Any]]:
        specs = self.mapping(value, _REPLICAS)
        if specs is None:
            return {}
        found: dict[str, dict[str, Any]] = {}
        for key, rspec in specs.items():
            kind = str(key).capitalize()  # the operator accepts "master", "worker" too
            path = _REPLICAS + (key,)
            if kind not in ("Master", "Worker"):
                self.error(path, f"unknown replica type {key!r}; a PyTorchJob has Master and Worker")
            elif (r := self.replica(rspec, path, kind)) is not None:
                found[kind] = r
        if "Master" not in found and not any(str(k).capitalize() == "Master" for k in specs):
            self.error(_REPLICAS + ("Master",), "field required: trainyard runs replica 0 as the Master")
        return found

    def replica(self, value: Any, path: Path_, kind: str) -> dict[str, Any] | None:
        rspec = self.mapping(value, path)
        if rspec is None:
            return None
        count = rspec.get("replicas", 1)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            self.error(path + ("replicas",), f"expected a whole number, not {count!r}")
        elif kind == "Master" and count != 1:
            self.error(path + ("replicas",), f"a PyTorchJob has exactly 1 Master, not {count}")
        self.unmapped(rspec, path, {"replicas", "template"})
        template = self.mapping(rspec.get("template"), path + ("template",))
        if template is None:
            return None
        self.unmapped(template, path + ("template",), {"spec"})
        pod_path = path + ("template", "spec")
        pod = self.mapping(template.get("spec"), pod_path)
        if pod is None:
            return None
        self.unmapped(pod, pod_path, {"containers", "nodeSelector"})
        containers = pod.get("containers")
        if not isinstance(containers, list) or not containers or not all(isinstance(c, dict) for c in containers):
            self.error(pod_path + ("containers",), "expected a list with at least one container")
            return None
        names = [c.get("name") for c in containers]
        i = names.index("pytorch") if "pytorch" in names else 0
        for j, name in enumerate(names):
            if j != i:
                self.warn(pod_path + ("containers", j), f"container {name!r} is not run: only {names[i]!r} is")
        node_selector = self.mapping(pod.get("nodeSelector"), pod_path + ("nodeSelector",), required=False)
        out = self.container(containers[i], pod_path + ("containers", i))
        if out is not None:
            out["resources"]["node_selector"] = {str(k): str(v) for k, v in (node_selector or {}).items()}
            out["count"] = count
        return out

    def container(self, c: dict, path: Path_) -> dict[str, Any] | None:
        self.unmapped(c, path, {"name", "image", "imagePullPolicy", "command", "args", "env", "resources"})
        argv: list[str] = []
        for key in ("command", "args"):
            v = c.get(key)
            if v is not None and not isinstance(v, list):
                self.error(path + (key,), "expected a list of strings")
            argv += [str(a) for a in v or []]
        if not c.get("command"):
            self.error(path + ("command",), "field required: the image's entrypoint is unknown outside the image")
        if argv and (_TORCHRUN.search(argv[0]) or (len(argv) > 2 and argv[1] == "-m" and _TORCHRUN.search(argv[2]))):
            self.warn(path + ("command",), "starts torchrun; trainyard starts the processes itself "
                      "(procs_per_replica), so run the script directly, e.g. python train.py")
        for a in argv:
            if "$(" in a:
                self.warn(path + ("command",), f"{a!r}: Kubernetes $(VAR) expansion is not done; passed as written")
        image = c.get("image")
        policy = c.get("imagePullPolicy")
        if policy is not None and policy not in _PULL_POLICIES:
            self.error(path + ("imagePullPolicy",), f"expected one of {', '.join(_PULL_POLICIES)}, not {policy!r}")
        env, secrets = self.env(c.get("env"), path + ("env",))
        return {"path": path, "command": argv, "image": image, "pull_policy": _PULL_POLICIES.get(policy),
                "env": env, "secrets": secrets, "resources": self.resources(c.get("resources"), path + ("resources",))}

    def env(self, value: Any, path: Path_) -> tuple[dict[str, str], dict[str, str]]:
        """Plain variables, and those read ``valueFrom.secretKeyRef {name, key}``: the team's trainyard secret
        ``NAME.KEY`` (a Kubernetes Secret holds several keys; a trainyard secret is one value)."""
        out: dict[str, str] = {}
        secrets: dict[str, str] = {}
        if value is not None and not isinstance(value, list):
            self.error(path, "expected a list of {name, value}")
        for i, item in enumerate(value if isinstance(value, list) else []):
            if not isinstance(item, dict) or not item.get("name"):
                self.error(path + (i,), "expected {name, value}")
            elif (ref := _secret_ref(item)) is not None:
                secrets[str(item["name"])], self.origin["secrets"] = ref, path + (i, "valueFrom")
            elif "valueFrom" in item:
                self.warn(path + (i, "valueFrom"), f"env {item['name']}: valueFrom is supported for "
                          "secretKeyRef {name, key} only; not set")
            else:
                out[str(item["name"])] = "" if item.get("value") is None else str(item["value"])
        return out, secrets

    def resources(self, value: Any, path: Path_) -> dict[str, Any]:
        res = self.mapping(value, path, required=False) or {}
        self.unmapped(res, path, {"limits", "requests"})
        limits = self.mapping(res.get("limits"), path + ("limits",), required=False) or {}
        requests = self.mapping(res.get("requests"), path + ("requests",), required=False) or {}
        out: dict[str, Any] = {}
        for key, ours in (("cpu", "cpu"), ("memory", "memory"), (GPU_RESOURCE, "gpu")):
            if key in limits:
                out[ours] = limits[key]
                self.origin[f"resources.{ours}"] = path + ("limits", key)
                if key in requests and requests[key] != limits[key]:
                    self.warn(path + ("requests", key), f"differs from the limit {limits[key]}; using the limit")
            elif key in requests:
                out[ours] = requests[key]
                self.origin[f"resources.{ours}"] = path + ("requests", key)
        for part, given in (("limits", limits), ("requests", requests)):
            for key in given:
                if key not in ("cpu", "memory", GPU_RESOURCE):
                    self.warn(path + (part, key))
        return out

    def compare(self, master: dict[str, Any], worker: dict[str, Any]) -> None:
        m_res, w_res = dict(master["resources"]), dict(worker["resources"])
        m_sel, w_sel = m_res.pop("node_selector"), w_res.pop("node_selector")
        path = worker["path"]  # ...template.spec.containers[i]
        for key, a, b, where in (("command and args", master["command"], worker["command"], path + ("command",)),
                                 ("env", master["env"], worker["env"], path + ("env",)),
                                 ("resources", m_res, w_res, path + ("resources",)),
                                 ("nodeSelector", m_sel, w_sel, path[:-2] + ("nodeSelector",))):
            if a != b:
                self.warn(where, f"differs from the Master's {key}; every replica runs like the Master")

    def run_policy(self, value: Any, out: dict[str, Any]) -> None:
        path = ("spec", "runPolicy")
        policy = self.mapping(value, path, required=False)
        if policy is None:
            return
        self.unmapped(policy, path, {"backoffLimit", "activeDeadlineSeconds"})
        for key, target in (("backoffLimit", "retry"), ("activeDeadlineSeconds", "timeout")):
            if key not in policy:
                continue
            v = policy[key]
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                self.error(path + (key,), f"expected a whole number of {'retries' if target == 'retry' else 'seconds'}")
            elif target == "retry":
                out["retry"] = {"max": v}
                self.origin["retry"] = path + (key,)
            else:
                out["timeout"] = v
                self.origin["timeout"] = path + (key,)

    def nproc(self, value: Any, gpus: Any) -> int:
        path = ("spec", "nprocPerNode")
        text = str(value).strip().lower()
        if text.isdigit() and int(text) >= 1 and not isinstance(value, bool):
            return int(text)
        gpus = int(gpus) if str(gpus).isdigit() else 0
        if text in ("auto", "gpu") and gpus > 0:
            return gpus
        if text in ("auto", "gpu", "cpu"):
            self.warn(path, f"{value!r} needs a count trainyard cannot know here; starting 1 process per replica")
            return 1
        self.error(path, f"expected a number of processes, auto, gpu or cpu; not {value!r}")
        return 1

    def validate(self, out: dict[str, Any]) -> JobSpec:
        try:
            return JobSpec.model_validate(out)
        except ValidationError as e:
            errors = []
            for err in e.errors():
                loc = [p for p in err["loc"] if not (isinstance(p, str) and ("[" in p or p in ("str", "int")))]
                origin = self.origin.get(".".join(map(str, loc[:2]))) or self.origin.get(str(loc[0]) if loc else "")
                errors.append(self._entry(origin or (), err["msg"].removeprefix("Value error, ")))
            raise InvalidSpec(errors=errors) from None
