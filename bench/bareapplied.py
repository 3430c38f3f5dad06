"""The servers' limit for ``bench.propagation``'s create → ``Applied``: the fewest requests
any controller makes for a new application, sent by a loop that does nothing else.

It watches the ApplicationPropagations of one hub namespace. For each new one it writes
Propagator's cleanup finalizer unless the hub's admission policy put it there at creation
(before anything reaches a member, as any controller that cleans up must), applies
the application's manifests, stamped as Propagator stamps them, on every member at once (one
create each, as Propagator's first apply), and writes the ``Applied`` condition. No
scheduling, rendering, validation, caches or status beyond that condition. For one being
deleted, it deletes those objects and removes its finalizer. Run as a child process of
``bench.propagation``, as the controller is, on the same hub and members, so the two are
timed the same way and the difference is what the controller's work costs.

    python -m bench.bareapplied HUB_KUBECONFIG NAMESPACE MEMBER_KUBECONFIG...
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import anyio

from api.finalizerpolicy import FINALIZER
from kube.connection import KubeConnection
from kube.errors import ApiError
from kube.kubeconfig import load_kubeconfig
from kube.session import ConnectionOptions
from propagator.runtime import eventloop
from propagator.work.objects import Owner, revision_of
from tests.e2e.manifests import GROUP, PLURAL, VERSION

API_VERSION = f"{GROUP}/{VERSION}"
KIND = "ApplicationPropagation"


def _connect(path: str) -> KubeConnection:
    name = Path(path).stem
    loaded = load_kubeconfig(Path(path).read_text(), source=name)
    return KubeConnection(name, loaded.credentials, ConnectionOptions())


class BareController:
    """One hub namespace's applications, propagated with nothing but the writes."""

    def __init__(self, hub: KubeConnection, namespace: str, members: list[KubeConnection]):
        self.hub, self.namespace, self.members = hub, namespace, members
        self.acted_on: set[tuple[str, bool]] = set()
        """(uid, deleting) of what was propagated or removed: each is done once, however
        many events come for it."""

    def _stamped(self, app: dict[str, Any], member: str) -> list[dict[str, Any]]:
        meta = app["metadata"]
        owner = Owner(meta["namespace"], meta["name"], meta["uid"])
        manifests = app["spec"]["resources"]["manifests"]
        return [owner.stamp(m, revision_of([m]), member) for m in manifests]

    async def _on_every_member(
        self,
        app: dict[str, Any],
        call: Callable[[KubeConnection, dict[str, Any]], Coroutine[Any, Any, None]],
    ) -> None:
        async with anyio.create_task_group() as tg:
            for member in self.members:
                for obj in self._stamped(app, member.name):
                    tg.start_soon(call, member, obj)

    async def propagate(self, app: dict[str, Any]) -> None:
        meta = app["metadata"]
        if FINALIZER not in (meta.get("finalizers") or []):  # no admission policy added it
            guarded = {"finalizers": [FINALIZER], "resourceVersion": meta["resourceVersion"]}
            await self.hub.merge_patch(
                API_VERSION, KIND, meta["name"], {"metadata": guarded}, namespace=self.namespace
            )

        async def create(member: KubeConnection, obj: dict[str, Any]) -> None:
            await member.apply(obj, new=True)

        await self._on_every_member(app, create)
        applied = {
            "type": "Applied",
            "status": "True",
            "observedGeneration": meta.get("generation", 1),
            "lastTransitionTime": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "reason": "Applied",
            "message": f"applied on {len(self.members)} clusters",
        }
        await self.hub.merge_patch(
            API_VERSION,
            KIND,
            meta["name"],
            {"status": {"conditions": [applied]}},
            namespace=self.namespace,
            subresource="status",
        )

    async def remove(self, app: dict[str, Any]) -> None:
        async def delete(member: KubeConnection, obj: dict[str, Any]) -> None:
            meta = obj["metadata"]
            await member.delete(obj["apiVersion"], obj["kind"], meta["name"], meta["namespace"])

        await self._on_every_member(app, delete)
        name = app["metadata"]["name"]
        await self.hub.merge_patch(
            API_VERSION, KIND, name, {"metadata": {"finalizers": []}}, namespace=self.namespace
        )

    async def _act(self, app: dict[str, Any]) -> None:
        meta = app["metadata"]
        deleting = bool(meta.get("deletionTimestamp"))
        key = (str(meta["uid"]), deleting)
        # A new one is propagated, a deleted one still held by the finalizer removed.
        if key in self.acted_on or (deleting and FINALIZER not in (meta.get("finalizers") or [])):
            return
        self.acted_on.add(key)
        await (self.remove if deleting else self.propagate)(app)

    async def run(self) -> None:
        """Act on the applications there are, then on each change; prints ``watching``
        once every later change will be seen."""
        path = f"/apis/{GROUP}/{VERSION}/namespaces/{self.namespace}/{PLURAL}"
        while True:
            try:
                listing = await self.hub.request("GET", path)
                break
            except ApiError as exc:  # the CRDs just installed: "storage is initializing"
                if not exc.retryable:
                    raise
                await anyio.sleep(exc.retry_after_s or 0.2)
        version = listing["metadata"]["resourceVersion"]
        params = {"watch": "true", "allowWatchBookmarks": "true"}
        print("watching", flush=True)
        async with anyio.create_task_group() as tg:
            for app in listing["items"]:
                tg.start_soon(self._act, app)
            while True:  # a watch the server ends is started again from where it was
                async for event in self.hub.stream(
                    path, {**params, "resourceVersion": version}, 60
                ):
                    obj = event["object"]
                    version = obj["metadata"]["resourceVersion"]
                    if event["type"] in ("ADDED", "MODIFIED"):
                        tg.start_soon(self._act, obj)


def main() -> None:
    hub, namespace, *members = sys.argv[1:]
    controller = BareController(_connect(hub), namespace, [_connect(m) for m in members])
    eventloop.run(controller.run)  # the controller's event loop


if __name__ == "__main__":
    main()
