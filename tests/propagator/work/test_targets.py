"""Where an application goes: the decision, plus placed clusters kept under NoSchedule."""

from __future__ import annotations

from typing import Any

from api.taints import NOT_READY_TAINT, Taint, Toleration
from fleet.snapshot import ClusterInfo, build_snapshot
from propagator.scheduler import Scheduler
from propagator.work.targets import Target, from_status, held_targets, targets_of
from tests.propagator.scheduler.test_scheduler import PROFILE, cluster, demand, placement


def _targets(
    clusters: list[ClusterInfo], previous: list[dict[str, Any]], **spec: Any
) -> list[Target]:
    snap = build_snapshot(clusters, {"f": [c.name for c in clusters]}, generation=1)
    p = placement(**spec)
    decision = Scheduler(PROFILE).schedule(snap, "f", p, demand(), age_s=0)
    return targets_of(decision, held_targets(from_status(previous), snap, p))


def test_a_placed_cluster_that_goes_not_ready_keeps_its_place() -> None:
    tainted = (Taint(key=NOT_READY_TAINT, effect="NoSchedule"),)
    clusters = [cluster("a"), cluster("b", ready=False, taints=tainted)]
    kept = _targets(clusters, [{"cluster": "a"}, {"cluster": "b", "layer": "core", "score": 7}])
    assert [(t.cluster, t.kept) for t in kept] == [("a", None), ("b", "tainted not-ready")]
    assert kept[1].score == 7
    # Never placed there before: a NotReady cluster gets nothing new.
    assert [t.cluster for t in _targets(clusters, [])] == ["a"]


def test_noexecute_and_deselection_remove_a_placed_cluster() -> None:
    evict = (Taint(key="maintenance", effect="NoExecute"),)
    clusters = [cluster("a"), cluster("b", taints=evict)]
    assert [t.cluster for t in _targets(clusters, [{"cluster": "b"}])] == ["a"]
    # Tolerated NoExecute: b is simply placed again.
    tolerated = _targets(
        clusters,
        [{"cluster": "b"}],
        tolerations=[Toleration(key="maintenance", operator="Exists").model_dump()],
    )
    assert [(t.cluster, t.kept) for t in tolerated] == [("a", None), ("b", None)]
    # Excluded by the placement: it goes, whatever its taints.
    excluded = _targets([cluster("a"), cluster("b")], [{"cluster": "b"}], excludeClusters=["b"])
    assert [t.cluster for t in excluded] == ["a"]
