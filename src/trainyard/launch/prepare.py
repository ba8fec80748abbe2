"""Getting an attempt ready to run: work dir, inputs, and the command's environment.

Every failure here is a :class:`SetupError`, which ends the attempt with
reason ``SetupFailed`` and the error's text as the message.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Iterator

from trainyard import envvars
from trainyard.launch import untar
from trainyard.artifact_paths import check_artifact_path, under_url
from trainyard.launch.files import file_lock, local_path


class SetupError(Exception):
    """The snapshot, the environment or an input could not be prepared."""


# -- work dir ------------------------------------------------------------------


def prepare_workdir(snapshot: str | None, work: Path, dirs=None) -> Path:  # noqa: ANN001
    """The work dir: the snapshot extracted, or an empty folder (from ``dirs``, a launch.emptydirs.Pool)."""
    if dirs is not None:
        dirs.make(work)
    else:
        work.mkdir(parents=True, exist_ok=True)
    if snapshot:
        try:
            with _open_url(snapshot) as f:
                safe_extract(f, work)
        except SetupError:
            raise
        except Exception as e:
            raise SetupError(f"snapshot {snapshot}: {e}") from e
    return work


def _open_url(url: str):
    path = local_path(url)
    if path is not None:
        return open(path, "rb")
    import fsspec

    return fsspec.open(url, "rb").open()


def safe_extract(fileobj, dest: Path) -> None:  # noqa: ANN001
    """Extract a tar.gz into ``dest``, refusing anything that would land outside it (:mod:`.untar`)."""
    try:
        untar.extract(fileobj, dest)
    except untar.UnsafeArchive as e:
        raise SetupError(f"snapshot: {e}") from None


# -- inputs --------------------------------------------------------------------


def resolve_inputs(inputs: dict[str, str], cache: Path, work: Path, as_job=None,  # noqa: ANN001
                   store_url: str | None = None) -> dict[str, str]:
    """NAME -> local path. Local inputs are used in place; URLs are fetched once into ``cache``: those under
    ``store_url`` (vetted by the server) with the launcher's credentials, others as the job (``as_job``, a
    :class:`~trainyard.launch.fetch_as_job.JobFetch`) where one is given. With its account (a RunAs), what is
    fetched is that account's alone: keyed by its uid, readable by its group only; and an input in a local store,
    which is root's alone, is copied into the cache as a remote store's is fetched."""
    account = None if as_job is None else as_job.account
    resolved = {}
    for name, url in inputs.items():
        path = local_path(url, base=work)
        key = None if account is None or path is None or not store_url else under_url(url, store_url)
        if key is not None:
            try:
                path = copy_stored(url, key, store_url, cache, account)
            except (OSError, ValueError, SetupError) as e:
                raise SetupError(f"input {name!r}: cannot copy {url} from the store: {e}") from e
        elif path is None:
            # (a launch.json of before store_url: as the launcher fetched then)
            job = None if as_job is None or not store_url or under_url(url, store_url) is not None else as_job
            try:
                path = fetch_input(url, cache, account, job)
            except Exception as e:
                raise SetupError(f"input {name!r}: cannot fetch {url}: {e}") from e
        elif not path.exists():
            raise SetupError(f"input {name!r}: {url} not found")
        resolved[name] = str(path)
    return resolved


def fetch_input(url: str, cache: Path, account=None, as_job=None) -> Path:  # noqa: ANN001
    """Download ``url`` (a file or a folder) to ``cache/<key>/<basename>``, once per content.

    The key hashes the URL and the content's tag (ETags on S3, else sizes and times; see
    :func:`trainyard.artifacts.transfer.content_tag`): a second job on this node with the same
    input finds it here after one listing request, and a changed object is fetched again.
    Concurrent attempts wait on one lock; the download lands in a temporary folder that is
    renamed into place, so a half-fetched input is never seen. Files stream to disk. The entry
    is made read-only before it appears (:mod:`trainyard.launch.readonly`): jobs use it in place.
    ``as_job``: the lookup and the download are the job's (:mod:`trainyard.launch.fetch_as_job`).
    """
    if "::" in url:  # a chain may end in the node's files, which this root process would copy where all read them
        raise SetupError("a chain of URLs (a::b) is not fetched: give a path or a remote store's URL")
    name = url.rstrip("/").rsplit("/", 1)[-1] or "input"
    if as_job is not None:
        return as_job.fetch(url, lambda tag, fill: _entry(cache, f"{url}\0{tag}", name, account, fill))

    from trainyard.artifacts.transfer import content_tag

    import fsspec

    fs, remote = fsspec.core.url_to_fs(url)
    protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    if {"file", "local"} & set(protocols):
        raise SetupError("a local file is read in place, by the job: give its path")
    if not fs.exists(remote):
        raise SetupError("not found")

    def fill(tmp: Path) -> None:
        if fs.isdir(remote):
            fs.get(remote.rstrip("/") + "/", str(tmp / name), recursive=True)
        else:
            fs.get_file(remote, str(tmp / name))

    return _entry(cache, f"{url}\0{content_tag(fs, remote)}", name, account, fill)


def copy_stored(url: str, key: str, store_url: str, cache: Path, account) -> Path:  # noqa: ANN001
    """What ``url`` names in a local store (``key`` under ``store_url``, vetted by the server) copied to
    ``cache/<key>/<basename>`` for ``account``, once per content (sizes and times, as :func:`fetch_input` keys a
    store without ETags). The key is checked once decoded as :func:`local_path` decodes a URL: root copies it, and
    ``%2e%2e`` must not become a ``..`` the server never saw."""
    from urllib.parse import unquote

    path = local_path(store_url) / check_artifact_path(unquote(key) if "://" in url else key)
    if not os.path.lexists(path):
        raise SetupError("not found")
    tag = sorted((str(p.relative_to(path)), st.st_size, st.st_mtime_ns) for p, st in _plain_tree(path))
    return _entry(cache, f"{url}\0{tag}", path.name or "input", account,
                  lambda tmp: _copy_plain(path, tmp / (path.name or "input")))


def _plain_tree(top: Path) -> Iterator[tuple[Path, os.stat_result]]:
    """``(path, lstat)`` of ``top`` and, for a folder, of all under it, parents first; OSError on a link or anything
    else not a file or a folder, which root would otherwise copy (or follow) to where an account reads it."""
    def checked(p: Path) -> tuple[Path, os.stat_result]:
        st = os.lstat(p)
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
            raise OSError(f"{p} is not a regular file or a folder")
        return p, st

    def fail(e: OSError) -> None:
        raise e

    yield (first := checked(top))
    if stat.S_ISDIR(first[1].st_mode):
        for root, dirs, files in os.walk(top, onerror=fail):
            for n in [*dirs, *files]:
                yield checked(Path(root, n))


def _copy_plain(src: Path, dest: Path) -> None:
    """``src`` copied to ``dest`` as regular files in folders made here, never through a link."""
    import shutil

    for p, st in _plain_tree(src):
        to = dest / p.relative_to(src)
        if stat.S_ISDIR(st.st_mode):
            to.mkdir()
            continue
        with os.fdopen(os.open(p, os.O_RDONLY | os.O_NOFOLLOW), "rb") as f, open(to, "xb") as out:
            shutil.copyfileobj(f, out, 1 << 20)


def _entry(cache: Path, what: str, name: str, account, fill) -> Path:  # noqa: ANN001
    """``cache/<key>/<name>``, made by ``fill(folder)`` unless there already; an account's own when one is given."""
    import hashlib
    import shutil

    from trainyard.launch import readonly

    if account is not None:
        what += f"\0uid-{account.uid}"
    key = hashlib.sha256(what.encode()).hexdigest()[:16]
    final = cache / key
    if (final / name).exists():
        return final / name
    with file_lock(cache / f"{key}.lock"):
        if (final / name).exists():
            return final / name
        tmp = cache / f".{key}.{os.getpid()}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        cache.mkdir(parents=True, exist_ok=True)
        tmp.mkdir(0o700 if account is not None else 0o777)  # an account's: no one else reads it as it comes
        try:
            fill(tmp)
            readonly.freeze(tmp)
            if account is not None:
                readonly.confine(tmp, account.gid)
            readonly.remove(final)
            os.replace(tmp, final)
        finally:
            readonly.remove(tmp)
    return final / name


def cache_entries(inputs: dict[str, str], cache: Path) -> list[str]:
    """The cache folders (``cache/<key>``) the resolved ``inputs`` were fetched into: what a job must
    see read-only. Inputs given as local paths are the user's own and stay as they are."""
    entries = []
    for path in inputs.values():
        parent = Path(path).parent
        if parent.parent == cache and str(parent) not in entries:
            entries.append(str(parent))
    return entries


# -- environment ---------------------------------------------------------------


# the server's bearer token (`trainyard server`) and the CLI/SDK's: launchers forked by a server inherit them
INHERITED_SECRETS = (envvars.SERVER_TOKEN, envvars.TOKEN)
# The object store's credentials, which the launcher needs (outputs, checkpoints) and a job run as another
# account must not see (the launcher's own environment is readable by its account only): every variable from which
# botocore, google-auth, azure-identity or fsspec's own config find a key, a token, a file holding one or a place
# that hands one out. AWS_* goes whole, since each new credential provider is a new AWS_ name, less what only says
# where the store is and how to reach it.
STORE_SECRET_PREFIXES = ("AWS_", "AZURE_", "GCE_METADATA_", "FSSPEC_")
STORE_SECRET_NAMES = frozenset({"GOOGLE_APPLICATION_CREDENTIALS", "CLOUDSDK_CONFIG"})
STORE_SETTINGS = frozenset({"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_CA_BUNDLE", "AWS_USE_FIPS_ENDPOINT",
                            "AWS_USE_DUALSTACK_ENDPOINT"})


def store_secret(name: str) -> bool:
    """Whether ``name`` may carry the node's object-store credentials (see :data:`STORE_SECRET_PREFIXES`)."""
    if name in STORE_SETTINGS or name.startswith("AWS_ENDPOINT_URL"):
        return False
    return name in STORE_SECRET_NAMES or name.startswith(STORE_SECRET_PREFIXES)


def env_name(name: str) -> str:
    """``TRAINYARD_INPUT_<NAME>``: upper case, anything not a letter or digit becomes ``_``."""
    return "".join(c if c.isascii() and c.isalnum() else "_" for c in name.upper())


def checkpoint_folder(config, attempt_dir: Path) -> Path:
    return Path(config.checkpoint_dir) if config.checkpoint_dir else attempt_dir / "checkpoints"


def job_env(config, base: dict[str, str] | None = None) -> dict[str, str]:  # noqa: ANN001
    """The launcher's environment (or ``base``) without its tokens (and the store's keys, for an account), with
    ``config.env`` over it: what a job has before the launcher's own ``TRAINYARD_*``."""
    env = dict(os.environ if base is None else base)
    account = bool(getattr(config, "run_as", None))
    env = {k: v for k, v in env.items() if k not in INHERITED_SECRETS and not (account and store_secret(k))}
    env.update({str(k): str(v) for k, v in config.env.items()})
    return env


def build_env(
    config, attempt_dir: Path, inputs: dict[str, str], venv: Path | None = None,
    base: dict[str, str] | None = None, dirs=None,  # noqa: ANN001
) -> dict[str, str]:
    """The command's environment.

    Precedence, lowest first: the launcher's own environment, ``config.env``,
    then what the launcher sets itself (``TRAINYARD_*``, ``CUDA_VISIBLE_DEVICES``, ``CUDA_DEVICE_ORDER``).
    Tokens the launcher inherited from the server are not passed on: the job
    runs user code, which must not act as the server or as its users.
    """
    env = job_env(config, base)
    outputs = attempt_dir / "outputs"
    checkpoints = checkpoint_folder(config, attempt_dir)
    for d in (outputs, checkpoints):
        if dirs is not None:  # a launch.emptydirs.Pool
            dirs.make(d)
        else:
            d.mkdir(parents=True, exist_ok=True)
    env.update({
        envvars.JOB_ID: str(config.job_id),
        envvars.ATTEMPT: str(config.attempt),
        envvars.OUTPUT_DIR: str(outputs),
        envvars.CHECKPOINT_DIR: str(checkpoints),
        envvars.METRICS_FILE: str(attempt_dir / "metrics.jsonl"),
        # Always set, so a job that asked for no GPU sees none, not all of them.
        "CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in config.gpus),
        # the GPU ids are NVML's, which counts in PCI bus order; CUDA counts the fastest first unless told (as Slurm
        # tells it), and on a node of mixed GPUs would give the job others than its own
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "PYTHONUNBUFFERED": "1",
    })
    for name, path in inputs.items():
        env[envvars.INPUT_PREFIX + env_name(name)] = path
    if venv is not None:
        env["VIRTUAL_ENV"] = str(venv)
        env["PATH"] = os.pathsep.join(p for p in (str(venv / "bin"), env.get("PATH")) if p)
        env.pop("PYTHONHOME", None)
    return env
