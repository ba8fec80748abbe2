"""Moving a large output through trainyard on an S3-compatible server, against s3fs alone on the same one.

    PYTHONPATH=src .venv/bin/python bench/storage.py [--size 256Mi] [--endpoint http://minio:9000]

One S3-compatible server serves both sides, measured side by side: a moto server started here
(``python -m moto.server``, loopback), or ``--endpoint`` with credentials from the AWS variables.
moto is started with a key buffer larger than the file (``MOTO_S3_DEFAULT_KEY_BUFFER_SIZE``): with its
default, parts spill to temporary files and the CompleteMultipartUpload of a 1 GiB file fails with a
500 (for s3fs alone too). It then holds about 3x the file in RAM; ``--size 1Gi`` is the issue's case.

- upload — baseline: ``s3fs.S3FileSystem.put_file``; trainyard: the launcher's output upload
  (``trainyard.launch.outputs.upload``: hashing, multipart put, stored-size check);
- download — baseline: ``s3fs.get_file``; trainyard: ``Client.download`` of the same file as a job's
  output, streamed through a real ``trainyard server --artifacts s3://…`` and checked against its digest.

Targets (issue 17): trainyard's throughput at least 0.8× the baseline's, both ways; the server's RSS
while it streams the file grows by less than 64 MiB (flat, not proportional to the file).
"""

from __future__ import annotations

import argparse
import os
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
FLAT = 64 << 20  # the server's growth allowed while it streams: a few read blocks, whatever the file's size
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"}


def moto(env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            httpx.get(endpoint + "/moto-api/", timeout=1)
            return proc, endpoint
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError("moto did not start")


def timed(fn) -> float:  # noqa: ANN001
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


class PeakRSS(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.proc, self.peak, self.done = psutil.Process(pid), 0, threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(0.02)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="256Mi", help="file size, e.g. 1Gi, 256Mi (default 256Mi)")
    ap.add_argument("--endpoint", help="an S3-compatible server to use instead of a moto started here")
    args = ap.parse_args()
    size = parse_memory(args.size)
    if not args.endpoint:
        os.environ.update(CREDENTIALS)
    import s3fs

    from trainyard.launch.outputs import upload

    work = Path(tempfile.mkdtemp(prefix="trainyard-bench-storage-"))
    # moto spills each part of a multipart upload over its key buffer to a temporary file, and a 1 GiB
    # upload's CompleteMultipartUpload then fails with a 500 ("seek of closed file", s3fs alone too);
    # parts held in memory complete: moto needs about 3x the file's size in RAM
    moto_env = {**os.environ, "MOTO_S3_DEFAULT_KEY_BUFFER_SIZE": str(2 * size + (64 << 20))}
    proc, endpoint = (None, args.endpoint) if args.endpoint else moto(moto_env)
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

        fs.pipe_file(f"{bucket}/warm", b"w" * (1 << 20))  # the first request of a fresh moto is slow
        fs.cat_file(f"{bucket}/warm")
        base_up = timed(lambda: fs.put_file(str(src), f"{bucket}/base/model.bin"))
        base_down = timed(lambda: fs.get_file(f"{bucket}/base/model.bin", str(work / "base.bin")))
        (work / "base.bin").unlink()

        from trainyard.artifacts.transfer import use_storage

        use_storage({"s3": {"endpoint_url": endpoint}})
        records: list = []
        ty_up = timed(lambda: records.extend(upload({"model.bin": src}, f"s3://{bucket}/ty-upload")[0]))
        assert records and records[0]["size"] == size, records

        server = BenchServer(work / "home", [sys.executable, "-m", "trainyard", "server", "--artifacts",
                                             f"s3://{bucket}/ty", "--s3-endpoint-url", endpoint])
        job = server.client.submit({"name": "big", "command": [
            sys.executable, "-c", f"import os, shutil; shutil.copy({str(src)!r}, os.environ['TRAINYARD_OUTPUT_DIR'])"]})
        assert job.wait(timeout=1800).status.value == "succeeded", job.logs()
        before = psutil.Process(server.proc.pid).memory_info().rss
        watch = PeakRSS(server.proc.pid)
        watch.start()
        ty_down = timed(lambda: job.download(work / "dl"))
        watch.done.set()
        watch.join()
        assert (work / "dl" / "model.bin").stat().st_size == size
        growth = watch.peak - before
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
    flat = growth < FLAT
    print(f"file {mib:.0f} MiB on moto at {endpoint}")
    print(f"upload    s3fs {mib / base_up:7.1f} MiB/s   trainyard {mib / ty_up:7.1f} MiB/s   ratio {up:.2f}")
    print(f"download  s3fs {mib / base_down:7.1f} MiB/s   trainyard {mib / ty_down:7.1f} MiB/s   ratio {down:.2f}")
    print(f"server RSS {before / 2**20:.0f} MiB before the download, peak +{growth / 2**20:.0f} MiB during it")
    ok = up >= TARGET and down >= TARGET and flat
    print(f"{'PASS' if ok else 'MISS'}: ratios >= {TARGET} both ways and server memory flat")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
