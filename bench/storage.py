"""Moving a large output through trainyard on an S3-compatible server, against s3fs alone on the same one.

    PYTHONPATH=src .venv/bin/python bench/storage.py [--size 1Gi] [--server s3rver|moto] [--endpoint URL]

One S3-compatible server serves both sides, measured side by side, started here on loopback:

- ``s3rver`` (the default): a file-backed fake S3 server for Node (npm ``s3rver``) that streams objects
  from disk and serves ``Range`` reads from the file, so 1 GiB costs disk, not RAM. It is installed on
  first use into ``~/.cache/trainyard-bench`` (``npm install --prefix ~/.cache/trainyard-bench s3rver@3``;
  Node and npm from the OS: ``apt-get install -y nodejs npm``).
- ``moto`` (``python -m moto.server``), what the tests use: started with a key buffer larger than the
  file (``MOTO_S3_DEFAULT_KEY_BUFFER_SIZE``), else a 1 GiB CompleteMultipartUpload fails with a 500.
  It holds about 3x the file in RAM and copies the whole object for every ranged GET, so downloads
  of 1 GiB time out on it (s3fs alone too): use it up to 256 MiB.
- ``--endpoint``: a server of your own (MinIO, Ceph), credentials from the AWS variables.

Measured:

- upload — baseline: ``s3fs.S3FileSystem.put_file``; trainyard: the launcher's output upload
  (``trainyard.launch.outputs.upload``: hashing, multipart put, stored-size check);
- download — baseline: ``s3fs.get_file``; trainyard: ``Client.download`` of the same file as a job's
  output, streamed through a real ``trainyard server --artifacts s3://…`` and checked against its digest;
- the trainyard server's RSS (sampled every 20 ms) while a job writes the file as its output (the
  launcher uploads it), while up to 128 MiB of it are PUT to the server as a code snapshot (the one
  upload whose bytes pass through the server: spooled to disk, streamed to the store in 5 MiB parts;
  s3rver cannot move a larger object into place), and while the file is downloaded. A small job and download first pay the server's one-time imports.

Targets (issue 17): trainyard's throughput at least 0.8× the baseline's, both ways; the server's RSS
grows by less than 32 MiB over all three (flat: a few chunks per stream, not proportional to the file).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchserver import BenchServer  # noqa: E402

from trainyard.spec.units import parse_memory  # noqa: E402

TARGET = 0.8
SNAPSHOT = 128 << 20  # the code snapshot PUT through the server: see main()
FLAT = 32 << 20  # the server's growth allowed while it streams: a few chunks per stream, whatever the file's size
S3RVER_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "trainyard-bench"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(proc: subprocess.Popen, url: str, what: str) -> None:
    for _ in range(600):
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not start")


def moto(env: dict[str, str], size: int, data: Path) -> tuple[subprocess.Popen, str]:
    # moto spills each part of a multipart upload over its key buffer to a temporary file, and a 1 GiB
    # upload's CompleteMultipartUpload then fails with a 500 ("seek of closed file", s3fs alone too);
    # parts held in memory complete: moto needs about 3x the file's size in RAM
    env = {**env, "MOTO_S3_DEFAULT_KEY_BUFFER_SIZE": str(2 * size + (64 << 20))}
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    wait_up(proc, endpoint + "/moto-api/", "moto")
    return proc, endpoint


def s3rver_bin() -> Path:
    """The s3rver script, installed into the cache folder on first use."""
    script = S3RVER_CACHE / "node_modules" / ".bin" / "s3rver"
    if not script.exists():
        if not shutil.which("npm"):
            raise SystemExit("--server s3rver needs Node and npm (apt-get install -y nodejs npm), or use --server moto")
        S3RVER_CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(S3RVER_CACHE), "s3rver@3"],
                       check=True)
    return script


def s3rver(env: dict[str, str], size: int, data: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    data.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([str(s3rver_bin()), "-d", str(data), "-a", "127.0.0.1", "-p", str(port), "-s",
                             "--no-vhost-buckets"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    wait_up(proc, endpoint + "/", "s3rver")
    return proc, endpoint


SERVERS = {"s3rver": (s3rver, {"AWS_ACCESS_KEY_ID": "S3RVER", "AWS_SECRET_ACCESS_KEY": "S3RVER"}),
           "moto": (moto, {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench"})}


def timed(fn) -> float:  # noqa: ANN001
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def cpu(*procs: psutil.Process) -> list[float]:
    """CPU seconds (user + system) so far of each process: where a transfer's time goes on a busy machine."""
    return [sum(p.cpu_times()[:2]) for p in procs]


class PeakRSS(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.proc, self.peak, self.done = psutil.Process(pid), 0, threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(0.02)


def snapshot_put(server: BenchServer, src: Path, digest: str) -> None:
    """``src`` PUT as a code snapshot, streamed from the file (the SDK sends a snapshot's bytes whole)."""
    with open(src, "rb") as f:
        resp = httpx.put(f"{server.url}/api/v1/snapshots/{digest}", content=iter(lambda: f.read(1 << 20), b""),
                         headers={"Authorization": f"Bearer {(server.home / 'token').read_text().strip()}"},
                         timeout=1800)
    resp.raise_for_status()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="1Gi", help="file size, e.g. 1Gi, 256Mi (default 1Gi)")
    ap.add_argument("--server", choices=sorted(SERVERS), default="s3rver",
                    help="the S3-compatible server started here (default s3rver: file-backed, carries 1 GiB)")
    ap.add_argument("--endpoint", help="an S3-compatible server of your own instead (credentials: AWS variables)")
    args = ap.parse_args()
    size = parse_memory(args.size)
    start, credentials = SERVERS[args.server]
    if not args.endpoint:
        os.environ.update(credentials, AWS_DEFAULT_REGION="us-east-1")
    # a fake server answers CompleteMultipartUpload only once it has joined the parts (AWS sends bytes
    # meanwhile): over botocore's 60 s read timeout on a busy machine, and its retries then get a 500 as
    # the first call already completed. Both sides, and the server and launcher started here, get 15 min
    os.environ["FSSPEC_S3"] = json.dumps({"config_kwargs": {"read_timeout": 900}})
    import s3fs

    from trainyard.launch.outputs import upload

    work = Path(tempfile.mkdtemp(prefix="trainyard-bench-storage-"))
    proc, endpoint = (None, args.endpoint) if args.endpoint else start(dict(os.environ), size, work / "s3")
    bucket = f"trainyard-bench-{os.getpid()}"
    server = None
    try:
        fs = s3fs.S3FileSystem(endpoint_url=endpoint)
        fs.mkdir(bucket)
        src = work / "model.bin"
        with open(src, "wb") as f:  # incompressible, written in blocks
            for _ in range(size // (8 << 20)):
                f.write(os.urandom(8 << 20))
            f.write(os.urandom(size % (8 << 20)))
        mib = size / (1 << 20)

        fs.pipe_file(f"{bucket}/warm", b"w" * (1 << 20))  # the first request of a fresh server is slow
        fs.cat_file(f"{bucket}/warm")
        base_up = timed(lambda: fs.put_file(str(src), f"{bucket}/base/model.bin"))
        me, store = psutil.Process(), psutil.Process(proc.pid) if proc is not None else None
        watched = [me, store] if store else [me]
        cpu0 = cpu(*watched)
        base_down = timed(lambda: fs.get_file(f"{bucket}/base/model.bin", str(work / "base.bin")))
        base_cpu = [b - a for a, b in zip(cpu0, cpu(*watched))]
        (work / "base.bin").unlink()

        from trainyard.artifacts.transfer import file_digest, use_storage

        use_storage({"s3": {"endpoint_url": endpoint}})
        records: list = []
        ty_up = timed(lambda: records.extend(upload({"model.bin": src}, f"s3://{bucket}/ty-upload")[0]))
        assert records and records[0]["size"] == size, records

        server = BenchServer(work / "home", [sys.executable, "-m", "trainyard", "server", "--artifacts",
                                             f"s3://{bucket}/ty", "--s3-endpoint-url", endpoint])
        copy = "import os, shutil, sys; shutil.copy(sys.argv[1], os.environ['TRAINYARD_OUTPUT_DIR'])"
        warm = work / "warm.bin"
        warm.write_bytes(os.urandom(1 << 20))
        small = server.client.submit({"name": "warm", "command": [sys.executable, "-c", copy, str(warm)]})
        small.wait(timeout=600)
        small.download(work / "warm")  # the server's lazy imports, paid before it is watched
        server_proc = psutil.Process(server.proc.pid)
        watch = PeakRSS(server.proc.pid)
        watch.start()
        rss: dict[str, tuple[int, int]] = {}  # phase -> (RSS at its start, peak during it)

        def phase(name: str, fn) -> float:  # noqa: ANN001
            start, watch.peak = server_proc.memory_info().rss, 0
            took = timed(fn)
            rss[name] = (start, max(watch.peak, server_proc.memory_info().rss))
            return took

        job = server.client.submit({"name": "big", "command": [sys.executable, "-c", copy, str(src)]})
        ended: list = []
        phase("job upload", lambda: ended.append(job.wait(timeout=1800)))
        assert ended[0].status.value == "succeeded", job.logs()
        # a snapshot goes to a temporary key and is moved into place: s3fs moves an object over 150 MiB
        # with UploadPartCopy, which s3rver lacks (AWS, MinIO and Ceph have it), so 128 MiB of it here
        tarball = work / "snapshot.bin"
        with open(src, "rb") as f, open(tarball, "wb") as out:
            out.write(f.read(min(size, SNAPSHOT)))
        digest = file_digest(tarball)
        put_snapshot = phase("snapshot PUT", lambda: snapshot_put(server, tarball, digest))
        cpu0 = cpu(*watched, server_proc)
        ty_down = phase("download", lambda: job.download(work / "dl"))
        ty_cpu = [b - a for a, b in zip(cpu0, cpu(*watched, server_proc))]
        watch.done.set()
        watch.join()
        assert (work / "dl" / "model.bin").stat().st_size == size
    finally:
        if server is not None:
            server.close()
        if proc is not None:
            proc.terminate()
            proc.wait(30)
        else:  # a real server's bucket, made here
            s3fs.S3FileSystem(endpoint_url=endpoint).rm(bucket, recursive=True)
        subprocess.run(["rm", "-rf", str(work)], check=False)

    up, down = base_up / ty_up, base_down / ty_down
    print(f"file {mib:.0f} MiB on {args.endpoint or args.server} at {endpoint}, load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"upload    s3fs {mib / base_up:7.1f} MiB/s   trainyard {mib / ty_up:7.1f} MiB/s   ratio {up:.2f}")
    print(f"download  s3fs {mib / base_down:7.1f} MiB/s   trainyard {mib / ty_down:7.1f} MiB/s   ratio {down:.2f}")
    first = rss["job upload"][0]
    growth = max(peak for _, peak in rss.values()) - first
    print(f"snapshot PUT of {min(size, SNAPSHOT) >> 20} MiB through the server "
          f"{min(size, SNAPSHOT) / 2**20 / put_snapshot:7.1f} MiB/s (spooled, then streamed to the store)")
    print(f"server RSS {first / 2**20:.0f} MiB before; peak growth "
          + ", ".join(f"{name} +{(peak - start) / 2**20:.0f} MiB" for name, (start, peak) in rss.items())
          + f"; over all +{growth / 2**20:.0f} MiB: {'PASS' if growth < FLAT else 'MISS'} (flat: < {FLAT >> 20} MiB)")
    names = ["client", "S3 server", "trainyard server"]
    print("download CPU seconds  s3fs: " + ", ".join(f"{n} {c:.1f}" for n, c in zip(names, base_cpu))
          + "   trainyard: " + ", ".join(f"{n} {c:.1f}" for n, c in zip(names[:len(watched)] + names[2:], ty_cpu)))
    ok = up >= TARGET and down >= TARGET and growth < FLAT
    print(f"{'PASS' if ok else 'MISS'}: ratios >= {TARGET} both ways and server memory flat")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
