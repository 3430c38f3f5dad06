"""A raw-JSON connection to one Kubernetes API server (the hub or a member), async: the
REST verbs over :class:`kube.transport.ApiTransport`.

Dicts in, dicts out: server-side apply, get, list, delete and watch go straight over
one HTTP/2 connection on anyio, without conversion to generated model classes and without
a thread per call or per watch. Credentials stay in memory (:mod:`kube.credentials`).
Retries are not done here: callers decide what is retryable from :class:`ApiError`
(:mod:`kube.retry`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import anyio
import httpx

from kube.discovery import Discovery, ResourceInfo
from kube.errors import ApiError
from kube.kubeconfig import Credentials
from kube.retry import backoff_delay
from kube.session import ConnectionOptions
from kube.transport import ApiTransport, Call, serves_watch_list, transport_error

T = TypeVar("T")

APPLY_CONTENT_TYPE = "application/apply-patch+yaml"
MERGE_PATCH_CONTENT_TYPE = "application/merge-patch+json"
FIELD_MANAGER = "propagator"
NO_STORED_VERSION = "1"
"""A resourceVersion no stored object has: etcd's store starts at revision 1 and its
first write makes revision 2. As an apply's precondition it makes the apply a create."""


def _apply_call(
    info: ResourceInfo, obj: dict[str, Any], field_manager: str, dry_run: bool, new: bool
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """A server-side apply's path, query and body (see :meth:`KubeConnection.apply`)."""
    meta = obj.get("metadata") or {}
    if new:  # a precondition no stored object meets: a create, or 409 Conflict
        obj = {**obj, "metadata": {**meta, "resourceVersion": NO_STORED_VERSION}}
    path = info.path(meta.get("namespace") if info.namespaced else None, meta["name"])
    params = {"fieldManager": field_manager, "force": "true", "dryRun": "All" if dry_run else None}
    return path, params, obj


class KubeConnection(ApiTransport):
    """Calls to one API server. One instance per cluster, used from one event loop."""

    def __init__(self, name: str, creds: Credentials, options: ConnectionOptions) -> None:
        super().__init__(name, creds, options)
        self.discovery = Discovery(self)
        self.server_version: str | None = None
        """The server's gitVersion, from its last :meth:`version` answer."""
        self.watch_list: bool | None = None
        """Whether a watch may start with the current objects (None: not known yet)."""

    async def resource(self, api_version: str, kind: str) -> ResourceInfo:
        """How ``kind`` is served (plural, namespaced), from discovery (refreshed on a miss)."""
        return await self.discovery.resource(api_version, kind)

    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any]:
        info = await self.resource(api_version, kind)
        return await self.request("GET", info.path(namespace, name))

    async def list(
        self, api_version: str, kind: str, namespace: str | None = None, **params: Any
    ) -> dict[str, Any]:
        info = await self.resource(api_version, kind)
        return await self.request("GET", info.path(namespace), params=params)

    async def apply(
        self,
        obj: dict[str, Any],
        *,
        field_manager: str = FIELD_MANAGER,
        dry_run: bool = False,
        timeout_s: float | None = None,
        new: bool = False,
    ) -> dict[str, Any]:
        """Server-side apply ``obj`` (force: Propagator owns what it propagates). With
        ``new``, only as a create: if an object of that name exists, nothing is written
        and ApiError (``not_new``) is raised."""
        info = await self.resource(obj["apiVersion"], obj["kind"])
        path, params, body = _apply_call(info, obj, field_manager, dry_run, new)
        return await self.request(
            "PATCH",
            path,
            params=params,
            body=body,
            content_type=APPLY_CONTENT_TYPE,
            timeout_s=timeout_s,
        )

    @contextlib.contextmanager
    def together(self) -> Iterator[None]:
        """Calls :meth:`send_now` sends within the block (which must not wait) go out to
        the server in one write."""
        if self._direct is None:
            yield
            return
        with self._direct.together():
            yield

    def send_apply(self, obj: dict[str, Any], *, new: bool = False) -> Call:
        """:meth:`apply` as a :class:`Call` sent at once (see :meth:`send_now`) when the
        kind's discovery is known already; else applied when its result is asked for."""
        info = self.discovery.known(obj["apiVersion"], obj["kind"])
        if info is None:

            async def later() -> dict[str, Any]:
                return await self.apply(obj, new=new)

            return Call(later)
        path, params, body = _apply_call(info, obj, FIELD_MANAGER, False, new)
        return self.send_now(
            "PATCH", path, params=params, body=body, content_type=APPLY_CONTENT_TYPE
        )

    async def create(
        self, obj: dict[str, Any], *, field_manager: str = FIELD_MANAGER
    ) -> dict[str, Any]:
        """Create ``obj``; raises ApiError (``already_exists``) if it exists: unlike an
        apply, a create never writes over what someone else made."""
        info = await self.resource(obj["apiVersion"], obj["kind"])
        namespace = (obj.get("metadata") or {}).get("namespace")
        path = info.path(namespace if info.namespaced else None)
        return await self.request("POST", path, params={"fieldManager": field_manager}, body=obj)

    async def merge_patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        body: dict[str, Any],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """JSON merge patch of an object (or its ``subresource``, e.g. ``status``)."""
        path = (await self.resource(api_version, kind)).path(namespace, name)
        return await self.request(
            "PATCH",
            f"{path}/{subresource}" if subresource else path,
            body=body,
            content_type=MERGE_PATCH_CONTENT_TYPE,
        )

    async def delete(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> bool:
        """Delete an object (background propagation); False if it was gone."""
        info = await self.resource(api_version, kind)
        try:
            await self.request(
                "DELETE", info.path(namespace, name), body={"propagationPolicy": "Background"}
            )
        except ApiError as exc:
            if exc.not_found:
                return False
            raise
        return True

    async def ping(self, timeout_s: float) -> bool:
        """An HTTP/2 PING over the open connection to the server, answered by the API
        server itself (no request, no handler, no etcd): a liveness check at a quarter of
        a call's cost. False when there is no such connection to ping (nothing sent);
        raises :class:`ApiError` when the server does not answer within ``timeout_s``."""
        if self._direct is None:
            return False
        try:
            if not await self._direct.ping(timeout_s):
                return False
        except httpx.TransportError as exc:
            raise transport_error(self.name, self.server, exc, "HTTP/2 PING") from exc
        self.answered_at = time.monotonic()
        return True

    async def readyz(self, timeout_s: float) -> None:
        """Raise :class:`ApiError` unless ``/readyz`` answers 200 within ``timeout_s``."""
        await self.request("GET", "/readyz", timeout_s=timeout_s, accept="text/plain", decode=False)

    async def version(self) -> dict[str, Any]:
        answer = await self.request("GET", "/version")
        found = answer.get("gitVersion") if isinstance(answer, dict) else None
        self.server_version = found if isinstance(found, str) else ""
        return answer

    async def streams_initial_events(self) -> bool:
        """Whether a watch can begin with the objects there are (``sendInitialEvents``,
        Kubernetes' streaming list), which saves the list request before it: judged from
        the server's version (1.32 on, where it is on by default) until a watch asking for
        it is refused (:meth:`refuse_watch_list`)."""
        if self.watch_list is None:
            if self.server_version is None:
                await self.version()
            self.watch_list = serves_watch_list(self.server_version or "")
        return self.watch_list

    def refuse_watch_list(self) -> None:
        """The server refused a watch that begins with its objects (1.33 has it off by
        default; a feature gate may turn it off anywhere): list, then watch, from now on."""
        self.watch_list = False


async def apply_creating_namespace(
    conn: KubeConnection, obj: dict[str, Any], *, new: bool = False, sent: Call | None = None
) -> dict[str, Any]:
    """Apply ``obj`` (``new``: only as a create; ``sent``: that apply, sent already); if
    its namespace is missing, create the namespace and apply again."""
    try:
        return await (sent.result() if sent is not None else conn.apply(obj, new=new))
    except ApiError as exc:
        namespace = (obj.get("metadata") or {}).get("namespace")
        if not (exc.not_found and namespace and f'namespaces "{namespace}"' in exc.message):
            raise
    await conn.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    return await conn.apply(obj, new=new)


async def call_with_retries(
    fn: Callable[[], Awaitable[T]],
    *,
    attempts: int = 4,
    backoff_s: float = 0.5,
    max_backoff_s: float = 10.0,
) -> T:
    """Call ``fn``; retry retryable :class:`ApiError` up to ``attempts`` more times with
    exponential backoff and jitter, honouring a server's Retry-After. Other errors, and the
    last retryable one, are raised."""
    for attempt in range(attempts + 1):
        try:
            return await fn()
        except ApiError as exc:
            if not exc.retryable or attempt == attempts:
                raise
            await anyio.sleep(
                backoff_delay(attempt + 1, backoff_s, max_backoff_s, exc.retry_after_s)
            )
    raise AssertionError("unreachable")  # pragma: no cover
