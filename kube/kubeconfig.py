"""Reading kubeconfigs safely: one context, everything embedded, nothing that runs a command.

A member's kubeconfig comes from a Secret that anyone able to write Secrets in the
controller's namespace controls, so by default Propagator refuses what would make the
controller run a program (``exec``, ``auth-provider``), read its own files
(``certificate-authority``, ``tokenFile``...) or stop verifying TLS.
"""

from __future__ import annotations

import base64
import datetime as dt
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509

from kube.redact import capped, redact

MAX_KUBECONFIG_BYTES = 4 << 20
"""The largest kubeconfig read: a Secret holds at most 1 MiB, and an operator's file with
hundreds of contexts a few hundred KiB; YAML this size parses in well under a second."""
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader where PyYAML was built with it: ~10 times faster."""

_TOKEN = re.compile(r"[\x21-\x7e]+")
"""What a bearer token may hold: visible ASCII (a header value, never split or folded)."""


def token_problem(token: object) -> str | None:
    """Why ``token`` cannot be sent as a bearer token, or None; never quotes it."""
    if not isinstance(token, str) or not _TOKEN.fullmatch(token):
        return "must be a non-empty string of visible ASCII characters (no spaces or line breaks)"
    return None


ALLOW_EXEC_SETTING = "PROPAGATOR_ALLOW_EXEC_KUBECONFIGS"


class KubeconfigError(ValueError):
    """A kubeconfig that cannot be used, with what is wrong and what would be accepted
    (redacted: a YAML error quotes the line it stopped at, which may hold a token)."""

    def __init__(self, message: str) -> None:
        super().__init__(capped(message))


@dataclass(frozen=True)
class ExecConfig:
    """A credential plugin (client.authentication.k8s.io ExecCredential); its arguments
    and environment (which may hold secrets) are never printed."""

    command: str
    args: tuple[str, ...] = field(default=(), repr=False)
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    api_version: str = "client.authentication.k8s.io/v1"


@dataclass(frozen=True)
class Credentials:
    """How to reach and authenticate to one API server; everything is held in memory."""

    server: str
    ca_data: bytes | None = None
    client_cert: bytes | None = None
    client_key: bytes | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    tls_server_name: str | None = None
    exec: ExecConfig | None = None
    token_file: str | None = None
    """In a pod: the projected token, re-read as the kubelet rotates it."""
    ca_file: str | None = None
    """In a pod: the cluster CA bundle, re-read when it changes."""

    def __repr__(self) -> str:
        """What is set, never a credential (a server URL's userinfo neither)."""
        shown = [f"server={redact(self.server)!r}"]
        for name in ("ca_data", "client_cert", "client_key", "token"):
            if getattr(self, name):
                shown.append(f"{name}=<set>")
        if self.tls_server_name:
            shown.append(f"tls_server_name={self.tls_server_name!r}")
        if self.exec is not None:
            shown.append(f"exec={self.exec!r}")
        shown.extend(
            f"{n}={getattr(self, n)!r}" for n in ("token_file", "ca_file") if getattr(self, n)
        )
        return f"Credentials({', '.join(shown)})"

    __str__ = __repr__

    def client_cert_expiry(self) -> dt.datetime | None:
        """When the client certificate expires (None without one); KubeconfigError when
        it is no PEM certificate."""
        if not self.client_cert:
            return None
        try:
            return x509.load_pem_x509_certificate(self.client_cert).not_valid_after_utc
        except ValueError:
            raise KubeconfigError(
                "client-certificate-data is not a PEM certificate (base64 of the "
                "-----BEGIN CERTIFICATE----- text)"
            ) from None


@dataclass(frozen=True)
class LoadedKubeconfig:
    """A kubeconfig reduced to one context with all data inline (safe to store in a Secret)."""

    context: str
    credentials: Credentials
    flattened: dict[str, Any] = field(repr=False)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.flattened, sort_keys=False)


def _named(items: Any, kind: str, name: str, source: str) -> dict[str, Any]:
    for item in items or []:
        if isinstance(item, dict) and item.get("name") == name:
            value = item.get(kind)
            if isinstance(value, dict):
                return value
    known = ", ".join(sorted(str(i.get("name")) for i in items or [] if isinstance(i, dict)))
    raise KubeconfigError(f"{source}: no {kind} named {name!r} (known: {known or 'none'})")


def _read_file(name: str, file_key: str, instead: str, base: Path | None, source: str) -> bytes:
    if base is None:
        raise KubeconfigError(
            f"{source}: {file_key} points at a file ({name}); kubeconfigs stored for "
            f"Propagator must embed it as {instead}"
        )
    path = Path(name).expanduser()
    path = path if path.is_absolute() else base / path
    try:
        return path.read_bytes()
    except OSError as exc:
        raise KubeconfigError(f"{source}: cannot read {file_key} {path}: {exc}") from exc


def _inline(
    section: dict[str, Any], data_key: str, file_key: str, base: Path | None, source: str
) -> bytes | None:
    if section.get(data_key):
        try:
            return base64.b64decode(section[data_key], validate=True)
        except ValueError as exc:
            raise KubeconfigError(f"{source}: {data_key} is not valid base64") from exc
    if section.get(file_key):
        return _read_file(section[file_key], file_key, data_key, base, source)
    return None


def _exec_config(
    user: dict[str, Any], user_name: str, source: str, allow_exec: bool
) -> ExecConfig | None:
    if "auth-provider" in user:
        provider = (user["auth-provider"] or {}).get("name", "?")
        raise KubeconfigError(
            f"{source}: user {user_name!r} uses auth-provider {provider!r}, which Propagator "
            "does not support; use a client certificate or a token"
        )
    spec = user.get("exec")
    if not spec:
        return None
    command = spec.get("command", "?")
    if not allow_exec:
        raise KubeconfigError(
            f"{source}: user {user_name!r} uses exec (command {command!r}); Propagator refuses "
            "kubeconfigs that run a command unless the operator sets "
            f"{ALLOW_EXEC_SETTING}=true. Use a client certificate or a token instead"
        )
    env = tuple((e["name"], e["value"]) for e in spec.get("env") or [])
    return ExecConfig(
        command=command,
        args=tuple(spec.get("args") or ()),
        env=env,
        api_version=spec.get("apiVersion", ExecConfig.api_version),
    )


def load_kubeconfig(
    config: str | dict[str, Any],
    *,
    source: str,
    context: str | None = None,
    base_dir: Path | None = None,
    allow_exec: bool = False,
) -> LoadedKubeconfig:
    """Parse a kubeconfig and pick ``context`` (default: its current context).

    Files it references are read relative to ``base_dir``; with ``base_dir=None`` (a
    kubeconfig from a Secret) file references are refused. Raises :class:`KubeconfigError`
    naming ``source`` and the problem (never a value it holds), whatever the text.
    """
    doc = parse_yaml(config, source) if isinstance(config, str) else config
    try:
        return _load(doc, source, context, base_dir, allow_exec)
    except (AttributeError, TypeError, KeyError, ValueError) as exc:
        if isinstance(exc, KubeconfigError):
            raise
        # A field of the wrong type somewhere (a list where a map belongs...): say where
        # it broke, not what it held.
        raise KubeconfigError(
            f"{source}: not a valid kubeconfig (a field of the wrong type: {type(exc).__name__})"
        ) from None


def parse_yaml(text: str, source: str) -> Any:
    """``text`` parsed as YAML, within :data:`MAX_KUBECONFIG_BYTES`; KubeconfigError says
    where it is not YAML, never quoting it (the line may hold a token)."""
    if len(text) > MAX_KUBECONFIG_BYTES:
        raise KubeconfigError(
            f"{source}: {len(text)} characters, more than a kubeconfig may hold "
            f"({MAX_KUBECONFIG_BYTES >> 20} MiB)"
        )
    try:
        return yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError as exc:
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = f" at line {mark.line + 1}, column {mark.column + 1}"
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise KubeconfigError(f"{source}: not valid YAML{where}: {problem}") from None


def _load(
    doc: Any, source: str, context: str | None, base_dir: Path | None, allow_exec: bool
) -> LoadedKubeconfig:
    if not isinstance(doc, dict) or not isinstance(doc.get("contexts"), list):
        raise KubeconfigError(f"{source}: not a kubeconfig (no contexts)")
    name = context or doc.get("current-context")
    if not name:
        raise KubeconfigError(f"{source}: no current-context; pick one with --context")
    ctx = _named(doc["contexts"], "context", name, source)
    cluster_name, user_name = ctx.get("cluster"), ctx.get("user")
    cluster = _named(doc.get("clusters"), "cluster", str(cluster_name), source)
    user = _named(doc.get("users"), "user", str(user_name), source) if user_name else {}

    server = cluster.get("server")
    if not isinstance(server, str) or not server.startswith("https://"):
        raise KubeconfigError(
            f"{source}: cluster {cluster_name!r} server {server!r} must be an https:// URL"
        )
    if "@" in server.partition("://")[2].partition("/")[0]:
        raise KubeconfigError(
            f"{source}: cluster {cluster_name!r} server has credentials in its address "
            "(user@ or user:password@), which would reach logs: give a token or a client "
            "certificate instead"
        )
    if cluster.get("proxy-url"):
        raise KubeconfigError(
            f"{source}: cluster {cluster_name!r} sets proxy-url, which Propagator does not "
            "use (it would be dropped silently, and a proxy sees every credential): reach "
            "the API server directly, or through a tunnel it does not have to trust"
        )
    if cluster.get("insecure-skip-tls-verify"):
        raise KubeconfigError(
            f"{source}: cluster {cluster_name!r} sets insecure-skip-tls-verify; Propagator "
            "always verifies TLS: give certificate-authority-data instead"
        )
    token = user.get("token")
    if not token and user.get("tokenFile"):
        token = _read_file(user["tokenFile"], "tokenFile", "token", base_dir, source).decode()
        token = token.strip()
    if token is not None and (problem := token_problem(token)):
        raise KubeconfigError(f"{source}: user {user_name!r}: its token {problem}")
    if user.get("username") or user.get("password"):
        raise KubeconfigError(
            f"{source}: user {user_name!r} uses basic auth, which Kubernetes "
            "no longer supports; use a client certificate or a token"
        )
    credentials = Credentials(
        server=server.rstrip("/"),
        ca_data=_inline(
            cluster, "certificate-authority-data", "certificate-authority", base_dir, source
        ),
        client_cert=_inline(
            user, "client-certificate-data", "client-certificate", base_dir, source
        ),
        client_key=_inline(user, "client-key-data", "client-key", base_dir, source),
        token=token,
        tls_server_name=cluster.get("tls-server-name"),
        exec=_exec_config(user, str(user_name), source, allow_exec),
    )
    if (credentials.client_cert is None) != (credentials.client_key is None):
        raise KubeconfigError(
            f"{source}: user {user_name!r} has a client certificate without "
            "its key, or a key without its certificate"
        )
    return LoadedKubeconfig(
        name, credentials, _flatten(name, cluster_name, user_name, credentials, user)
    )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _flatten(
    context: str, cluster_name: Any, user_name: Any, creds: Credentials, user: dict[str, Any]
) -> dict[str, Any]:
    cluster: dict[str, Any] = {"server": creds.server}
    if creds.ca_data:
        cluster["certificate-authority-data"] = _b64(creds.ca_data)
    if creds.tls_server_name:
        cluster["tls-server-name"] = creds.tls_server_name
    flat_user: dict[str, Any] = {}
    if creds.client_cert and creds.client_key:
        flat_user["client-certificate-data"] = _b64(creds.client_cert)
        flat_user["client-key-data"] = _b64(creds.client_key)
    if creds.token:
        flat_user["token"] = creds.token
    if creds.exec:
        flat_user["exec"] = user["exec"]
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": str(cluster_name), "cluster": cluster}],
        "users": [{"name": str(user_name or "user"), "user": flat_user}],
        "contexts": [
            {
                "name": context,
                "context": {"cluster": str(cluster_name), "user": str(user_name or "user")},
            }
        ],
        "current-context": context,
    }


def check_not_expired(creds: Credentials, source: str, now: dt.datetime | None = None) -> None:
    """Refuse a client certificate that has expired, saying when."""
    try:
        expiry = creds.client_cert_expiry()
    except KubeconfigError as exc:
        raise KubeconfigError(f"{source}: {exc}") from None
    now = now or dt.datetime.now(dt.UTC)
    if expiry is not None and expiry <= now:
        raise KubeconfigError(
            f"{source}: the client certificate expired on {expiry:%Y-%m-%d %H:%M:%S} UTC; "
            "issue a new one"
        )
