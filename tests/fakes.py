"""In-memory stand-ins for our own interfaces (never for the Kubernetes API in e2e).

:class:`FakeMember` acts as one member's API server behind the ``KubeConnection`` calls the
member sync makes (discovery, server-side apply, delete), with failures to inject, and
as its watch caches (always current, like a watch that has caught up).
"""

from __future__ import annotations

import builtins
import contextlib
import copy
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, cast

import anyio

from fleet.capacity import slim_pod
from fleet.circuit import CircuitBreaker
from fleet.member import MemberMonitor
from fleet.readiness import HealthPolicy
from kube.connection import KubeConnection
from kube.discovery import ResourceInfo, UnknownKind
from kube.errors import ApiError
from kube.informer import Informer
from kube.keys import KindKey, cache_key
from kube.session import ConnectionOptions
from kube.transport import Call
from propagator.runtime.memberregistry import Member, cached_form
from propagator.runtime.workqueue import WorkQueue
from propagator.work.objects import (
    APP_LABEL,
    MEMBER_LABEL,
    member_label_value,
    owner_label_of,
)

KUBECONFIG = """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: abc}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""
"""A kubeconfig a monitor accepts (its server is never called)."""

ObjectKey = tuple[str, str, str, str]
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "CustomResourceDefinition"}
SERVED = {
    ("v1", "Namespace"),
    ("v1", "ConfigMap"),
    ("v1", "Service"),
    ("v1", "ResourceQuota"),
    ("v1", "LimitRange"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
    ("apps/v1", "Deployment"),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
}


def _key(obj: dict[str, Any]) -> ObjectKey:
    """Where the server keeps ``obj``: a cluster-scoped kind in no namespace, whatever its
    metadata says."""
    meta = obj["metadata"]
    namespace = "" if obj["kind"] in CLUSTER_SCOPED else meta.get("namespace") or ""
    return (obj["apiVersion"], obj["kind"], namespace, meta["name"])


def _normalise(value: Any) -> Any:
    """What a real API server does to some values: ``1000m`` CPU is stored as ``1``."""
    if isinstance(value, dict):
        return {k: _normalise(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    return "1" if value == "1000m" else value


def served(cluster: str, api_version: str, kind: str) -> ResourceInfo:
    """Discovery of the kinds the fakes serve (UnknownKind for the others)."""
    if (api_version, kind) not in SERVED:
        raise UnknownKind(f"{cluster} does not serve {kind} in {api_version}")
    group, _, version = api_version.rpartition("/")
    return ResourceInfo(group, version, kind, kind.lower() + "s", kind not in CLUSTER_SCOPED)


class FakeMember:
    """One member: its objects, the requests it got, and failures to give."""

    def __init__(self, name: str = "m1", namespaces: Iterable[str] = ("default",)) -> None:
        self.name = name
        self.objects: dict[ObjectKey, dict[str, Any]] = {}
        self.requests: list[tuple[str, ObjectKey]] = []
        self.failures: list[ApiError] = []
        """Raised, one per request, before anything else happens."""
        self.delay_s = 0.0
        self.unseen: set[ObjectKey] = set()
        """Objects the caches do not show yet (their watch events still on the way)."""
        self.no_create_precondition: set[str] = set()
        """Kinds whose creates refuse a precondition, as Services on Kubernetes 1.22."""
        self.reads: list[tuple[ObjectKey, int]] = []
        """Answers to applies sent ahead (send_apply) read: each with how many requests
        had been made by then."""
        self.dropped: list[ObjectKey] = []
        """Applies sent ahead whose answers were given up on."""
        self.quota_controller = True
        """Whether a ResourceQuota's written hard is taken up as its status.hard (what
        admission checks) right after the write's answer, as kube-controller-manager
        does."""
        self._version = 0
        for namespace in namespaces:
            self.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})

    # -- the KubeConnection calls ---------------------------------------------------------

    async def resource(self, api_version: str, kind: str) -> ResourceInfo:
        return self._resource(api_version, kind)

    def _resource(self, api_version: str, kind: str) -> ResourceInfo:
        return served(self.name, api_version, kind)

    def _fail(self) -> None:
        if self.failures:
            raise self.failures.pop(0)

    async def apply(self, obj: dict[str, Any], *, new: bool = False, **_: Any) -> dict[str, Any]:
        return self._apply(obj, new)

    @contextlib.contextmanager
    def together(self) -> Iterator[None]:
        yield

    def send_apply(self, obj: dict[str, Any], *, new: bool = False) -> Call:
        """The apply made at once (a call sent now reaches the server before any answer is
        read); its answer, or its error, once the result is asked for (``reads``), unless
        the call is dropped (``dropped``)."""
        key = _key(obj)
        try:
            answer, error = self._apply(obj, new), None
        except ApiError as exc:
            answer, error = {}, exc

        async def result() -> dict[str, Any]:
            self.reads.append((key, len(self.requests)))
            if error is not None:
                raise error
            return answer

        return Call(result, lambda: self.dropped.append(key))

    def _apply(self, obj: dict[str, Any], new: bool) -> dict[str, Any]:
        key = _key(obj)
        self.requests.append(("apply new" if new else "apply", key))
        self._fail()
        self._resource(obj["apiVersion"], obj["kind"])
        namespace = key[2]
        if namespace and ("v1", "Namespace", "", namespace) not in self.objects:
            raise ApiError(
                self.name, f'PATCH: 404 NotFound: namespaces "{namespace}" not found', status=404
            )
        if new and key in self.objects:  # the resourceVersion precondition fails
            raise ApiError(
                self.name,
                f'PATCH: 409 Conflict: Operation cannot be fulfilled on "{key[3]}": '
                "the object has been modified",
                status=409,
                reason="Conflict",
            )
        if new and obj["kind"] in self.no_create_precondition:
            raise ApiError(
                self.name,
                "PATCH: 500: resourceVersion should not be set on objects to be created",
                status=500,
                retryable=True,
            )
        return self.put(obj)

    async def create(self, obj: dict[str, Any], **_: Any) -> dict[str, Any]:
        key = _key(obj)
        self.requests.append(("create", key))
        self._fail()
        self._resource(obj["apiVersion"], obj["kind"])
        if key in self.objects:
            raise ApiError(
                self.name,
                f'POST: 409 AlreadyExists: {obj["kind"]} "{key[3]}" already exists',
                status=409,
                reason="AlreadyExists",
            )
        return self.put(obj)

    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any]:
        key = (api_version, kind, namespace or "", name)
        self.requests.append(("get", key))
        self._fail()
        if key not in self.objects:
            raise ApiError(self.name, f'GET: 404 NotFound: {kind} "{name}" not found', status=404)
        return copy.deepcopy(self.objects[key])

    async def list(
        self, api_version: str, kind: str, namespace: str | None = None, **_: Any
    ) -> dict[str, Any]:
        """As the API server lists: the items without their apiVersion and kind."""
        self.requests.append(("list", (api_version, kind, namespace or "", "")))
        self._fail()
        items = [
            {k: v for k, v in copy.deepcopy(o).items() if k not in ("apiVersion", "kind")}
            for key, o in self.objects.items()
            if key[:2] == (api_version, kind) and (namespace is None or key[2] == namespace)
        ]
        return {"items": items}

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
        key = (api_version, kind, namespace or "", name)
        self.requests.append(("patch", key))
        self._fail()
        if key not in self.objects:
            raise ApiError(self.name, f'PATCH: 404 NotFound: {kind} "{name}" not found', status=404)
        obj = copy.deepcopy(self.objects[key])
        _merge_patch(obj, body)
        return self.put(obj)

    async def delete(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> bool:
        key = (api_version, kind, namespace or "", name)
        self.requests.append(("delete", key))
        self._fail()
        return self.objects.pop(key, None) is not None

    # -- the member's own side ------------------------------------------------------------

    def put(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Store ``obj`` as the server would (normalised, new resourceVersion, status
        kept); returns what the server answers."""
        self._version += 1
        stored = _normalise(copy.deepcopy(obj))
        if obj["kind"] in CLUSTER_SCOPED:  # as the API server does, rather than refuse it
            stored["metadata"].pop("namespace", None)
        before = self.objects.get(_key(obj))
        if before is not None and "status" in before:
            stored["status"] = before["status"]
        stored["metadata"]["resourceVersion"] = str(self._version)
        stored["metadata"]["uid"] = f"uid-{_key(obj)[3]}"
        self.objects[_key(obj)] = stored
        answer: dict[str, Any] = copy.deepcopy(stored)
        if obj.get("kind") == "ResourceQuota" and self.quota_controller:
            stored["status"] = {**stored.get("status", {}), "hard": stored["spec"]["hard"]}
        return answer

    def edit(self, key: ObjectKey, change: Any) -> None:
        """Someone else changes the object on the member."""
        obj = copy.deepcopy(self.objects[key])
        change(obj)
        self.put(obj)

    def writes(self) -> builtins.list[tuple[str, ObjectKey]]:
        """The requests that write (or would have: a create refused counts)."""
        writes = ("apply", "apply new", "create", "delete", "patch")
        return [r for r in self.requests if r[0] in writes]

    # -- what the member sync is given ----------------------------------------------------

    def unit(self, allowed_namespaces: tuple[str, ...] = ()) -> Member:
        """The member's unit (``allowed_namespaces``: its MemberCluster's spec.namespaces)."""
        monitor = (
            MemberMonitor(self.name, "1", HealthPolicy(), namespaces=allowed_namespaces)
            if allowed_namespaces
            else None
        )
        return Member(
            self.name,
            cast(KubeConnection, self),
            CircuitBreaker(self.name, failure_threshold=3, cool_down_s=30),
            WorkQueue(),
            monitor,
        )

    async def caches(
        self,
        member: Member,
        kinds: Iterable[KindKey],
        timeout_s: float,
    ) -> dict[KindKey, Informer]:
        """Caches of ``kinds`` holding what the member holds now: as the registry's, only
        objects stamped for this member."""
        await anyio.sleep(self.delay_s)
        out = {}
        for api_version, kind in kinds:
            informer = Informer(
                cast(KubeConnection, self), api_version, kind, lambda *_: None, index=owner_label_of
            )
            listed = {}
            for key, obj in self.objects.items():
                labels = obj["metadata"].get("labels") or {}
                stamped = APP_LABEL in labels and labels.get(MEMBER_LABEL) == member_label_value(
                    self.name
                )
                if key in self.unseen:
                    continue
                if key[:2] == (api_version, kind) and stamped:
                    listed[cache_key(obj)] = cached_form(obj, api_version, kind)
            informer._replace(listed)  # as the first listing does (marks it synced)
            out[api_version, kind] = member.caches[api_version, kind] = informer
        return out


def _merge_patch(obj: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """RFC 7386, in place."""
    for key, value in patch.items():
        if value is None:
            obj.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(obj.get(key), dict):
            _merge_patch(obj[key], value)
        else:
            obj[key] = copy.deepcopy(value)


def with_pods(member: Member, pods: Mapping[str, int], cpu: str | None = None) -> None:
    """Give ``member`` a fleet-manager monitor whose pod watch has listed ``pods``
    (namespace -> how many pods run there, each requesting ``cpu`` if given)."""
    monitor = MemberMonitor.from_kubeconfig(
        member.name,
        KUBECONFIG,
        "1",
        options=ConnectionOptions(),
        policy=HealthPolicy(),
        allow_exec=False,
        on_change=lambda: None,
    )
    requests = {"cpu": cpu} if cpu else {}
    container = {"name": "c", "resources": {"requests": requests}}
    listed = {
        f"{ns}/p{i}": slim_pod(
            {
                "metadata": {"name": f"p{i}", "namespace": ns},
                "spec": {"nodeName": "n1", "containers": [container]},
                "status": {"phase": "Running"},
            }
        )
        for ns, count in pods.items()
        for i in range(count)
    }
    monitor.informers[1]._replace(listed)  # as the first listing does
    member.monitor = monitor
