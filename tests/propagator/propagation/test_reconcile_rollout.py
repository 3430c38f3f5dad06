"""The rollout inside the application reconcile, without I/O: the revisions kept on a
fake hub, which revision each cluster is given wave by wave, suspension and undo."""

from __future__ import annotations

from typing import Any

from api.application import ApplicationPropagation
from api.crd import crd_of
from api.rollout import ROLLOUT_ACTION_ANNOTATION
from propagator.rollout.driver import suspended_clusters
from propagator.rollout.history import DIGEST_LABEL
from tests.e2e.manifests import application, config_map
from tests.propagator.propagation.test_reconcile import Harness

CLUSTERS = ("a", "b", "c")
WAVES = {"groups": [{"name": "one", "clusters": ["a"]}], "minHealthyTime": "0s"}


def app(value: str, **spec: Any) -> dict[str, Any]:
    return application("web", "shop", [config_map("web", "shop", v=value)], "f", **spec)


def settle(h: Harness) -> None:
    """Plan, the member syncs apply what each cluster is given, the status is written."""
    h.reconcile()
    h.synced("shop/web", *CLUSTERS)
    h.reconcile(replan=False)


def given(h: Harness) -> dict[str, str]:
    out = {}
    for c in CLUSTERS:
        work = h.table.get("shop/web", c)
        assert work is not None
        out[c] = work.objects[0]["data"]["v"]
    return out


def change(h: Harness, value: str, **spec: Any) -> None:
    h.hub.app["spec"]["resources"]["manifests"][0]["data"]["v"] = value
    h.hub.app["spec"].update(spec)
    h.hub.app["metadata"]["generation"] += 1


def act(h: Harness, value: str) -> None:
    h.hub.app["metadata"].setdefault("annotations", {})[ROLLOUT_ACTION_ANNOTATION] = value


def kept(h: Harness) -> list[int]:
    return sorted(
        r["revision"] for r in h.hub.revisions.values() if DIGEST_LABEL in r["metadata"]["labels"]
    )


def rollout(h: Harness) -> dict[str, Any]:
    return h.hub.app["status"]["rollout"]  # type: ignore[no-any-return]


def test_every_revision_is_kept_and_a_wave_gets_it_while_the_rest_render_the_last() -> None:
    h = Harness(app("1", rollout={"waves": WAVES}), clusters=CLUSTERS)
    settle(h)
    assert kept(h) == [1]
    assert (rollout(h)["phase"], rollout(h)["revision"]) == ("Complete", 1)
    change(h, "2")
    settle(h)
    assert kept(h) == [1, 2]
    assert given(h) == {"a": "2", "b": "1", "c": "1"}
    lines = {line["name"]: line for line in h.hub.app["status"]["clusters"]}
    assert {c: line["rolloutRevision"] for c, line in lines.items()} == {"a": 2, "b": 1, "c": 1}
    # Wave one is applied and healthy (no minimum time): the rest goes next.
    settle(h)
    assert given(h) == {"a": "2", "b": "2", "c": "2"}
    settle(h)
    assert rollout(h)["phase"] == "Complete"


def test_the_old_revision_is_rendered_from_the_hub_after_a_restart() -> None:
    h = Harness(app("1", rollout={"waves": WAVES}), clusters=CLUSTERS)
    settle(h)
    change(h, "2")
    settle(h)
    restarted = Harness(h.hub.app, clusters=CLUSTERS)  # a new controller, the same hub
    restarted.hub = h.hub
    restarted.reconciler.hub = h.hub  # type: ignore[assignment]
    restarted.reconciler.rollout.revisions.hub = h.hub  # type: ignore[assignment]
    restarted.reconcile()
    assert given(restarted)["b"] == "1"


def test_suspend_keeps_each_cluster_on_what_it_runs_and_writes_nothing() -> None:
    h = Harness(app("1"), clusters=CLUSTERS)
    settle(h)
    change(h, "2", suspend=True)
    settle(h)
    assert given(h) == {"a": "1", "b": "1", "c": "1"}
    assert all(w.suspended for c in CLUSTERS if (w := h.table.get("shop/web", c)))
    assert rollout(h)["phase"] == "Suspended"
    assert "revision 2 waits" in rollout(h)["message"]
    change(h, "2", suspend=False)
    settle(h)
    assert given(h) == {"a": "2", "b": "2", "c": "2"}
    assert not any(w.suspended for c in CLUSTERS if (w := h.table.get("shop/web", c)))


def test_a_suspended_cluster_alone_keeps_its_revision() -> None:
    h = Harness(app("1"), clusters=CLUSTERS)
    settle(h)
    change(h, "2", suspendedClusters={"clusters": ["b"]})
    settle(h)
    assert given(h) == {"a": "2", "b": "1", "c": "2"}
    work = h.table.get("shop/web", "b")
    assert work is not None
    assert work.suspended


def test_undo_returns_to_the_kept_revision_and_one_not_kept_is_named() -> None:
    h = Harness(app("1"), clusters=CLUSTERS)
    settle(h)
    change(h, "2")
    settle(h)
    settle(h)
    act(h, "undo:7/now")
    settle(h)
    assert "revision 7 is no longer kept (kept: 1, 2)" in rollout(h)["message"]
    assert given(h) == {"a": "2", "b": "2", "c": "2"}
    act(h, "undo/later")
    settle(h)
    assert given(h) == {"a": "1", "b": "1", "c": "1"}
    assert (rollout(h)["revision"], rollout(h)["specRevision"], rollout(h)["specHeld"]) == (
        1,
        2,
        True,
    )
    settle(h)  # the spec is unchanged: revision 2 stays held
    assert given(h) == {"a": "1", "b": "1", "c": "1"}
    act(h, "resume/again")
    settle(h)
    assert given(h) == {"a": "2", "b": "2", "c": "2"}


def test_only_the_history_limit_is_kept_but_never_a_revision_a_cluster_runs() -> None:
    h = Harness(app("1", rollout={"revisionHistoryLimit": 2}), clusters=CLUSTERS)
    for value in "1234":
        if value != "1":
            change(h, value)
        settle(h)
        settle(h)
    assert kept(h) == [3, 4]
    assert rollout(h)["history"] == [3, 4]


def test_suspended_clusters_are_those_named_and_those_selected() -> None:
    spec = {"clusters": ["a"], "clusterSelector": {"matchLabels": {"upgrading": "true"}}}
    validated = ApplicationPropagation.model_validate(app("1", suspendedClusters=spec))
    labels = {"b": {"upgrading": "true"}, "c": {"upgrading": "false"}}
    assert suspended_clusters(validated, ["a", "b", "c"], labels) == {"a", "b"}


def _defaulted(schema: dict[str, Any]) -> set[str]:
    return {k for k, v in (schema.get("properties") or {}).items() if "default" in v}


def test_what_the_hub_defaults_in_a_status_the_controller_writes_itself() -> None:
    """The hub fills a status field the controller leaves out with its schema's default:
    one left out would make every status differ from the hub's and be written again."""
    status = crd_of(ApplicationPropagation)["spec"]["versions"][0]["schema"]["openAPIV3Schema"][
        "properties"
    ]["status"]["properties"]
    h = Harness(app("1", rollout={"waves": WAVES}), clusters=CLUSTERS)
    settle(h)
    change(h, "2")
    settle(h)
    written = h.hub.app["status"]
    for line in written["clusters"]:
        assert _defaulted(status["clusters"]["items"]) <= set(line)
    assert _defaulted(status["rollout"]) <= set(written["rollout"])
