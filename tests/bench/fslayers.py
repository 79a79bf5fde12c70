"""The two file-system layers the agent could read S3 through, measured on its S3 path:
fsspec (s3fs) and pyarrow.fs.S3FileSystem, against a loopback S3 server (moto).

    python -m tests.bench.fslayers [--objects N]

Each layer runs in a fresh interpreter and does what the agent does: list a directory of
`objects` small logs, read each whole, read one 32 MiB object in 1 MiB ranges. Printed as
JSON: seconds per step, requests (the server's access log lines), resident set after import
and at the end, and the installed size of each layer's packages.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from tests.s3server import S3Server, running_s3

WORKER = r"""
import json, os, resource, sys, time
layer, bucket, endpoint, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
def rss():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) / 1024 for l in f if l.startswith("VmRSS"))
t = time.perf_counter()
if layer == "fsspec":
    import fsspec
    fs = fsspec.filesystem("s3", skip_instance_cache=True, use_listings_cache=False)
    ls = lambda p: [i["name"] for i in fs.ls(p, detail=True)]
    get = lambda p, s, e: fs.cat_file(p, start=s, end=e)
    size = lambda p: fs.info(p)["size"]
else:
    from pyarrow import fs as pafs
    s3 = pafs.S3FileSystem(endpoint_override=endpoint, region="us-east-1")
    ls = lambda p: [i.path for i in s3.get_file_info(pafs.FileSelector(p))]
    def get(p, s, e):
        with s3.open_input_file(p) as f:
            return f.read_at(e - s, s)
    size = lambda p: s3.get_file_info(p).size
out = {"import_s": time.perf_counter() - t, "rss_after_import_mib": rss()}
t = time.perf_counter(); names = ls(f"{bucket}/small"); out["list_s"] = time.perf_counter() - t
assert len(names) == count, len(names)
t = time.perf_counter()
for n in names:
    get(n, 0, size(n))
out["read_small_s"] = time.perf_counter() - t
t = time.perf_counter(); big = f"{bucket}/big/log"; total = size(big); off = 0
while off < total:
    off += len(get(big, off, min(off + (1 << 20), total)))
out["read_big_s"] = time.perf_counter() - t
out["rss_end_mib"] = rss()
print(json.dumps(out))
"""

PACKAGES = {
    "fsspec": [
        "fsspec", "s3fs", "aiobotocore", "botocore", "aiohttp", "yarl", "multidict",
        "frozenlist", "aiosignal", "aiohappyeyeballs", "propcache", "aioitertools", "jmespath",
        "wrapt", "python-dateutil", "urllib3",
    ],
    "pyarrow": ["pyarrow"],
}  # fmt: skip


def installed_mib(names: list[str]) -> float:
    total = 0
    for name in names:
        try:
            files = metadata.files(name) or []
        except metadata.PackageNotFoundError:
            continue
        for file in files:
            path = Path(str(file.locate()))
            if path.is_file():
                total += path.stat().st_size
    return total / 2**20


def measure(s3: S3Server, log: Path, layer: str, objects: int) -> dict[str, Any]:
    before = log.read_text(errors="replace").count(" HTTP/1.1")
    done = subprocess.run(
        [sys.executable, "-c", WORKER, layer, s3.bucket, s3.endpoint, str(objects)],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
        env={**s3.env, "PATH": "/usr/bin:/bin"},
    )
    time.sleep(0.5)  # the server's log catches up
    result: dict[str, Any] = json.loads(done.stdout)
    result["requests"] = log.read_text(errors="replace").count(" HTTP/1.1") - before
    result["installed_mib"] = round(installed_mib(PACKAGES[layer]), 1)
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=200)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "moto.log"
        with running_s3("layers", log=log) as s3:
            client = s3.client()
            line = b'{"Event":"SparkListenerLogStart","Spark Version":"4.3.0"}\n' * 20
            for n in range(args.objects):
                client.put_object(Bucket=s3.bucket, Key=f"small/app-{n:05d}", Body=line)
            client.put_object(Bucket=s3.bucket, Key="big/log", Body=b"x" * (32 << 20))
            report = {layer: measure(s3, log, layer, args.objects) for layer in PACKAGES}
    print(json.dumps({"objects": args.objects, **report}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
