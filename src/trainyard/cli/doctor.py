"""`trainyard doctor`: what this machine and its server offer, each finding ok / warning / error with the fix."""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Literal, Optional
from urllib.parse import urlparse

import typer

import trainyard
from trainyard.cli.common import console

Level = Literal["ok", "warning", "error"]
STYLE = {"ok": "green", "warning": "yellow", "error": "red"}
GiB = 2**30


@dataclass
class Finding:
    check: str
    level: Level
    found: str
    fix: str = ""


def doctor(
    db: Annotated[Optional[str], typer.Option("--db", help="also check this database URL (PostgreSQL)")] = None,
    ray_address: Annotated[Optional[str], typer.Option(
        "--ray-address", envvar="RAY_ADDRESS", help="also check this Ray cluster (default $RAY_ADDRESS)")] = None,
) -> None:
    """Check what jobs need here: server, engine, nodes, GPUs, containers, cgroups, cpu, disk, the front (nginx).

    Also PostgreSQL (--db) and Ray (--ray-address or $RAY_ADDRESS) when given. Each line is ok, warning
    or error with the fix; exits 1 on any error."""
    from rich.markup import escape

    findings: list[Finding] = []
    nodes = _server(findings)
    key = _secrets_key if _logged_in() is None else _remote_secrets_key
    checks: list[Callable[[], Finding]] = [_nvml, _containers, lambda: _cgroups(nodes), _cpu, _gpu_devices,
                                           _accounts, _process_list, _disk, key, _front]
    if db:
        checks.append(lambda: _database(db))
    if ray_address:
        checks.append(lambda: _ray(ray_address))
    findings += [check() for check in checks]
    if nodes is not None and (users := _users()) is not None:
        findings.append(users)
    width = max(len(f.check) for f in findings)
    for f in findings:
        line = f"[{STYLE[f.level]}]{f.level:<7}[/] {f.check:<{width}}  {escape(f.found)}"
        if f.fix and f.level != "ok":
            line += f"\n        {'':<{width}}  [dim]fix:[/] {escape(f.fix)}"
        console.print(line, highlight=False, soft_wrap=True)  # not wrapped: findings are grepped
    raise typer.Exit(1 if any(f.level == "error" for f in findings) else 0)


def _server(out: list[Finding]) -> list | None:
    """Server, engine and nodes; the nodes, or None when the server could not be asked."""
    from trainyard.config import server_url
    from trainyard.errors import ServerUnavailable, TrainyardError
    from trainyard.sdk.client import Client
    from trainyard.sdk.discovery import resolve_server

    explicit = server_url()
    try:
        url = resolve_server(None, autostart=False)
    except ServerUnavailable:
        out.append(Finding("server", "warning", "no local server is running",
                           "one starts by itself on the first `trainyard run`; or run `trainyard server`"))
        return None
    where = "TRAINYARD_SERVER" if explicit else _logged_in() or "the home's server.json"
    try:
        with Client(url, timeout=5) as c:
            health = c.health()
            version = health.get("version", "?")
            out.append(Finding("server", "ok", f"{url} (from {where}): trainyard {version}, {health.get('role')}"))
            if version != trainyard.__version__:
                out[-1] = Finding("server", "warning", f"{url}: trainyard {version}, this client is "
                                  f"{trainyard.__version__}", "install the same version on both sides")
            out.append(Finding("engine", "ok", str(health.get("engine"))))
            nodes = c.nodes()
    except ServerUnavailable as e:
        out.append(Finding("server", "error", f"{url} (from {where}) does not answer: {e.message}",
                           "start it with `trainyard server`, or set TRAINYARD_SERVER to a server that runs"
                           if explicit else "run `trainyard server stop`, then any command starts a fresh one"))
        return None
    except TrainyardError as e:
        out.append(Finding("access", "error", e.message, "set TRAINYARD_TOKEN to a token this server accepts"))
        return None
    if not nodes:
        out.append(Finding("nodes", "error", "the engine reports no nodes: no job can run",
                           "start the engine's workers (for Ray: `ray start --address …` on each machine)"))
        return nodes
    gpus = sum(n.gpu for n in nodes)
    kinds = sorted({n.gpu_type for n in nodes if n.gpu_type})
    out.append(Finding("nodes", "ok", f"{len(nodes)} node(s), {sum(n.cpu for n in nodes):g} cores, "
                       f"{gpus} GPU(s)" + (f" ({', '.join(kinds)})" if kinds else "")))
    return nodes


def _logged_in() -> str | None:
    """Where `trainyard login` saved the server this client uses (unless TRAINYARD_SERVER names one), or None."""
    from trainyard.config import home, server_url
    from trainyard.home import LOGIN_FILE, read_login

    return f"`trainyard login`, {home() / LOGIN_FILE}" if not server_url() and read_login() else None


def _remote_secrets_key() -> Finding:
    return Finding("secrets", "ok", "the key secrets are sealed with is the server's, in its home on its machine: "
                   "trainyard doctor there checks it")


def _nvml() -> Finding:
    try:
        import pynvml
    except ImportError:
        return Finding("gpus here", "warning", "nvidia-ml-py is not installed", "pip install nvidia-ml-py")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        if isinstance(e, pynvml.NVMLError_LibraryNotFound):
            return Finding("gpus here", "ok", "no NVIDIA driver on this machine: CPU jobs only here")
        return Finding("gpus here", "warning", f"NVML did not start: {e}",
                       "check the NVIDIA driver (`nvidia-smi`); a driver/library mismatch needs a reboot")
    try:
        names = [pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))
                 for i in range(pynvml.nvmlDeviceGetCount())]
    finally:
        pynvml.nvmlShutdown()
    names = [n.decode() if isinstance(n, bytes) else n for n in names]
    return Finding("gpus here", "ok", f"{len(names)} GPU(s) through NVML: {', '.join(sorted(set(names))) or 'none'}")


def _containers() -> Finding:
    found = [name for name in ("docker", "podman") if shutil.which(name)]
    if found:
        return Finding("containers", "ok", f"{', '.join(found)} on PATH: jobs may set `image`")
    return Finding("containers", "warning", "neither docker nor podman is on PATH: jobs with `image` cannot run here",
                   "install docker or podman, or leave `image` out and use `env.pip`")


def _front() -> Finding:
    from trainyard.errors import TrainyardError
    from trainyard.front.nginx import find_nginx

    try:
        binary, modules = find_nginx()
    except TrainyardError as e:  # it says how to install it: an option, not a need (the server serves /serve/ too)
        return Finding("front", "warning", e.message)
    return Finding("front", "ok", f"{binary} with its Lua module in {modules}: `trainyard server --front nginx` "
                                  "can put it in front")


def _cgroups(nodes: list | None) -> Finding:
    if nodes:
        kinds = sorted({n.memory_enforcement for n in nodes})
        where = "the nodes"
    else:
        from trainyard.launch import cgroup

        kinds, where = [cgroup.detect()], "this machine"
    if "sampled" in kinds:
        return Finding("cgroups", "warning", f"{where}: memory limits are sampled ({', '.join(kinds)}), "
                       "a fast allocation can pass them", "run the server as root or with a delegated cgroup "
                       "(systemd `Delegate=yes`) so each job gets a hard limit")
    return Finding("cgroups", "ok", f"{where}: memory limits are hard limits ({', '.join(kinds)})")


def _cpu(root: str | None = None) -> Finding:
    """Whether a job's cores are weighed here (launch.cpulimit): the nodes do not report it, this machine does."""
    from trainyard.launch import cpulimit

    mode = cpulimit.detect(root or cpulimit.MOUNT)
    if mode is None:
        return Finding("cpu", "warning", "this machine: no usable cpu cgroup, so a job may take more cores than "
                       "its resources.cpu from the others", "run the server as root, or with a delegated cgroup v2 "
                       "tree that has the cpu controller (systemd `Delegate=yes`)")
    return Finding("cpu", "ok", f"this machine: a job gets its resources.cpu share of busy cores ({mode} weights "
                   "where it joins a memory or pids group; a hard cap with the server's cpu_limit), and "
                   + cpulimit.parent_said(root or cpulimit.MOUNT, mode))


def _gpu_devices(root: str | None = None, dev: str | None = None) -> Finding:
    """Whether a job can open only its own GPUs here (launch.devices): this machine's device files and cgroups."""
    from trainyard.launch import devices

    gpus, root = devices.node_gpus(dev or devices.DEV), root or devices.MOUNT
    if not gpus:
        return Finding("gpu devices", "ok", "this machine: no NVIDIA GPU device files, nothing to fence")
    mode = devices.detect(root)
    if mode is not None:
        how = "a devices cgroup" if mode == devices.V1 else "a BPF device program on its cgroup"
        found = f"this machine: {len(gpus)} GPU(s); a job can open only its own GPUs' device files ({mode}: {how}"
        if devices.minors() is not None:
            return Finding("gpu devices", "ok", found + ", each found by NVML's minor number)")
        return Finding("gpu devices", "warning", found + "), but NVML does not load: GPU N is taken to be "
                       "/dev/nvidiaN, so where the driver numbered its device files otherwise a job gets another's",
                       "make the NVIDIA driver's libnvidia-ml.so.1 loadable on this machine (ldconfig)")
    return Finding("gpu devices", "warning", f"this machine: {len(gpus)} GPU(s), named to a job by "
                   "CUDA_VISIBLE_DEVICES only: a job that unsets it or opens /dev/nvidiaN uses the others' "
                   "(no cgroup v1 devices controller or cgroup v2 group with BPF that is ours to use)",
                   "run the server as root (with CAP_SYS_ADMIN and CAP_NET_ADMIN on cgroup v2), or run GPU jobs "
                   "in an image (the runtime gives a job only its GPUs)")


def _accounts() -> Finding:
    from trainyard.launch.runas import node_problem

    if problem := node_problem():
        return Finding("accounts", "warning", f"jobs of users made with --os-user fail here: {problem}",
                       "sysctl -w fs.protected_hardlinks=1 (and in /etc/sysctl.d to keep it)")
    return Finding("accounts", "ok", "jobs may run as the accounts of users made with --os-user")


def _users() -> Finding | None:
    """For an admin of a server with users: whose jobs no account of their own keeps apart; None for anyone else."""
    import pwd

    from trainyard.errors import TrainyardError
    from trainyard.sdk.client import Client
    from trainyard.sdk.discovery import resolve_server

    def uid_of(account: str) -> int | None:
        try:
            return pwd.getpwnam(account).pw_uid
        except KeyError:
            return None

    try:
        with Client(resolve_server(None, autostart=False), timeout=5) as c:
            users = c.identity.users()
    except TrainyardError:  # no users on that server, or not an admin asking
        return None
    return _user_accounts(users, uid_of) if users else None


def _user_accounts(users: list, uid_of: Callable[[str], int | None]) -> Finding:
    """Users who submit (active, a member or maintainer of a team; not admins) whose jobs run as root or the
    server's account, or share an account."""
    active = [u for u in users if not u.disabled and not u.admin and {"member", "maintainer"} & set(u.teams.values())]
    by_account: dict[object, list[str]] = {}
    for u in active:
        if u.os_user:
            uid = uid_of(u.os_user)
            by_account.setdefault(u.os_user if uid is None else uid, []).append(u.name)
    named = {u.name: u.os_user for u in active}
    problems = [f"{', '.join(names)} share account {named[names[0]]}"
                for names in by_account.values() if len(names) > 1]
    if rooted := [u.name for u in active if u.os_user and uid_of(u.os_user) == 0]:
        problems.append(f"{', '.join(rooted)} run as root")
    if bare := [u.name for u in active if not u.os_user]:
        problems.append(f"{', '.join(bare)} have no account: their jobs run as the server's own (root on a root "
                        "server)")
    if not problems:
        return Finding("users", "ok", "each user's jobs run as an account of its own")
    return Finding("users", "warning", "jobs these users' accounts do not keep apart read each other's secrets and "
                   "files: " + "; ".join(problems),
                   "give each user who submits an account of its own: a user made with --os-user ACCOUNT "
                   "(disable the old one), on a server run as root")


def _process_list(mounts: str = "/proc/mounts") -> Finding:
    """Whether one account's jobs see the others' command lines (their params, their job ids) in /proc."""
    try:
        options = [line.split()[3] for line in open(mounts) if line.split()[1:3] == ["/proc", "proc"]]
    except (OSError, IndexError):
        return Finding("processes", "ok", "no /proc here to read others' command lines from")
    hidden = any(o in ("hidepid=1", "hidepid=2", "hidepid=noaccess", "hidepid=invisible")
                 for opts in options for o in opts.split(","))
    if hidden or os.geteuid() != 0:  # not root: every job runs as the server's own account anyway
        return Finding("processes", "ok", "jobs see only their own account's processes" if hidden else
                       "jobs all run as this server's account: /proc hides nothing from them, nor needs to")
    return Finding("processes", "warning", "/proc shows every process's command line to every account: jobs of "
                   "users made with --os-user see other teams' commands and params",
                   "mount -o remount,hidepid=invisible /proc (and in /etc/fstab to keep it)")


def _disk() -> Finding:
    from trainyard.config import home

    path = home()
    while not path.exists() and path != path.parent:
        path = path.parent
    free = shutil.disk_usage(path).free
    text = f"{free / GiB:.1f} GiB free under {home()}"
    if free < GiB:
        return Finding("disk", "error", text, "free space there, or set TRAINYARD_HOME to a bigger disk")
    if free < 5 * GiB:
        return Finding("disk", "warning", text, "logs, snapshots and virtualenvs live there: free some space")
    return Finding("disk", "ok", text)


def _secrets_key() -> Finding:
    """The home's key for secrets at rest (services/secret_box.py): private, and keys only."""
    import stat

    from trainyard.config import home

    path = home() / "secrets.key"
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
        lines = [x for x in path.read_bytes().splitlines() if x.strip() and not x.startswith(b"#")]
    except FileNotFoundError:
        return Finding("secrets", "ok", f"no key yet: {path} is made (0600) with the first secret")
    except OSError as e:
        return Finding("secrets", "error", f"{path}: {e.strerror or e}", "the server's user must read its home")
    if mode & 0o077:
        return Finding("secrets", "error", f"{path} is readable by others (mode {mode:o}): whoever reads it "
                       "opens every secret in the database", f"chmod 600 {path}")
    try:
        from cryptography.fernet import Fernet

        for line in lines:
            Fernet(line.strip())
    except ValueError:
        return Finding("secrets", "error", f"{path} holds a line that is not a Fernet key",
                       "one key a line, the newest first (see `trainyard secret rotate --help`)")
    except ImportError:
        return Finding("secrets", "warning", "cryptography is not installed here", "pip install cryptography")
    if not lines:
        return Finding("secrets", "error", f"{path} holds no key", "remove it: the server makes a new one "
                       "(secrets sealed with the old key are then lost)")
    extra = f"; {len(lines) - 1} older key(s) kept for rotation" if len(lines) > 1 else ""
    return Finding("secrets", "ok", f"{path}: private, {len(lines)} key(s){extra}")


def _database(url: str) -> Finding:
    import sqlalchemy

    try:
        engine = sqlalchemy.create_engine(url, connect_args={"connect_timeout": 5} if url.startswith("postgres") else {})
        with engine.connect() as conn:
            version = conn.execute(sqlalchemy.text("select version()" if url.startswith("postgres")
                                                   else "select sqlite_version()")).scalar()
        engine.dispose()
    except Exception as e:  # noqa: BLE001 - any driver's failure is a finding, not a crash
        return Finding("database", "error", f"cannot connect: {str(e).splitlines()[0]}",
                       "check the URL, that the server runs and accepts this user (pg_hba.conf)")
    return Finding("database", "ok", str(version).split(" on ")[0])


def _ray(address: str) -> Finding:
    if address == "auto":  # Ray's own shorthand: the cluster this machine last started or joined
        try:
            address = open("/tmp/ray/ray_current_cluster").read().strip()
        except OSError:
            return Finding("ray", "error", "RAY_ADDRESS=auto, but no Ray cluster runs on this machine",
                           "start one with `ray start --head`, or set RAY_ADDRESS to the head's host:port")
    parsed = urlparse(address if "://" in address else f"ray-gcs://{address}")
    port = parsed.port or (10001 if parsed.scheme == "ray" else 6379)
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1", port), timeout=5):
            pass
    except OSError as e:
        return Finding("ray", "error", f"{address}: {e.strerror or e}",
                       "start the head (`ray start --head`) or fix RAY_ADDRESS / --ray-address")
    return Finding("ray", "ok", f"{address} accepts connections")
