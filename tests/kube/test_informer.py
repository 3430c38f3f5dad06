"""The informer: its first fill from a list or from a watch's initial events (a streamed
list), and its backoff (after the server was unreachable, it tries again as soon as the
server answers anything, not after its whole backoff)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from types import SimpleNamespace
from typing import Any, cast

import anyio
import pytest

from kube.connection import KubeConnection
from kube.discovery import ResourceInfo
from kube.errors import ApiError
from kube.informer import INITIAL_EVENTS_END, Informer
from kube.transport import serves_watch_list

Event = dict[str, Any]


def _cm(name: str, rv: str, **data: str) -> dict[str, Any]:
    meta = {"name": name, "namespace": "ns", "resourceVersion": rv}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def _bookmark(rv: str, end: bool = False) -> Event:
    annotations = {INITIAL_EVENTS_END: "true"} if end else {}
    return {
        "type": "BOOKMARK",
        "object": {"metadata": {"resourceVersion": rv, "annotations": annotations}},
    }


class ScriptedServer:
    """A connection whose watches play scripted events (a list of events per watch, or an
    ApiError to raise), whose lists answer ``listing``, and which records what was asked."""

    def __init__(self, watches: list[list[Event] | ApiError], watch_list: bool = True) -> None:
        self.name = "m1"
        self.answered_at: float | None = None
        self.watch_list: bool | None = watch_list
        self.listing: dict[str, Any] = {"metadata": {"resourceVersion": "5"}, "items": []}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self._watches = watches
        self.played = anyio.Event()

    async def streams_initial_events(self) -> bool:
        return bool(self.watch_list)

    def refuse_watch_list(self) -> None:
        self.watch_list = False

    async def resource(self, api_version: str, kind: str) -> ResourceInfo:
        return ResourceInfo("", "v1", kind, "configmaps", True)

    async def request(self, method: str, path: str, params: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("list", params))
        return self.listing

    async def stream(
        self,
        path: str,
        params: dict[str, Any],
        read_timeout_s: float,
        lifetime_s: float | None = None,
    ) -> AsyncIterator[Event]:
        self.calls.append(("watch", params))
        if not self._watches:
            self.played.set()
            await anyio.sleep_forever()
        script = self._watches.pop(0)
        if isinstance(script, ApiError):
            raise script
        for event in script:
            yield event


def _run(
    server: ScriptedServer,
    seen: list[tuple[str, str]],
    index: Callable[[dict[str, Any]], str | None] | None = None,
    first_from_any_state: bool = False,
) -> Informer:
    def handler(event: str, old: Any, new: Any) -> None:
        seen.append((event, (new or old)["metadata"]["name"]))

    informer = Informer(
        cast(KubeConnection, server),
        "v1",
        "ConfigMap",
        handler,
        index=index,
        first_from_any_state=first_from_any_state,
    )

    async def main() -> None:
        with anyio.fail_after(30):  # hang guard
            async with anyio.create_task_group() as tg:
                tg.start_soon(informer.run)
                await server.played.wait()
                tg.cancel_scope.cancel()

    anyio.run(main)
    return informer


def test_a_watch_that_begins_with_the_objects_fills_the_cache_without_a_list() -> None:
    server = ScriptedServer(
        [
            [
                {"type": "ADDED", "object": _cm("a", "3")},
                {"type": "ADDED", "object": _cm("b", "4")},
                _bookmark("4", end=True),
                {"type": "MODIFIED", "object": _cm("a", "6", k="v")},
            ]
        ]
    )
    seen: list[tuple[str, str]] = []
    informer = _run(server, seen)
    assert informer.synced
    assert seen == [("ADDED", "a"), ("ADDED", "b"), ("MODIFIED", "a")]
    assert informer.get("ns/a") == _cm("a", "6", k="v")
    assert [c for c, _ in server.calls] == ["watch", "watch"]  # no list
    first, then = (params for _, params in server.calls)
    assert first["sendInitialEvents"] == "true"
    assert first["resourceVersionMatch"] == "NotOlderThan"
    assert "resourceVersion" not in first
    assert then["resourceVersion"] == "6"
    assert "sendInitialEvents" not in then


def test_a_first_fill_from_any_state_asks_for_version_0_and_later_fills_the_latest() -> None:
    server = ScriptedServer(
        [
            [{"type": "ADDED", "object": _cm("a", "3")}, _bookmark("4", end=True)],
            ApiError("m1", "too old", status=410),
            [_bookmark("9", end=True)],
        ]
    )
    informer = _run(server, [], first_from_any_state=True)
    first, expired, again, _ = (params for _, params in server.calls)
    # No read of the server's storage first: whatever its watch cache has.
    assert (first["resourceVersion"], first["resourceVersionMatch"]) == ("0", "NotOlderThan")
    assert first["sendInitialEvents"] == "true"
    assert expired["resourceVersion"] == "4"  # (the watch that goes on from the first fill)
    # Filled once: the next fill (after the version expired) is of the latest.
    assert "resourceVersion" not in again
    assert again["resourceVersionMatch"] == "NotOlderThan"
    assert informer.synced


def test_a_first_fill_is_of_the_latest_unless_any_state_is_asked_for() -> None:
    server = ScriptedServer([[_bookmark("4", end=True)]])
    _run(server, [])
    (_, first), _ = server.calls
    assert "resourceVersion" not in first
    assert first["resourceVersionMatch"] == "NotOlderThan"


def test_a_list_from_any_state_where_watches_cannot_begin_with_the_objects() -> None:
    server = ScriptedServer([[]], watch_list=False)
    _run(server, [], first_from_any_state=True)
    (_, listed), (_, watched), _ = server.calls
    assert listed["resourceVersion"] == "0"
    assert watched["resourceVersion"] == "5"  # from the list, as always


def test_initial_events_are_not_the_cache_until_the_server_says_they_ended() -> None:
    # The stream ends before the end bookmark: nothing is cached or reported; the next
    # watch begins with the objects again.
    server = ScriptedServer(
        [
            [{"type": "ADDED", "object": _cm("a", "3")}, _bookmark("3")],
            [{"type": "ADDED", "object": _cm("b", "7")}, _bookmark("7", end=True)],
        ]
    )
    seen: list[tuple[str, str]] = []
    informer = _run(server, seen)
    assert seen == [("ADDED", "b")]
    assert list(informer.cache) == ["ns/b"]
    assert [p.get("sendInitialEvents") for _, p in server.calls] == ["true", "true", None]
    assert server.calls[-1][1]["resourceVersion"] == "7"


def test_starting_over_reports_what_went_away_meanwhile() -> None:
    server = ScriptedServer(
        [
            [{"type": "ADDED", "object": _cm("a", "3")}, _bookmark("3", end=True)],
            ApiError("m1", "too old", status=410),
            [{"type": "ADDED", "object": _cm("b", "9")}, _bookmark("9", end=True)],
        ]
    )
    seen: list[tuple[str, str]] = []
    informer = _run(server, seen)
    assert seen == [("ADDED", "a"), ("ADDED", "b"), ("DELETED", "a")]
    assert list(informer.cache) == ["ns/b"]


@pytest.mark.parametrize("status", [400, 422])
def test_a_server_that_refuses_it_is_listed_then_watched_from_then_on(status: int) -> None:
    refusal = ApiError("m1", "sendInitialEvents is forbidden", status=status)
    server = ScriptedServer([refusal, [{"type": "ADDED", "object": _cm("b", "8")}]])
    server.listing["items"] = [_cm("a", "5")]
    seen: list[tuple[str, str]] = []
    informer = _run(server, seen)
    assert server.watch_list is False
    assert [c for c, _ in server.calls] == ["watch", "list", "watch", "watch"]
    assert server.calls[2][1]["resourceVersion"] == "5"
    assert seen == [("ADDED", "a"), ("ADDED", "b")]
    assert informer.synced
    assert informer.last_error is None


def test_without_it_the_first_fill_is_a_list() -> None:
    server = ScriptedServer([[{"type": "ADDED", "object": _cm("b", "8")}]], watch_list=False)
    server.listing["items"] = [_cm("a", "5")]
    seen: list[tuple[str, str]] = []
    _run(server, seen)
    assert [c for c, _ in server.calls] == ["list", "watch", "watch"]
    assert seen == [("ADDED", "a"), ("ADDED", "b")]


@pytest.mark.parametrize(
    ("git_version", "streams"),
    [
        ("v1.37.2", True),
        ("v1.32.0", True),
        ("v1.33.4-eks-1a2b3c", True),  # off by default there: refused once, then listed
        ("v1.31.9", False),
        ("v1.26.0", False),  # older servers ignore the request: never tried
        ("v2.0.0", True),
        ("", False),
        ("not a version", False),
        ("v1", False),
    ],
)
def test_which_servers_are_asked_for_watches_that_begin_with_the_objects(
    git_version: str, streams: bool
) -> None:
    assert serves_watch_list(git_version) is streams


def _informer() -> tuple[Informer, SimpleNamespace]:
    connection = SimpleNamespace(name="m1", answered_at=None)
    informer = Informer(cast(KubeConnection, connection), "v1", "Pod", lambda *_: None)
    return informer, connection


def test_after_an_outage_the_backoff_ends_when_the_server_answers_again() -> None:
    informer, connection = _informer()

    async def main() -> None:
        async def answer_soon() -> None:
            await anyio.sleep(0.2)
            connection.answered_at = time.monotonic()  # a probe, or another cache, got through

        with anyio.fail_after(60):  # hang guard: the backoff below is an hour
            async with anyio.create_task_group() as tg:
                tg.start_soon(answer_soon)
                await informer._back_off(3600, unreachable=True)

    anyio.run(main)


def test_a_refusal_waits_its_whole_backoff_whatever_else_answers() -> None:
    informer, connection = _informer()
    connection.answered_at = time.monotonic() + 3600  # answers keep coming

    async def main() -> float:
        started = time.monotonic()
        await informer._back_off(0.3, unreachable=False)
        return time.monotonic() - started

    assert anyio.run(main) >= 0.3


def test_a_list_without_a_version_is_watched_as_before_not_as_a_streamed_list() -> None:
    # A member that streams no lists answers a list without resourceVersion (broken or
    # hostile): its watch must not ask for initial events it would never end.
    server = ScriptedServer([[{"type": "ADDED", "object": _cm("b", "8")}]], watch_list=False)
    server.listing = {"items": [_cm("a", "5")]}
    seen: list[tuple[str, str]] = []
    _run(server, seen)
    watch = server.calls[1][1]
    assert watch["resourceVersion"] == ""
    assert "sendInitialEvents" not in watch
    assert seen == [("ADDED", "a"), ("ADDED", "b")]


def test_the_index_follows_every_change_and_a_fresh_listing() -> None:
    """Objects are found by their index value (here their data's "app") as the watch
    adds, changes and deletes them, and after a relist."""
    server = ScriptedServer(
        [
            [
                {"type": "ADDED", "object": _cm("a", "3", app="x")},
                {"type": "ADDED", "object": _cm("b", "4", app="x")},
                {"type": "ADDED", "object": _cm("c", "5")},  # no value: not indexed
                _bookmark("5", end=True),
                {"type": "MODIFIED", "object": _cm("a", "6", app="y")},
                {"type": "DELETED", "object": _cm("b", "7", app="x")},
                {"type": "ADDED", "object": _cm("d", "8", app="y")},
            ],
            ApiError("m1", "too old", status=410),
            [
                {"type": "ADDED", "object": _cm("d", "8", app="y")},
                {"type": "ADDED", "object": _cm("e", "9", app="x")},
                _bookmark("9", end=True),
            ],
        ]
    )
    seen: list[tuple[str, str]] = []
    informer = _run(server, seen, lambda obj: (obj.get("data") or {}).get("app"))
    found = {v: sorted(o["metadata"]["name"] for o in informer.indexed(v)) for v in "xy"}
    assert found == {"x": ["e"], "y": ["d"]}
    assert seen[-3:] == [("ADDED", "e"), ("DELETED", "a"), ("DELETED", "c")]
    assert informer.indexed("z") == []


def test_the_index_between_the_watchs_events() -> None:
    server = ScriptedServer(
        [
            [
                {"type": "ADDED", "object": _cm("a", "3", app="x")},
                {"type": "ADDED", "object": _cm("b", "4", app="x")},
                _bookmark("4", end=True),
                {"type": "MODIFIED", "object": _cm("a", "6", app="y")},
                {"type": "DELETED", "object": _cm("b", "7", app="x")},
            ]
        ]
    )
    informer = _run(server, [], lambda obj: (obj.get("data") or {}).get("app"))
    assert [o["metadata"]["name"] for o in informer.indexed("y")] == ["a"]
    assert informer.indexed("x") == []
    assert informer._indexed.keys() == {"y"}  # an emptied value is dropped, not kept


class NamespacedServer:
    """A connection whose watches play scripted events per namespace (by the path asked
    for), serving ``kind`` as namespaced or not, and which records the paths asked for."""

    def __init__(self, scripts: dict[str, list[list[Event] | ApiError]], namespaced: bool = True):
        self.name = "m1"
        self.answered_at: float | None = None
        self.namespaced = namespaced
        self.paths: list[str] = []
        self.discovery_failures = 0
        """Discovery requests that fail as an unreachable server's do, before it answers."""
        self.discovered = 0
        self._scripts = scripts
        self._idle: set[str] = set()
        self.played = anyio.Event()

    async def streams_initial_events(self) -> bool:
        return True

    async def resource(self, api_version: str, kind: str) -> ResourceInfo:
        self.discovered += 1
        if self.discovery_failures:
            self.discovery_failures -= 1
            raise ApiError(self.name, "GET /api/v1: connection refused", retryable=True)
        return ResourceInfo("", "v1", kind, "configmaps", self.namespaced)

    async def stream(
        self,
        path: str,
        params: dict[str, Any],
        read_timeout_s: float,
        lifetime_s: float | None = None,
    ) -> AsyncIterator[Event]:
        self.paths.append(path)
        namespace = path.split("/")[4]
        if not self._scripts[namespace]:
            self._idle.add(namespace)
            if self._idle == set(self._scripts):
                self.played.set()
            await anyio.sleep_forever()
        script = self._scripts[namespace].pop(0)
        if isinstance(script, ApiError):
            raise script
        for event in script:
            yield event


def _cm_in(namespace: str, name: str, rv: str) -> dict[str, Any]:
    return {
        **_cm(name, rv),
        "metadata": {"name": name, "namespace": namespace, "resourceVersion": rv},
    }


def _run_namespaces(
    server: NamespacedServer, seen: list[tuple[str, str]], until_played: bool = True
) -> Informer:
    def handler(event: str, old: Any, new: Any) -> None:
        meta = (new or old)["metadata"]
        seen.append((event, f"{meta['namespace']}/{meta['name']}"))

    informer = Informer(
        cast(KubeConnection, server), "v1", "ConfigMap", handler, namespaces=("a", "b")
    )

    async def main() -> None:
        with anyio.fail_after(30):  # hang guard
            async with anyio.create_task_group() as tg:
                tg.start_soon(informer.run)
                if until_played:
                    await server.played.wait()
                else:
                    await anyio.wait_all_tasks_blocked()
                tg.cancel_scope.cancel()

    anyio.run(main)
    return informer


def test_namespaces_are_each_watched_and_read_as_one_cache() -> None:
    server = NamespacedServer(
        {
            "a": [[{"type": "ADDED", "object": _cm_in("a", "x", "3")}, _bookmark("3", end=True)]],
            "b": [
                [
                    {"type": "ADDED", "object": _cm_in("b", "y", "4")},
                    _bookmark("4", end=True),
                    {"type": "MODIFIED", "object": _cm_in("b", "y", "6")},
                ]
            ],
        }
    )
    seen: list[tuple[str, str]] = []
    informer = _run_namespaces(server, seen)
    assert informer.synced
    assert sorted(informer.cache) == ["a/x", "b/y"]
    assert informer.get("b/y") == _cm_in("b", "y", "6")
    assert sorted(seen) == [("ADDED", "a/x"), ("ADDED", "b/y"), ("MODIFIED", "b/y")]
    # Never a watch of the whole cluster: each namespace's own.
    assert set(server.paths) == {
        "/api/v1/namespaces/a/configmaps",
        "/api/v1/namespaces/b/configmaps",
    }


def test_namespaces_are_listed_once_every_one_of_them_is() -> None:
    server = NamespacedServer(
        {
            "a": [[{"type": "ADDED", "object": _cm_in("a", "x", "3")}, _bookmark("3", end=True)]],
            "b": [[{"type": "ADDED", "object": _cm_in("b", "y", "4")}]],  # not ended: cut
        }
    )
    informer = _run_namespaces(server, [], until_played=False)
    assert not informer.synced
    assert list(informer.cache) == ["a/x"]


def test_one_namespace_starting_over_leaves_the_others_objects() -> None:
    server = NamespacedServer(
        {
            "a": [
                [
                    {"type": "ADDED", "object": _cm_in("a", "x", "3")},
                    {"type": "ADDED", "object": _cm_in("a", "z", "3")},
                    _bookmark("3", end=True),
                ],
                ApiError("m1", "too old", status=410),
                [{"type": "ADDED", "object": _cm_in("a", "z", "3")}, _bookmark("9", end=True)],
            ],
            "b": [[{"type": "ADDED", "object": _cm_in("b", "y", "4")}, _bookmark("4", end=True)]],
        }
    )
    seen: list[tuple[str, str]] = []
    informer = _run_namespaces(server, seen)
    assert sorted(informer.cache) == ["a/z", "b/y"]
    assert ("DELETED", "a/x") in seen
    assert ("DELETED", "b/y") not in seen


def test_a_cluster_scoped_kind_is_not_watched_in_namespaces() -> None:
    server = NamespacedServer({"a": [], "b": []}, namespaced=False)
    informer = _run_namespaces(server, [], until_played=False)
    assert informer.synced
    assert informer.snapshot() == []
    assert server.paths == []


def test_a_kind_whose_scope_is_not_known_yet_is_asked_again_before_watching() -> None:
    # Guessed namespaced, a cluster-scoped kind would be watched whole, once per namespace.
    server = NamespacedServer({"a": [], "b": []}, namespaced=False)
    server.discovery_failures = 1
    informer = Informer(
        cast(KubeConnection, server), "v1", "ConfigMap", lambda *_: None, namespaces=("a", "b")
    )

    async def main() -> None:
        with anyio.fail_after(10):  # hang guard
            async with anyio.create_task_group() as tg:
                tg.start_soon(informer.run)
                await informer.wait_synced()
                tg.cancel_scope.cancel()

    anyio.run(main)
    assert server.discovered == 2
    assert server.paths == []


def test_an_informer_takes_a_namespace_or_namespaces_not_both() -> None:
    with pytest.raises(ValueError, match="not both"):
        Informer(
            cast(KubeConnection, NamespacedServer({})),
            "v1",
            "ConfigMap",
            lambda *_: None,
            namespace="a",
            namespaces=("b",),
        )


def test_a_server_that_ends_every_watch_at_once_gets_them_back_with_backoff() -> None:
    """A watch ended normally within a second is followed by a backoff, as client-go's
    reflector does: ~1,700 watches a second came back before (the backoff was reset by
    a normal end). Each resumes from the version the last one reached."""
    server = ScriptedServer([[_bookmark("4", end=True)], *([[_bookmark("5")]] * 100)])
    informer = Informer(cast(KubeConnection, server), "v1", "ConfigMap", lambda *_: None)
    _run_for(informer, 2.5)
    watches = [params for call, params in server.calls if call == "watch"]
    # 0.5, 1 and 2 s of backoff (each from half to one and a half of that) fit ~2.5 s:
    # four watches, five at most; a hundred had they come back at once.
    assert 2 <= len(watches) <= 5
    assert [w.get("resourceVersion") for w in watches[1:]] == ["4"] + ["5"] * (len(watches) - 2)
    assert informer.synced
    assert informer.last_error is None


@pytest.mark.parametrize(
    ("event", "says"),
    [
        ("not an object", "a watch event that is not an object"),
        ({"type": "ADDED"}, "without an object"),
        ({"type": "EXPLODED", "object": {}}, "of type 'EXPLODED'"),
        ({"type": "ADDED", "object": {"metadata": {}}}, "has no metadata.name"),
        ({"type": "ADDED", "object": {"metadata": {"name": ["x"]}}}, "has no metadata.name"),
        ({"type": "ADDED", "object": {"metadata": "x"}}, "has no metadata.name"),
        (
            {"type": "ADDED", "object": {"metadata": {"name": "a", "namespace": 5}}},
            "metadata.namespace is no string",
        ),
    ],
)
def test_a_malformed_event_is_a_retryable_error_and_the_cache_keeps_what_it_had(
    event: Any, says: str
) -> None:
    """A broken or hostile member: its event neither reaches the cache nor ends the
    informer (before, a KeyError left the member's unit, and the controller with it)."""
    server = ScriptedServer(
        [
            [{"type": "ADDED", "object": _cm("a", "3")}, _bookmark("4", end=True), event],
            [{"type": "ADDED", "object": _cm("b", "6")}, _bookmark("7", end=True)],
        ]
    )
    errors: list[str | None] = []
    seen: list[tuple[str, str]] = []

    def handler(kind: str, old: Any, new: Any) -> None:
        seen.append((kind, (new or old)["metadata"]["name"]))
        errors.append(informer.last_error)

    informer = Informer(cast(KubeConnection, server), "v1", "ConfigMap", handler)

    async def main() -> None:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(informer.run)
                await server.played.wait()
                tg.cancel_scope.cancel()

    anyio.run(main)
    # The second watch started over (a fresh fill): "a" is gone from what it holds.
    assert seen == [("ADDED", "a"), ("ADDED", "b"), ("DELETED", "a")]
    assert says in str(errors[1])
    assert informer.get("ns/b") is not None


def test_a_list_whose_items_are_malformed_is_refused_whole() -> None:
    server = ScriptedServer([[_bookmark("6")]], watch_list=False)
    server.listing = {"metadata": {"resourceVersion": "5"}, "items": [_cm("a", "3"), {"x": 1}]}
    informer = Informer(cast(KubeConnection, server), "v1", "ConfigMap", lambda *_: None)
    _run_for(informer, 0.3)
    assert not informer.synced
    assert informer.cache == {}
    assert "a list with an object that has no metadata.name" in str(informer.last_error)


def _run_for(informer: Informer, seconds: float) -> None:
    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(informer.run)
            await anyio.sleep(seconds)
            tg.cancel_scope.cancel()

    anyio.run(main)
