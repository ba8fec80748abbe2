"""Step inputs, outputs and cache keys: what a step gets, what it made, and when it need not run.

- An input from another step is that step's output folder or file in the
  artifact store (plus a path inside it); from a foreach step, a folder with
  one entry per item, ``0`` … ``N-1`` (symlinks on a local store, copies on a
  remote one). ``{value: ...}`` is written once, by content hash. A path or
  URL is passed as it is.
- An output is identified by content hash: a file by its own sha256, a folder
  by the hash of its files' paths and hashes.
- A step's cache key hashes its resolved job spec (less what only affects
  scheduling), its code snapshot's digest and its inputs' digests.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable

from trainyard.artifact_paths import check_sub_path
from trainyard.artifacts.store import ArtifactStore
from trainyard.launch.files import local_path
from trainyard.spec.job import JobSpec
from trainyard.spec.submitted import STORED
from trainyard.spec.pipeline_records import PipelineArtifact
from trainyard.spec.records import ArtifactInfo

# fields that change where and when a step runs, not what it computes
NOT_HASHED = {"name", "priority", "queue", "retry", "timeout", "grace_period", "resources", "workdir", "inputs",
              "placement", "preemptible"}
FINGERPRINT_ENTRIES = 20000  # of a folder input walked to see when it changes: files and folders


class MissingInput(Exception):
    """An input's source has no artifact (it should have: its step succeeded)."""


def sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def resolve_input(store: ArtifactStore, run_id: str, step: str, name: str, ref: dict[str, Any],
                  produced: dict[str, dict[str, str]], arts: dict[str, PipelineArtifact],
                  files_of: Callable[[str], list[tuple[ArtifactInfo, str]]]) -> dict[str, Any]:
    """``ref`` with ``url`` (what the job gets) and ``digest`` (what the cache key sees) filled in.

    ``produced`` is step name -> output -> artifact id; ``arts`` the artifacts by id;
    ``files_of`` a job's uploaded files, for the digest of a path inside an output.
    """
    kind = ref["kind"]
    if kind == "value":
        return {**ref, "url": put_value(store, ref["value"]), "digest": sha(ref["value"])}
    if kind == "path":
        return {**ref, "digest": fingerprint(ref["url"])}
    sources = []
    for inst in ref["from"]:
        art_id = produced.get(inst, {}).get(ref["output"])
        if art_id is None or art_id not in arts:
            raise MissingInput(f"input {name!r}: step {inst} has no output {ref['output']!r}")
        sources.append(arts[art_id])
    sub = ref.get("subpath") or ""
    try:  # checked when the run was made; a run stored before that was is checked here, before it is appended
        check_sub_path(sub)
    except ValueError as e:
        raise MissingInput(f"input {name!r}: the path {sub!r} inside step output {ref['output']!r} {e}") from None

    def digest_of(art: PipelineArtifact) -> str:
        if not sub:
            return art.digest
        # what is at the path, not the whole output: another shard changing must not re-run this one
        found, _ = output_artifacts(files_of(art.job_id), [art.output + sub])
        return found[art.output + sub]["digest"] if found else sha(art.digest + sub)

    if not ref.get("fan_in"):
        art = sources[0]
        return {**ref, "url": art.url + sub, "digest": digest_of(art), "artifacts": [art.id]}
    entries = {str(i): a.url + sub for i, a in enumerate(sources)}
    url = assemble(store, f"pipelines/{run_id}/{step}/inputs/{name}", entries)
    digest = sha(json.dumps([[i, digest_of(a)] for i, a in enumerate(sources)]))
    return {**ref, "url": url, "digest": digest, "artifacts": [a.id for a in sources]}


def put_value(store: ArtifactStore, text: str) -> str:
    """Write ``text`` once under its hash; its URL."""
    return store.put_bytes("values/" + sha(text).replace(":", "-"), text.encode())


def assemble(store: ArtifactStore, key: str, entries: dict[str, str]) -> str:
    """A folder ``key`` with one entry per name pointing at (local store) or copied from each URL."""
    dest = f"{store.root}/{key}"
    local = local_path(f"{store.url}/{key}")
    if local is not None:
        local.mkdir(parents=True, exist_ok=True)
        for name, url in entries.items():
            link, target = local / name, local_path(url)
            if link.is_symlink() or link.exists():
                link.unlink()
            os.symlink(target, link)
    else:
        for name, url in entries.items():
            store.fs.copy(url, f"{dest}/{name}", recursive=True)
    return f"{store.url}/{key}"


def fingerprint(url: str) -> str:
    """What the cache sees of an outside input: size and mtime of the files of a local path, else the URL.

    A folder is walked for at most FINGERPRINT_ENTRIES entries in all, without following links to folders, each
    folder's entries sorted as read: the walk runs in a request, as the server's account, so its cost must not be
    the size of the tree named (a run of ``/`` stops as soon as a small one would)."""
    path = local_path(url)
    if path is None or not path.exists():
        return sha(url)
    h = hashlib.sha256(str(path).encode())
    if path.is_file():
        st = path.stat()
        h.update(f"\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        return "sha256:" + h.hexdigest()
    left = FINGERPRINT_ENTRIES
    folders = [path]
    while folders and left > 0:
        here = folders.pop()
        try:
            with os.scandir(here) as it:
                entries = sorted((e for _, e in zip(range(left), it)), key=lambda e: e.name)
        except OSError:
            continue
        left -= len(entries)
        inside = []
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):
                    inside.append(Path(e.path))
                elif e.is_file():
                    st = e.stat()
                    h.update(f"{Path(e.path).relative_to(path)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
            except OSError:
                continue
        folders.extend(reversed(inside))  # the next walked is the first by name: the same order every time
    if left <= 0:
        h.update(b"\0cut")
    return "sha256:" + h.hexdigest()


def cache_key(job: dict[str, Any], code: str | None, inputs: dict[str, dict[str, Any]], outputs: list[str]) -> str:
    spec = JobSpec.model_validate(job, context=STORED).model_dump(mode="json")  # the run's, as stored
    hashed = {k: v for k, v in spec.items() if k not in NOT_HASHED}
    body = {"spec": hashed, "code": code, "inputs": {n: r["digest"] for n, r in sorted(inputs.items())},
            "outputs": sorted(outputs)}
    return sha(json.dumps(body, sort_keys=True, default=str))


def output_artifacts(files: list[tuple[ArtifactInfo, str]], names: list[str]) -> tuple[dict[str, dict], list[str]]:
    """Each named output's digest, size and file count from a job's uploaded files; and the missing names."""
    found, missing = {}, []
    for name in names:
        mine = [(a, url) for a, url in files if a.path == name or a.path.startswith(name + "/")]
        if not mine:
            missing.append(name)
            continue
        if len(mine) == 1 and mine[0][0].path == name:
            digest = mine[0][0].digest
        else:
            digest = sha("\n".join(f"{a.path[len(name) + 1:]} {a.digest}" for a, _ in sorted(mine, key=lambda m: m[0].path)))
        found[name] = {"digest": digest, "size": sum(a.size for a, _ in mine), "files": len(mine),
                       "attempt": mine[0][0].attempt}
    return found, missing
