"""What a connection presents to an API server: the TLS context (CA, client certificate
loaded from memory), an exec credential plugin's token or certificate (run with a bare
environment, refreshed when it expires), and a pod's service account token and CA re-read
as they rotate. Never written to disk, never in a message."""

from __future__ import annotations

import datetime as dt
import json
import os
import ssl
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from kube.errors import ApiError
from kube.kubeconfig import Credentials, ExecConfig, token_problem
from kube.redact import capped


def ssl_context(creds: Credentials, client: tuple[bytes, bytes] | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cadata=creds.ca_data.decode() if creds.ca_data else None)
    if client:
        cert, key = client
        load_cert_chain(ctx, cert, key)
    return ctx


def tls_problem(creds: Credentials) -> str | None:
    """Why the CA, client certificate or key of ``creds`` cannot be loaded (they decode
    but do not parse), or None; without the key material in the message."""
    client = (creds.client_cert, creds.client_key) if creds.client_cert else None
    try:
        ssl_context(creds, client)  # type: ignore[arg-type]
    except (ssl.SSLError, ValueError, OSError) as exc:
        part = "certificate-authority-data" if ca_problem(creds) else "client certificate or key"
        return (
            f"its {part} does not load: {type(exc).__name__}: {getattr(exc, 'reason', None) or exc}"
        )
    return None


def ca_problem(creds: Credentials) -> bool:
    try:
        ssl.create_default_context(cadata=creds.ca_data.decode() if creds.ca_data else None)
    except (ssl.SSLError, ValueError):
        return True
    return False


def load_cert_chain(ctx: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    """ssl only loads client keys from files: use an anonymous memory file where possible."""
    pem = cert.rstrip(b"\n") + b"\n" + key
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("propagator-client-cert", os.MFD_CLOEXEC)
        try:
            os.write(fd, pem)
            ctx.load_cert_chain(f"/proc/self/fd/{fd}")
        finally:
            os.close(fd)
        return
    with tempfile.TemporaryDirectory() as private:  # pragma: no cover - non-Linux
        path = os.path.join(private, "client.pem")
        with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
            f.write(pem)
        ctx.load_cert_chain(path)


@dataclass
class ExecToken:
    token: str | None = field(repr=False)
    client: tuple[bytes, bytes] | None = field(repr=False)
    expires: dt.datetime | None


EXEC_ENV = ("PATH", "HOME", "USER", "LANG", "LC_ALL", "TMPDIR", "TZ")
"""What a credential plugin inherits of the controller's environment (client-go passes
everything; the controller's environment holds its own settings and tokens)."""


def run_exec(spec: ExecConfig, cluster: str) -> ExecToken:
    env = {k: os.environ[k] for k in EXEC_ENV if k in os.environ}
    env.update(dict(spec.env))
    env["KUBERNETES_EXEC_INFO"] = json.dumps(
        {"apiVersion": spec.api_version, "kind": "ExecCredential", "spec": {"interactive": False}}
    )
    what = f"credential plugin {spec.command!r}"  # never its arguments: they may hold secrets
    try:
        done = subprocess.run(
            [spec.command, *spec.args],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ApiError(cluster, f"{what} did not finish within 60s") from exc
    except OSError as exc:
        raise ApiError(cluster, f"{what} cannot run: {exc.strerror or exc}") from exc
    if done.returncode != 0:
        said = capped(done.stderr.strip(), 200)
        raise ApiError(cluster, f"{what} exited {done.returncode}" + (f": {said}" if said else ""))
    try:
        status = json.loads(done.stdout).get("status") or {}
    except (ValueError, AttributeError) as exc:
        raise ApiError(cluster, f"{what} did not print an ExecCredential (JSON)") from exc
    client = None
    if status.get("clientCertificateData") and status.get("clientKeyData"):
        client = (status["clientCertificateData"].encode(), status["clientKeyData"].encode())
    expires = status.get("expirationTimestamp")
    if status.get("token") is not None and (problem := token_problem(status["token"])):
        raise ApiError(cluster, f"{what} printed a token that cannot be used: it {problem}")
    return ExecToken(
        token=status.get("token"),
        client=client,
        expires=dt.datetime.fromisoformat(expires.replace("Z", "+00:00")) if expires else None,
    )


class ServiceAccountFiles(httpx.Auth):
    """A pod's token and CA, re-read like client-go does: the token sent with each request
    is the file's content, read again when the file changed (checked at most every
    ``CHECK_EVERY_S``) and at least every ``REREAD_EVERY_S``; a changed CA bundle is added
    to the TLS context, so new connections trust it while open ones (and their watches)
    carry on."""

    CHECK_EVERY_S = 1.0
    REREAD_EVERY_S = 60.0

    def __init__(self, creds: Credentials, tls: ssl.SSLContext) -> None:
        self._token_file = creds.token_file
        self._ca_file = creds.ca_file
        self._tls = tls
        self._token = creds.token or ""
        self._stamps: dict[str, float] = {}
        self._checked = self._read_at = time.monotonic()
        for path in (self._token_file, self._ca_file):
            if path:
                self._stamps[path] = self._mtime(path)

    @staticmethod
    def _mtime(path: str) -> float:
        try:
            return os.stat(path).st_mtime
        except OSError:
            return -1.0

    def _refresh(self) -> None:
        now = time.monotonic()
        if now - self._checked < self.CHECK_EVERY_S:
            return
        self._checked = now
        due = now - self._read_at >= self.REREAD_EVERY_S
        if self._token_file and (
            due or self._mtime(self._token_file) != self._stamps.get(self._token_file)
        ):
            try:
                token = Path(self._token_file).read_text().strip()
                self._stamps[self._token_file] = self._mtime(self._token_file)
                if token and token_problem(token) is None:  # else: keep the last good one
                    self._token = token
            except OSError:
                pass  # mid-rotation: keep the last token, try again next time
        if self._ca_file and self._mtime(self._ca_file) != self._stamps.get(self._ca_file):
            try:
                self._tls.load_verify_locations(cadata=Path(self._ca_file).read_text())
                self._stamps[self._ca_file] = self._mtime(self._ca_file)
            except (OSError, ssl.SSLError, ValueError):
                pass  # a half-written bundle: try again next time
        if due:
            self._read_at = now

    def authorization(self) -> str:
        """The Authorization header's value now."""
        self._refresh()
        return f"Bearer {self._token}"

    def auth_flow(self, request: httpx.Request) -> Any:
        request.headers["Authorization"] = self.authorization()
        yield request
