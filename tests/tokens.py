"""A loopback OAuth 2.0 token endpoint (RFC 6749 4.4, and the API-key exchange of the
OpenLineage client's `jwt` auth): it checks the client's credentials, answers a new token
(`tok-1`, `tok-2`, ...) with `expires_in`, and records every request's headers and form."""

from __future__ import annotations

import base64
import json
import ssl
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import parse_qs, unquote_plus


class TokenServer:
    """Answers POSTs on any path; `status` other than 200 is answered with no token."""

    def __init__(
        self,
        tls: ssl.SSLContext,
        *,
        clients: Mapping[str, str] = {},
        api_keys: tuple[str, ...] = (),
        expires_in: int | None = 3600,
        field: str = "access_token",
    ) -> None:
        self.clients = dict(clients)  # client id -> secret
        self.api_keys = api_keys
        self.expires_in = expires_in
        self.field = field
        self.status = 200
        self.fixed: str | None = None  # one token for every request (two processes compared)
        self.requests: list[tuple[dict[str, str], dict[str, str]]] = []
        self.issued = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
                headers = {k.lower(): v for k, v in self.headers.items()}
                status, answer = server.answer(headers, form)
                body = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the test reads `requests`."""

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.socket = tls.wrap_socket(self._http.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self._http.server_address[1]}/oauth/token"

    def answer(self, headers: dict[str, str], form: dict[str, str]) -> tuple[int, Any]:
        with self._lock:
            self.requests.append((headers, form))
            if self.status != 200:
                return self.status, {"error": "temporarily_unavailable"}
            if not self._authorized(headers, form):
                return 401, {"error": "invalid_client"}
            self.issued += 1
            token = self.fixed or f"tok-{self.issued}"
            answer: dict[str, Any] = {self.field: token, "token_type": "Bearer"}
            if self.expires_in is not None:
                answer["expires_in"] = self.expires_in
            return 200, answer

    def _authorized(self, headers: dict[str, str], form: dict[str, str]) -> bool:
        grant = form.get("grant_type")
        if grant == "client_credentials":
            basic = headers.get("authorization", "")
            if basic.startswith("Basic "):
                pair = base64.b64decode(basic[6:]).decode()
                client_id, _, secret = (unquote_plus(p) for p in pair.partition(":"))
            else:
                client_id, secret = form.get("client_id", ""), form.get("client_secret", "")
            return self.clients.get(client_id) == secret
        return form.get("apikey") in self.api_keys

    def start(self) -> Self:
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()
