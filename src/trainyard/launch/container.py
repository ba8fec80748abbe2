"""A replica's command run in a container image through podman or docker.

The engine decides *whether* (a runtime answers here) and writes the
``container`` section of ``launch.json``; this module does the rest from
inside the launcher, which stays the one supervisor of the attempt:

- the image is pulled first (``image_pull_policy``); a failed pull ends the
  attempt with reason ``ImagePullFailed`` and the runtime's own words;
- the runtime client (``podman run``, attached, in the foreground) is the
  launcher's command, so logs, cancel (SIGTERM is proxied to the container),
  timeout and the grace period work as on the host;
- the container has a name made from the attempt, is never ``--rm`` (its
  ``OOMKilled`` flag is read after it ends) and is removed by :meth:`remove`
  whatever happened; the engine removes it too if the launcher itself died.

Paths are mounted at the same place as on the host (work dir, inputs, outputs,
checkpoints, the metrics file), so every ``TRAINYARD_*`` path means the same
thing inside. The network is the host's, so replicas of a gang rendezvous at
``MASTER_ADDR:MASTER_PORT`` as on the host. Standard library only.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import trainyard
from trainyard import envvars
from trainyard.envvars import LOADS_CODE, LOADS_CODE_NAMES

PULL_FAILED = "ImagePullFailed"
PULL_TIMEOUT = 1800.0  # seconds: a pull that hangs (a registry that never answers) ends the attempt
TRAINYARD_MOUNT = "/opt/trainyard/python"  # `import trainyard` inside: the host's package, read-only
NAME_PREFIX = "trainyard-"
# the host's own interpreter and tools mean nothing inside the image
_HOST_ONLY = {"PATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTHONPATH", "HOME", "LD_LIBRARY_PATH"}  # PYTHONPATH: composed
# read by the runtime's client (podman, docker: its storage, configuration, helpers, temporary files) or by the
# loader that starts it: with a job run as an account the client is root's, so the job's values of these must not
# be in its environment; they reach the container by value (`-e NAME=VALUE`), a secret never does (see Container)
_CLIENT_READS = ("CONTAINER", "_CONTAINERS", "STORAGE_", "REGISTR", "XDG_", "DOCKER", "PODMAN", "BUILDAH", "CONMON",
                 "CDI_", "OCI_", "DBUS_", "TMP", "NOTIFY_SOCKET", "GODEBUG", "GOTRACEBACK", "GOMAXPROCS", "GOGC",
                 "GOMEMLIMIT", *LOADS_CODE)
_CONF = "in /etc/containers/containers.conf (podman), or start the server with --container-runtime none"
# what the runtime says when this host cannot do what its defaults ask -> what to change
HINTS = (
    ("rlimit", "the container runtime could not set rlimits here (a sandbox that cannot raise them): set "
               f"`[containers] default_ulimits = []` {_CONF}"),
    ("cannot use systemd cgroups manager", "the runtime wants systemd for cgroups and systemd does not run "
               f"here: set `[engine] cgroup_manager = \"cgroupfs\"` {_CONF}"),
    ("crun", "crun failed to start the container (it fails on hosts with hybrid cgroups): install runc and set "
             f"`[engine] runtime = \"runc\"` {_CONF}"),
)


class PullError(Exception):
    """The image is not here and could not be pulled."""


def client_reads(name: str) -> bool:
    """Whether the runtime's client (or the loader before it) acts on the variable ``name`` itself."""
    return name in _HOST_ONLY or name in LOADS_CODE_NAMES or name.startswith(_CLIENT_READS)


def container_name(attempt_id: str, replica: int) -> str:
    return f"{NAME_PREFIX}{attempt_id}-r{replica}".lower()


class Container:
    """One replica's container: ``section`` is ``launch.json``'s ``container`` (see ``LocalEngine``).

    With ``run_as`` (the job's account) the runtime stays root's, as for any other job: pull, run, exec, inspect
    and rm use one store, and its ``--memory`` is enforced (rootless podman on cgroup v1 ignores it). The job
    drops to the account inside the container (``--user``, with the account's groups), not before the client.
    """

    def __init__(self, section: dict, name: str, run_as: dict | None = None) -> None:
        self.runtime: str = section["runtime"]
        self.kind: str = section.get("kind") or Path(self.runtime).name
        self.image: str = section["image"]
        self.pull_policy: str = section.get("pull_policy") or "if-not-present"
        self.cpus: float | None = section.get("cpus")
        self.name = name
        self.run_as = run_as

    def user(self) -> list[str]:
        """``--user UID:GID`` for a job run as an account (``podman exec`` takes it too); [] otherwise."""
        return ["--user", f"{self.run_as['uid']}:{self.run_as['gid']}"] if self.run_as else []

    def confined(self) -> list[str]:
        """For a job run as an account: no way back to root inside (a setuid binary of the image it chose), which
        the rootful runtime would make the host's root over the host folders mounted in (a setuid file left there)."""
        return ["--security-opt=no-new-privileges", "--cap-drop=all"] if self.run_as else []

    def groups(self) -> list[str]:
        """``--group-add`` for each of the account's other groups, as ``setpriv --init-groups`` gives them."""
        if not self.run_as:
            return []
        gid = int(self.run_as["gid"])
        try:
            found = os.getgrouplist(str(self.run_as.get("name") or ""), gid)
        except OSError:  # an account known by its uid only: its own group
            found = [gid]
        return [arg for g in sorted(set(found) - {gid}) for arg in ("--group-add", str(g))]

    def client_env(self, env: dict[str, str]) -> dict[str, str]:
        """The client's environment, from which it reads the job's variables by name. For a job run as an account
        (the client is root's), what the client itself acts on is this launcher's own: :meth:`argv` passes the
        job's values of those by value."""
        if not self.run_as:
            return env
        out = {k: v for k, v in env.items() if not client_reads(k)}
        out.update({k: v for k, v in os.environ.items() if client_reads(k)})
        return out

    # -- before the run --------------------------------------------------------------

    def pull(self, log: Path, cancelled) -> None:  # noqa: ANN001
        """Make the image present as the policy says; raise :class:`PullError` with the runtime's message."""
        present = self._present()
        if self.pull_policy == "never":
            if not present:
                raise PullError(f"image {self.image!r} is not present here and image_pull_policy is never")
            return
        if present and self.pull_policy != "always":
            return
        _append(log, f"pulling image {self.image} ({self.kind})")
        proc = subprocess.Popen([self.runtime, "pull", self.image], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        end = time.monotonic() + PULL_TIMEOUT
        while proc.poll() is None:
            if cancelled() or time.monotonic() > end:
                proc.kill()
                proc.wait()
                raise PullError("cancelled while pulling" if cancelled() else
                                f"pulling {self.image!r} took over {PULL_TIMEOUT:g} s")
            time.sleep(0.1)
        out = proc.stdout.read().decode(errors="replace")
        proc.stdout.close()
        if proc.returncode != 0:
            lines = [x for x in out.splitlines() if x.strip()]
            why = next((x for x in reversed(lines) if x.startswith("Error")), lines[-1] if lines else "")
            _append(log, out.rstrip())
            raise PullError(f"cannot pull image {self.image!r}: {why.strip() or f'exit {proc.returncode}'}")

    def _present(self) -> bool:
        check = ["image", "exists"] if self.kind == "podman" else ["image", "inspect"]
        return subprocess.run([self.runtime, *check, self.image], capture_output=True, timeout=60).returncode == 0

    # -- the run -----------------------------------------------------------------------

    def argv(self, command: list[str], job_env: dict[str, str], work: Path, mounts: list[str],
             memory: int | None, gpus: list[str], readonly: list[str] = (), pids: int | None = None) -> list[str]:
        """``podman run …`` for ``command``. The job's own variables (``job_env``) go in by name,
        read from the client's environment, so their values never show in ``ps``. ``pids``: the processes
        and threads it may hold (the server's ``pids_max``); None leaves the runtime's own default."""
        argv = [self.runtime, "run", "--name", self.name, "--init", "--network=host",
                "--label", f"trainyard.attempt={self.name}", "-w", str(work),
                *self.user(), *self.groups(), *self.confined()]
        if self.kind == "podman":
            argv.append("--sig-proxy=true")
        for path in _distinct(mounts):
            argv += ["-v", f"{path}:{path}"]
        for path in _distinct(list(readonly)):
            argv += ["-v", f"{path}:{path}:ro"]
        argv += ["-v", f"{Path(trainyard.__file__).parent}:{TRAINYARD_MOUNT}/trainyard:ro"]
        if memory:
            argv += [f"--memory={memory}", f"--memory-swap={memory}"]
        if self.cpus:
            argv.append(f"--cpus={self.cpus:g}")
        if pids:
            argv.append(f"--pids-limit={pids}")
        if gpus:
            if self.kind == "docker":
                argv += ["--gpus", "device=" + ",".join(gpus)]
            else:  # podman: CDI names (`nvidia-ctk cdi generate`)
                for g in gpus:
                    argv += ["--device", f"nvidia.com/gpu={g}"]
        for key in sorted(set(job_env) - _HOST_ONLY - {"CUDA_VISIBLE_DEVICES"}):
            argv += ["-e", f"{key}={job_env[key]}" if self.run_as and client_reads(key) else key]
        pythonpath = os.pathsep.join(p for p in (job_env.get("PYTHONPATH"), TRAINYARD_MOUNT) if p)
        # the container sees only its own GPUs, numbered from 0
        argv += ["-e", f"PYTHONPATH={pythonpath}",
                 "-e", "CUDA_VISIBLE_DEVICES=" + ",".join(str(i) for i in range(len(gpus)))]
        return [*argv, self.image, *self._inside(command)]

    @staticmethod
    def _inside(command: list[str]) -> list[str]:
        # a string command was made `<host bash> -c …`: the image has its own shell, at /bin/sh
        if len(command) >= 2 and command[1] == "-c" and os.path.basename(command[0]) in ("bash", "sh"):
            return ["/bin/sh", *command[1:]]
        return command

    # -- after the run -------------------------------------------------------------------

    def state(self) -> dict:
        """The runtime's ``State`` of the container (``Status``, ``OOMKilled``, ``ExitCode``); {} if unknown."""
        import json

        try:
            out = subprocess.run([self.runtime, "inspect", "--format", "{{json .State}}", self.name],
                                 capture_output=True, text=True, timeout=60)
            return json.loads(out.stdout) if out.returncode == 0 else {}
        except (OSError, subprocess.TimeoutExpired, ValueError):
            return {}

    def pid(self) -> int | None:
        """The host pid of the container's first process (its init), once it runs; else None.

        What the resource sampler samples (with its descendants): the job's own processes, not the
        runtime's client in the launcher's tree."""
        try:
            out = subprocess.run([self.runtime, "inspect", "--format", "{{.State.Pid}}", self.name],
                                 capture_output=True, text=True, timeout=30)
            pid = int(out.stdout.strip()) if out.returncode == 0 else 0
        except (OSError, subprocess.TimeoutExpired, ValueError):
            return None
        return pid if pid > 0 else None

    def remove(self) -> None:
        """Stop and remove the container now; nothing is left in ``podman ps -a``. Idempotent."""
        remove(self.runtime, self.name)


def start(config, attempt_dir: Path, inputs: dict[str, str], command: list[str], work: Path, log: Path,
          cancelled, readonly: list[str] = ()) -> tuple[Container, list[str]]:  # noqa: ANN001
    """The replica's container, its image pulled, and the argv that runs ``command`` in it. ``readonly``:
    folders mounted read-only (the node's cached inputs, shared with the next job on the node).

    Raises :class:`PullError` when the image cannot be had, ``SetupError`` for a secret it may not pass.
    """
    from trainyard.launch.prepare import SetupError, build_env

    box = Container(config.container, container_name(config.attempt_id, config.replica), config.run_as)
    if config.run_as and (named := sorted(k for k in config.secrets or () if client_reads(k))):
        # its value would go on root's client's command line, or in its environment
        raise SetupError(f"secret {', '.join(named)}: a name the container runtime reads itself; use another")
    box.pull(log, cancelled)
    job_env = build_env(config, attempt_dir, inputs, None, base={})  # the job's own variables only
    metrics = Path(job_env[envvars.METRICS_FILE])
    metrics.touch()  # mounted as a file: it must exist first
    mounts = [str(work), job_env[envvars.OUTPUT_DIR], job_env[envvars.CHECKPOINT_DIR], str(metrics)]
    # an input is read, not written: a host path named as one is no way for the job to change the host
    given = [p for p in inputs.values() if os.path.isabs(p) and os.path.dirname(p) not in readonly
             and not Path(p).is_relative_to(work)]
    if envvars.CHECKPOINT_SOCKET in job_env:  # trainyard.checkpoint_saved() in the container reaches the launcher
        mounts.append(os.path.dirname(job_env[envvars.CHECKPOINT_SOCKET]))
    return box, box.argv(command, job_env, work, mounts, config.memory_limit, list(config.gpus),
                         [*readonly, *given], config.pids_max)


def outcome(box: Container, exit_code: int | None, reason: str, message: str, memory: int | None,
            log: Path, stopped: bool) -> tuple[str, str]:
    """The replica's reason once the runtime client has exited, read from the container; then it is removed.

    - never started (``created``), or the runtime's own error (125): ``SetupFailed`` with the runtime's
      words, as a command that cannot start on the host;
    - stopped at its memory limit: ``OOMKilled``. The runtime's flag where it knows (cgroup v2, docker);
      podman on cgroup v1 does not tell, so there a SIGKILL (137) nobody here sent, under a limit, is one.
    """
    from trainyard.launch import reasons

    try:
        if stopped or not reason.startswith("Error"):
            return reason, message
        state = box.state()
        if state.get("Status") == "created" or exit_code == 125:
            hint = runtime_failure_hint(log)
            text = f"{box.kind} could not start the container" + (f": {hint}" if hint else "")
            _append(log, text)
            return reasons.SETUP, text
        if state.get("OOMKilled") is True or (memory and exit_code == 137):
            text = f"the container runtime stopped it at its memory limit of {(memory or 0) / (1 << 20):.0f} MiB"
            _append(log, text)
            return reasons.OOM, text
        return reason, message
    finally:
        box.remove()


def remove(runtime: str, name: str) -> None:
    args = ["rm", "-f", "-t", "0", name] if Path(runtime).name == "podman" else ["rm", "-f", name]
    try:
        subprocess.run([runtime, *args], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        pass


def runtime_failure_hint(log: Path) -> str | None:
    """What to do about a runtime that failed to start the container at all (exit 125-127), from its words."""
    try:
        with open(log, "rb") as f:
            f.seek(max(0, os.path.getsize(log) - 4096))
            tail = f.read().decode(errors="replace")
    except OSError:
        return None
    lines = [x for x in tail.splitlines() if x.startswith("Error")]
    said = lines[-1] if lines else None
    for needle, hint in HINTS:
        if needle in (said or tail):
            return f"{hint} (it said: {said})" if said else hint
    return said


def _distinct(paths: list[str]) -> list[str]:
    seen: list[str] = []
    for p in paths:
        if p and p not in seen:
            seen.append(p)
    return seen


def _append(log: Path, text: str) -> None:
    with open(log, "a", encoding="utf-8") as f:
        f.write(text.rstrip("\n") + "\n")
