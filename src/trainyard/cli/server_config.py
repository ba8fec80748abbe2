"""`trainyard server --config FILE`: the settings that have no flag of their own (monitoring, prices, the
planner's options, webhooks, retention).

```yaml
sample_every: 5            # seconds between a launcher's resource samples; 0: off
idle_gpu_threshold: 5      # % GPU utilisation under which a job's GPUs are idle ...
idle_gpu_period: 30m       # ... for this long before the job is flagged
log_keep: 64Mi             # of a replica's log, the first half and the last half are kept; 0: all of it
metrics_keep: 4000         # points of each metric of a replica: evenly spaced, and the newest; 0: every point
outputs_max: 100Gi         # bytes of outputs one replica may upload (over it: none, OutputsTooLarge); 0: no bound
pids_max: 4096             # processes and threads one replica may hold (a fork past it fails); 0: no bound;
                           # unset: 4096 with --auth, none without
cpu_limit: false           # true: a replica never runs past its resources.cpu cores (a CFS quota); false: it gets
                           # at least its share of a busy node (a cgroup weight) and may use idle cores
start_deadline: 5m         # a starting replica whose launcher has not reached the server for this long since its
                           # launch (or its last report while it sets up) is killed, LostContact (retried)
prices:
  currency: EUR
  gpu_hour: {A100: 2.5, "*": 1.0}
  cpu_hour: 0.04
  memory_gib_hour: 0.005
scheduler:                 # the planner's options (config.SchedulerSettings); left out: its defaults
  reclaim_within: 5m       # a lender stops borrowed work only within 5 min of its start (the default) ...
  reclaim_after: 30m       # ... and any borrowed work once its job has waited 30 min (default 1h)
  starve_after: off        # off (or null) turns a setting off
webhooks:                  # where job events go; users subscribe them by name (`trainyard notify add`)
  ml-alerts: {url: "https://hooks.slack.com/services/T0/B0/XXXX", format: slack, teams: [vision]}
retention:                 # what ended attempts leave on nodes, and ended jobs (config.RetentionSettings); off: kept
  work_dirs: 3d            # an ended attempt's work dirs, outputs as written, own venv; its log stays (default 3d)
  checkpoints: 30d         # an ended job's checkpoints, on nodes and in an object store (default: off)
  jobs: 180d               # an ended job itself, as `trainyard rm` deletes it; its usage stays (default: off)
  keep: keep=true          # a label selector: jobs it matches stay whatever their age (default keep=true; off: none)
  every: 10m               # between the leader's sweeps
secrets_key_file: /etc/trainyard/secrets.key   # the key secrets are sealed with (relative: to this file's folder;
                           # 0600); default secrets.key in the home. Servers sharing a database share it
```
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainyard.errors import InvalidSpec
from trainyard.spec.units import parse_duration, parse_memory

KEYS = ("sample_every", "idle_gpu_threshold", "idle_gpu_period", "log_keep", "metrics_keep", "outputs_max",
        "pids_max", "cpu_limit", "start_deadline", "prices", "scheduler", "webhooks", "retention", "secrets_key_file")


def _error(path: Path, field: str, message: str) -> InvalidSpec:
    return InvalidSpec(errors=_placed(path, [{"field": field, "line": None, "where": f"{path}: {field}",
                                              "message": message, "in": "config"}]))


def _placed(path: Path, errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``errors`` of the file's settings, each at its setting's line (``server.yaml:3 log_keep``) as a spec's are."""
    from trainyard.spec.lines import placed

    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError):
        return errors
    return placed(errors, text, str(path))


def load(path: Path) -> dict[str, Any]:
    """The file's settings as ``ServerSettings`` keyword arguments; every bad key or value names its field."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise _error(path, "config", f"cannot read it: {e}") from None
    if not isinstance(data, dict):
        raise _error(path, "config", "must be a mapping of settings")
    for key in data:
        if key not in KEYS:
            from trainyard.spec.lines import suggestion

            raise _error(path, str(key), f"unknown setting{suggestion(str(key), KEYS)} (this file takes "
                                         f"{', '.join(KEYS)})")
    for key in ("sample_every", "idle_gpu_period", "start_deadline"):
        if key in data:
            try:  # sample_every 0 turns sampling off, as documented; a zero idle period means nothing
                data[key] = parse_duration(data[key], zero=key == "sample_every")
            except ValueError as e:
                raise _error(path, key, str(e)) from None
    for key in ("log_keep", "outputs_max"):
        if key in data:
            try:
                data[key] = parse_memory(data[key])
            except ValueError as e:
                raise _error(path, key, str(e)) from None
    if "secrets_key_file" in data:
        data["secrets_key_file"] = _key_file(path, data["secrets_key_file"])
    if "scheduler" in data:
        from trainyard.config import SchedulerSettings

        data["scheduler"] = _durations(path, "scheduler", data["scheduler"], SchedulerSettings)
    if "retention" in data:
        from trainyard.config import RetentionSettings

        data["retention"] = _durations(path, "retention", data["retention"], RetentionSettings)
        if keep := data["retention"].get("keep"):
            from trainyard.spec.label_selector import SelectorError, parse_selector

            if not isinstance(keep, str):
                raise _error(path, "retention.keep", "a label selector, such as keep=true (quoted in YAML)")
            try:  # here, as config may not import spec; the retention loop parses it again at start
                parse_selector(keep, "retention.keep")
            except SelectorError as e:
                raise _error(path, "retention.keep", e.problem) from None
    return data


def _key_file(path: Path, value: Any) -> Path:
    """The secrets key file, a path relative to the config file's folder; one that exists must be private (whoever
    reads it opens every secret in a copy of the database), as doctor checks the home's."""
    import stat

    if not isinstance(value, str) or not value.strip():
        raise _error(path, "secrets_key_file", "a path to the file of keys secrets are sealed with")
    key = Path(path).parent / Path(value).expanduser()
    try:
        mode = stat.S_IMODE(key.stat().st_mode)
    except FileNotFoundError:
        return key  # made, 0600, on first need
    except OSError as e:
        raise _error(path, "secrets_key_file", f"{key}: {e.strerror or e}") from None
    if mode & 0o077:
        raise _error(path, "secrets_key_file", f"{key} is readable by others (mode {mode:o}): whoever reads it "
                     f"opens every secret in the database; chmod 600 {key}")
    return key


def _durations(path: Path, name: str, section: Any, model: Any) -> dict[str, Any]:
    """A section of durations (and counts and texts), in seconds (``off`` or null: None); the rest is left to
    its ``model``, which names any unknown key."""
    if section is None:
        return {}
    if not isinstance(section, dict):
        raise _error(path, name, f"must be a mapping of {name} settings")
    counts = {k for k, f in model.model_fields.items() if f.annotation is int}  # the rest: durations
    texts = {k for k, f in model.model_fields.items() if f.annotation in (str, str | None)}  # but these
    out = dict(section)
    for key, value in section.items():
        if key in counts or not isinstance(key, str):
            continue
        if value is None or value is False or value == "off":  # YAML reads a bare off as false
            out[key] = None
            continue
        if key in texts:
            continue
        try:
            out[key] = parse_duration(value, zero=True)
        except ValueError as e:
            raise _error(path, f"{name}.{key}", str(e)) from None
    return out


# settings that come from `trainyard server`'s flags, never from the file (KEYS): their errors name the flag
FLAGS = {"host": "--host", "port": "--port", "engine": "--engine", "container_runtime": "--container-runtime",
         "cpus": "--cpus", "memory": "--memory", "gpus": "--gpus", "gpu_type": "--gpu-type",
         "forwarded_allow_ips": "--forwarded-allow-ips"}


def check(path: Path, build: Any) -> Any:
    """``build()`` (making the settings), with pydantic's errors turned into ones naming the file's field, or the
    flag that gave the value."""
    from pydantic import ValidationError

    from trainyard.config import ServerSettings
    from trainyard.spec.lines import validation_errors

    try:
        return build()
    except ValidationError as e:  # with the model: a misspelt setting names the one meant
        errors = validation_errors(e, {}, str(path), ServerSettings)
        flags = [{**error, "field": "", "where": FLAGS[error["field"]]} for error in errors if error["field"] in FLAGS]
        in_file = _placed(path, [{**error, "in": "config"} for error in errors if error["field"] not in FLAGS])
        raise InvalidSpec(errors=flags + in_file) from None
