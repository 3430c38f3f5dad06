"""Progressive rollout on the real hub and three members (kwok pods that really become
Ready): a revision wave by wave, each wave after the one before was healthy for its
minimum time; a bad revision halted at the first wave and undone; suspension of the
application and of one cluster; a controller killed mid-wave resuming in that wave."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from fleet.local.kwok import UNREADY_ANNOTATION
from tests.e2e.conftest import Fleet
from tests.e2e.controller import Controller, kubectl_propagator, running
from tests.e2e.manifests import config_map, deployment
from tests.e2e.propagation.test_propagation import (
    ENV,
    MEMBERS,
    ap_gone,
    application,
    cluster_entry,
    create,
    custom,
    delete_ap,
    get_ap,
    update_spec,
    wait_ap,
)
from tests.e2e.waiting import HANG_GUARD_S, eventually

NAMESPACES = (
    "waves-good",
    "waves-bad",
    "waves-suspend",
    "waves-one",
    "waves-restart",
    "waves-canary",
)
POLL_S = 0.2
# One cluster per wave, in the members' order.
WAVES = {
    "groups": [{"name": f"w{i + 1}", "clusters": [m]} for i, m in enumerate(MEMBERS)],
    "minHealthyTime": "5s",
    "progressDeadline": "2m",
}


@pytest.fixture(scope="module")
def controller(
    fleet: Fleet, joined: list[str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Controller]:
    with running(fleet, tmp_path_factory.mktemp("waves"), ENV) as controller:
        yield controller
        for namespace in NAMESPACES:
            if not ap_gone(fleet, namespace, "web"):
                delete_ap(fleet, namespace, "web")
                eventually(lambda ns=namespace: ap_gone(fleet, ns, "web") or None, "ap gone")  # type: ignore[misc]


def _app(namespace: str, waves: dict[str, Any] | None = WAVES, **spec: Any) -> dict[str, Any]:
    rollout = {"waves": waves} if waves is not None else {}
    return application(
        "web",
        namespace,
        [deployment("web", namespace, "nginx:1.27", 1), config_map("web", namespace, v="1")],
        rollout=rollout,
        **spec,
    )


def _rollout(app: dict[str, Any]) -> dict[str, Any]:
    return (app.get("status") or {}).get("rollout") or {}


def _complete(fleet: Fleet, ns: str, revision: int) -> dict[str, Any]:
    return wait_ap(
        fleet,
        ns,
        "web",
        f"revision {revision} complete",
        lambda a: (
            _rollout(a).get("phase") == "Complete" and _rollout(a).get("revision") == revision
        ),
    )


def _image(value: str, unready: bool = False) -> Callable[[dict[str, Any]], None]:
    def change(spec: dict[str, Any]) -> None:
        template = spec["resources"]["manifests"][0]["spec"]["template"]
        template["spec"]["containers"][0]["image"] = value
        if unready:
            template["metadata"]["annotations"] = {UNREADY_ANNOTATION: "true"}
        spec["resources"]["manifests"][1]["data"]["v"] = value

    return change


def _deployment(fleet: Fleet, cluster: str, ns: str) -> Any:
    return fleet.apps(cluster).read_namespaced_deployment("web", ns)


def _runs(fleet: Fleet, cluster: str, ns: str, image: str) -> bool:
    """The member's Deployment asks for ``image`` and its pods with it are Ready."""
    d = _deployment(fleet, cluster, ns)
    return bool(
        d.spec.template.spec.containers[0].image == image
        and d.status.observed_generation == d.metadata.generation
        and (d.status.updated_replicas or 0) == d.spec.replicas
        and (d.status.ready_replicas or 0) == d.spec.replicas
    )


def _versions(fleet: Fleet, ns: str) -> dict[str, tuple[str, str]]:
    """Per member: the resourceVersions of the application's Deployment and ConfigMap."""
    return {
        m: (
            _deployment(fleet, m, ns).metadata.resource_version,
            fleet.core(m).read_namespaced_config_map("web", ns).metadata.resource_version,
        )
        for m in MEMBERS
    }


def _images(fleet: Fleet, ns: str) -> dict[str, str]:
    return {m: _deployment(fleet, m, ns).spec.template.spec.containers[0].image for m in MEMBERS}


def _events(fleet: Fleet, ns: str) -> list[str]:
    events = k8s.CoreV1Api(fleet.api("hub")).list_namespaced_event(ns).items
    return [f"{e.reason}: {e.message}" for e in events if e.involved_object.name == "web"]


def test_a_good_revision_goes_wave_by_wave_each_after_the_last_was_healthy_long_enough(
    fleet: Fleet, controller: Controller
) -> None:
    ns = "waves-good"
    create(fleet, _app(ns))
    _complete(fleet, ns, 1)
    update_spec(fleet, ns, "web", _image("nginx:1.28"))
    updated: dict[str, float] = {}  # when each member first asked for the new image
    ready: dict[str, float] = {}  # when it first ran it Ready
    start = time.monotonic()
    seen_at_update: dict[str, dict[str, str]] = {}
    while len(ready) < len(MEMBERS):
        now, images = time.monotonic(), _images(fleet, ns)
        for m in MEMBERS:
            if m not in updated and images[m] == "nginx:1.28":
                updated[m], seen_at_update[m] = now, images
            if m not in ready and _runs(fleet, m, ns, "nginx:1.28"):
                ready[m] = now
        assert now - start < 2 * HANG_GUARD_S, f"hang guard: updated {updated}, ready {ready}"
        time.sleep(POLL_S)
    first, second, third = MEMBERS
    # Each wave alone: the later waves still asked for the old image.
    assert seen_at_update[first] == {first: "nginx:1.28", second: "nginx:1.27", third: "nginx:1.27"}
    assert seen_at_update[second][third] == "nginx:1.27"
    # The next wave only after the last one ran Ready for its minimum healthy time (5 s;
    # what polling can hide of it, at most one poll, allowed for).
    assert updated[second] - ready[first] >= 5 - POLL_S
    assert updated[third] - ready[second] >= 5 - POLL_S
    app = _complete(fleet, ns, 2)
    assert {cluster_entry(app, m)["rolloutRevision"] for m in MEMBERS} == {2}
    assert {m: cluster_entry(app, m)["wave"] for m in MEMBERS} == {
        m: i for i, m in enumerate(MEMBERS)
    }
    events = _events(fleet, ns)
    for i in range(1, 4):
        assert any(e.startswith(f"WaveStarted: wave {i} of 3 (w{i})") for e in events), events
    assert any(e.startswith("RolloutComplete") for e in events), events
    status = kubectl_propagator(fleet, "-n", ns, "rollout", "status", "web", "--wait")
    assert status.returncode == 0, status.stderr
    assert "Complete: revision 2 on every cluster" in status.stdout
    metrics = controller.scrape()
    assert metrics['propagator_rollout_wave{application="web",namespace="waves-good"}'] == 3
    assert (
        metrics['propagator_rollout_clusters_updated{application="web",namespace="waves-good"}']
        == 3
    )


def test_a_bad_revision_halts_at_the_first_wave_and_undo_restores_it(
    fleet: Fleet, controller: Controller
) -> None:
    ns = "waves-bad"
    create(fleet, _app(ns, {**WAVES, "progressDeadline": "15s"}))
    _complete(fleet, ns, 1)
    before = _versions(fleet, ns)
    update_spec(fleet, ns, "web", _image("nginx:broken", unready=True))
    halted = wait_ap(fleet, ns, "web", "halted", lambda a: _rollout(a).get("phase") == "Halted")
    first, *later = MEMBERS
    assert _rollout(halted)["halted"] == {
        "wave": 0,
        "name": "w1",
        "reason": "ProgressDeadline",
        "clusters": [first],
    }
    assert "later waves keep the revision they run" in _rollout(halted)["message"]
    images = _images(fleet, ns)
    assert images == {first: "nginx:broken", **dict.fromkeys(later, "nginx:1.27")}
    after = _versions(fleet, ns)
    assert {m: after[m] for m in later} == {m: before[m] for m in later}  # never written
    assert any(e.startswith("RolloutHalted") for e in _events(fleet, ns))
    waiting = kubectl_propagator(fleet, "-n", ns, "rollout", "status", "web", "--wait")
    assert waiting.returncode == 1
    assert "halted at wave 1 (w1): ProgressDeadline on member-1" in waiting.stdout

    gone = kubectl_propagator(fleet, "-n", ns, "rollout", "undo", "web", "--to-revision", "9")
    assert gone.returncode == 1
    assert "revision 9 is no longer kept (kept: 1, 2)" in gone.stderr

    undo = kubectl_propagator(fleet, "-n", ns, "rollout", "undo", "web", "--wait")
    assert undo.returncode == 0, undo.stderr
    app = _complete(fleet, ns, 1)
    assert (_rollout(app)["specRevision"], _rollout(app)["specHeld"]) == (2, True)
    assert "halted" not in _rollout(app)  # the merge patch dropped the halt
    eventually(lambda: _runs(fleet, first, ns, "nginx:1.27") or None, "wave 1 restored")
    assert _images(fleet, ns) == dict.fromkeys(MEMBERS, "nginx:1.27")
    assert {m: _versions(fleet, ns)[m] for m in later} == {m: before[m] for m in later}


def test_suspend_leaves_every_member_untouched_while_the_spec_changes_and_resume_finishes(
    fleet: Fleet, controller: Controller
) -> None:
    ns = "waves-suspend"
    create(fleet, _app(ns))
    _complete(fleet, ns, 1)
    paused = kubectl_propagator(fleet, "-n", ns, "rollout", "pause", "web", "--suspend", "--wait")
    assert paused.returncode == 0, paused.stderr
    before = _versions(fleet, ns)
    update_spec(fleet, ns, "web", _image("nginx:1.28"))
    # Someone changes the ConfigMap on one member meanwhile: reported, not healed.
    drifted = MEMBERS[1]
    fleet.core(drifted).patch_namespaced_config_map("web", ns, {"data": {"v": "by hand"}})
    before[drifted] = _versions(fleet, ns)[drifted]
    app = wait_ap(
        fleet,
        ns,
        "web",
        "suspended, the drift reported",
        lambda a: (
            _rollout(a).get("phase") == "Suspended"
            and all(cluster_entry(a, m).get("suspended") for m in MEMBERS)
            and (cluster_entry(a, drifted).get("drift") or {}).get("objects") == 1
        ),
    )
    assert "revision 2 waits" in _rollout(app)["message"]
    assert _versions(fleet, ns) == before  # nothing written anywhere
    assert fleet.core(drifted).read_namespaced_config_map("web", ns).data == {"v": "by hand"}

    resumed = kubectl_propagator(fleet, "-n", ns, "rollout", "resume", "web")
    assert resumed.returncode == 0, resumed.stderr
    _complete(fleet, ns, 2)
    eventually(
        lambda: all(_runs(fleet, m, ns, "nginx:1.28") for m in MEMBERS) or None, "all updated"
    )
    assert fleet.core(drifted).read_namespaced_config_map("web", ns).data == {"v": "nginx:1.28"}


def test_a_suspended_cluster_alone_keeps_what_it_runs(fleet: Fleet, controller: Controller) -> None:
    ns = "waves-one"
    create(fleet, _app(ns, None))
    _complete(fleet, ns, 1)
    held = MEMBERS[2]
    before = _versions(fleet, ns)[held]

    def suspended_and_changed(spec: dict[str, Any]) -> None:
        spec["suspendedClusters"] = {"clusters": [held]}
        _image("nginx:1.28")(spec)

    update_spec(fleet, ns, "web", suspended_and_changed)
    app = _complete(fleet, ns, 2)
    assert cluster_entry(app, held)["suspended"] is True
    assert cluster_entry(app, held)["rolloutRevision"] == 1
    eventually(
        lambda: all(_runs(fleet, m, ns, "nginx:1.28") for m in MEMBERS[:2]) or None, "updated"
    )
    assert _versions(fleet, ns)[held] == before
    update_spec(fleet, ns, "web", lambda s: s.pop("suspendedClusters"))
    eventually(lambda: _runs(fleet, held, ns, "nginx:1.28") or None, "the held cluster updated")


def test_a_controller_killed_mid_wave_resumes_in_that_wave_without_rewriting_the_last(
    fleet: Fleet, controller: Controller
) -> None:
    ns = "waves-restart"
    create(fleet, _app(ns, {**WAVES, "minHealthyTime": "20s"}))
    _complete(fleet, ns, 1)
    update_spec(fleet, ns, "web", _image("nginx:1.28"))
    wait_ap(
        fleet,
        ns,
        "web",
        "in wave 2",
        lambda a: _rollout(a).get("wave") == 1 and _rollout(a).get("phase") == "Progressing",
    )
    done = _versions(fleet, ns)[MEMBERS[0]]
    controller.kill()
    controller.start()
    waves_seen: set[int] = set()

    def complete() -> bool | None:
        rollout = _rollout(get_ap(fleet, ns, "web"))
        waves_seen.add(int(rollout.get("wave", -1)))
        return rollout.get("phase") == "Complete" or None

    eventually(complete, "complete after the restart")
    assert min(waves_seen) >= 1  # never back to the first wave
    assert _versions(fleet, ns)[MEMBERS[0]] == done  # the finished wave was not written again
    assert _images(fleet, ns) == dict.fromkeys(MEMBERS, "nginx:1.28")


def test_the_canary_goes_first_with_its_steps_then_the_waves(
    fleet: Fleet, controller: Controller
) -> None:
    ns = "waves-canary"
    first, second, third = MEMBERS
    members = custom(fleet)
    label = {"metadata": {"labels": {"waves-canary": "yes"}}}
    members.patch_cluster_custom_object("propagator.io", "v1alpha1", "memberclusters", first, label)
    try:
        canary = {
            "clusterSelector": {"matchLabels": {"waves-canary": "yes"}},
            "steps": [{"weight": 50, "manual": True}, {"weight": 100}],
        }
        waves = {"size": 1, "minHealthyTime": "2s"}
        app = _app(ns, waves, canary=canary)
        app["spec"]["resources"]["manifests"][0]["spec"]["replicas"] = 2
        create(fleet, app)
        _complete(fleet, ns, 1)
        update_spec(fleet, ns, "web", _image("nginx:1.28"))
        gate = wait_ap(
            fleet,
            ns,
            "web",
            "at the canary's gate",
            lambda a: a["status"]["canary"]["phase"] == "Paused",
        )
        assert _rollout(gate)["phase"] == "Waiting"
        assert _rollout(gate)["message"] == "the canary goes first"
        eventually(
            lambda: (
                {
                    d.metadata.name: d.spec.template.spec.containers[0].image
                    for d in fleet.apps(first).list_namespaced_deployment(ns).items
                }
                == {"web": "nginx:1.27", "web-canary": "nginx:1.28"}
                or None
            ),
            "the canary copy on the canary cluster",
        )
        # The other clusters run the previous revision whole, the ConfigMap included.
        assert _images(fleet, ns)[second] == _images(fleet, ns)[third] == "nginx:1.27"
        for m in (second, third):
            assert fleet.core(m).read_namespaced_config_map("web", ns).data == {"v": "1"}
        promoted = kubectl_propagator(fleet, "-n", ns, "canary", "promote", "web")
        assert promoted.returncode == 0, promoted.stderr
        app = _complete(fleet, ns, 2)
        assert cluster_entry(app, first).get("wave") is None  # it went ahead, in no wave
        assert [cluster_entry(app, m)["wave"] for m in (second, third)] == [0, 1]
        eventually(
            lambda: all(_runs(fleet, m, ns, "nginx:1.28") for m in MEMBERS) or None, "all updated"
        )
        events = _events(fleet, ns)
        started = [e for e in events if e.startswith("WaveStarted")]
        assert any(f"on {second}" in e for e in started), events
        assert any(f"on {third}" in e for e in started), events
    finally:
        unlabel = {"metadata": {"labels": {"waves-canary": None}}}
        members.patch_cluster_custom_object(
            "propagator.io", "v1alpha1", "memberclusters", first, unlabel
        )


@pytest.mark.parametrize(
    ("waves", "message"),
    [
        (
            {"groups": [{"name": "nobody"}]},
            "a wave group names clusters, a clusterSelector or both",
        ),
        (
            {"groups": [{"name": "a", "clusters": ["m"]}, {"name": "b", "clusters": ["m"]}]},
            "a cluster is named in two wave groups",
        ),
        ({"size": 1, "progressDeadline": "0s"}, "progressDeadline must be between 10s and 24h"),
        ({"size": 1, "progressDeadline": "87600h"}, "progressDeadline must be between 10s and 24h"),
        (
            {"groups": [{"name": f"w{i}", "clusters": [f"c{i}"]} for i in range(1000)]},
            "must have at most 20 items",
        ),
        ({"size": "150%"}, "a percentage such as 25%"),
    ],
)
def test_hostile_waves_are_refused_by_the_hub(
    fleet: Fleet, joined: list[str], waves: dict[str, Any], message: str
) -> None:
    fleet.ensure_namespace("waves-hostile")
    with pytest.raises(k8s.ApiException) as refused:
        custom(fleet).create_namespaced_custom_object(
            "propagator.io",
            "v1alpha1",
            "waves-hostile",
            "applicationpropagations",
            _app("waves-hostile", waves),
        )
    assert refused.value.status == 422
    assert message in str(refused.value.body)
