"""The columnar scheduler decides exactly as the per-cluster reference does: the same
placement, verdicts, summary and layer attempts, on random fleets and placements (fast
path, explained, and full scan)."""

from __future__ import annotations

from decimal import Decimal
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.placement import Placement
from api.taints import NOT_READY_TAINT, Taint
from fleet.columns import MEMO_ANSWERS, Columns
from fleet.snapshot import ClusterInfo, build_snapshot
from propagator.scheduler import Demand, Scheduler
from tests.propagator.scheduler.test_scheduler import PROFILE

LAYERS = ("gold", "silver", "edge")
KEYS = ("env", "tier", "zone", "size")
VALUES = ("a", "b", "c", "1", "7", "12")
DEPLOYMENT = ("apps/v1", "Deployment")
JOB = ("batch/v1", "Job")

amounts = (
    st.none()
    | st.integers(0, 40).map(Decimal)
    | st.sampled_from(
        [
            Decimal("0.25"),
            Decimal("1.5"),
            Decimal("0.001"),
            Decimal("1e30"),
            Decimal("1e50"),  # beyond the integer columns: the decimal path
            Decimal("12345.678901234567890123"),
        ]
    )
)
taints = st.builds(
    lambda key, value, effect: Taint.model_construct(key=key, value=value, effect=effect),
    st.sampled_from(["dedicated", "gpu", NOT_READY_TAINT, "size"]),
    st.sampled_from(["", "x", "3", "10"]),
    st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"]),
)


@st.composite
def clusters(draw: st.DrawFn, name: str) -> ClusterInfo:
    available = {r: v for r in ("cpu", "memory", "pods") if (v := draw(amounts)) is not None}
    allocatable = {r: v for r in ("cpu", "memory", "pods") if (v := draw(amounts)) is not None}
    return ClusterInfo(
        name=name,
        labels=MappingProxyType(
            draw(st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3))
        ),
        layer=draw(st.sampled_from(LAYERS)),
        region=draw(st.sampled_from(["eu", "us", None])),
        taints=tuple(draw(st.lists(taints, max_size=3))),
        ready=draw(st.booleans() | st.just(True)),
        api_enablements=frozenset(draw(st.sets(st.sampled_from([DEPLOYMENT, JOB])))),
        available=MappingProxyType(available),
        allocatable=MappingProxyType(allocatable),
        nodes=draw(st.integers(0, 3)),
    )


@st.composite
def fleets(draw: st.DrawFn) -> list[ClusterInfo]:
    count = draw(st.integers(1, 14))
    return [draw(clusters(f"c{i:02d}")) for i in range(count)]


requirements = (
    st.builds(
        lambda key, op, values: {"key": key, "operator": op, "values": values},
        st.sampled_from(KEYS),
        st.sampled_from(["In", "NotIn"]),
        st.lists(st.sampled_from(VALUES), min_size=1, max_size=2, unique=True),
    )
    | st.builds(
        lambda key, op: {"key": key, "operator": op},
        st.sampled_from(KEYS),
        st.sampled_from(["Exists", "DoesNotExist"]),
    )
    | st.builds(
        lambda key, op, value: {"key": key, "operator": op, "values": [value]},
        st.sampled_from(KEYS),
        st.sampled_from(["Gt", "Lt"]),
        st.sampled_from(["2", "8"]),
    )
)
selectors = st.builds(
    lambda labels, exprs: {"matchLabels": labels, "matchExpressions": exprs},
    st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=1),
    st.lists(requirements, max_size=2),
)
tolerations = st.builds(
    lambda key, op, value, effect: {
        k: v
        for k, v in {"key": key, "operator": op, "value": value, "effect": effect}.items()
        if v is not None
    },
    st.sampled_from(["dedicated", "gpu", "size", ""]),
    st.sampled_from(["Exists", "Equal", "Gt", "Lt"]),
    st.sampled_from(["", "x", "5"]),
    st.none() | st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"]),
).filter(
    lambda t: (
        (t["operator"] != "Exists" or t["value"] == "")
        and (t["operator"] not in ("Gt", "Lt") or t["value"] == "5")
        and (t["key"] != "" or t["operator"] == "Exists")
    )
)


@st.composite
def placements(draw: st.DrawFn, names: list[str]) -> dict[str, Any]:
    mode = draw(st.sampled_from(["Duplicated", "Divided", "Aggregated"]))
    spec: dict[str, Any] = {"replicas": {"mode": mode}}
    if mode == "Divided" and draw(st.booleans()):
        spec["replicas"]["weights"] = draw(
            st.sampled_from(
                [
                    {"dynamic": "AvailableCapacity"},
                    {"static": [{"cluster": names[0], "weight": 3}]},
                    {"static": [{"selector": {"matchLabels": {"env": "a"}}, "weight": 2}]},
                ]
            )
        )
    if draw(st.booleans()):
        spec["layers"] = draw(st.lists(st.sampled_from(LAYERS), min_size=1, unique=True))
    if draw(st.booleans()):
        spec["clusterSelector"] = draw(selectors)
    if draw(st.booleans()):
        spec["clusterNames"] = draw(st.lists(st.sampled_from(names), unique=True, min_size=1))
    if draw(st.booleans()):
        spec["excludeClusters"] = draw(st.lists(st.sampled_from(names), unique=True, max_size=2))
    spec["tolerations"] = draw(st.lists(tolerations, max_size=2))
    if draw(st.booleans()):
        spec["preferred"] = [
            {"weight": draw(st.integers(1, 100)), "selector": draw(selectors)}
            for _ in range(draw(st.integers(1, 2)))
        ]
    if draw(st.booleans()):
        spec["maxClusters"] = draw(st.integers(1, 5))
    if draw(st.booleans()):
        spec["spread"] = {"byField": "region", "minGroups": draw(st.integers(1, 2))}
    if mode != "Duplicated" and draw(st.booleans()):
        spec["overflow"] = True
    return spec


@st.composite
def demands(draw: st.DrawFn) -> Demand:
    per_replica = {
        "cpu": draw(st.sampled_from([Decimal("0.5"), Decimal(1), Decimal(3)])),
        "memory": draw(st.sampled_from([Decimal(1), Decimal(4)])),
        "pods": Decimal(1),
    }
    fixed = draw(st.sampled_from([{}, {"cpu": Decimal(2)}, {"pods": Decimal(1)}]))
    per_node = draw(st.sampled_from([{}, {"cpu": Decimal("0.5")}]))
    kinds = frozenset(draw(st.sets(st.sampled_from([DEPLOYMENT, JOB]), min_size=1)))
    return Demand(draw(st.integers(0, 9)), per_replica, kinds, fixed, per_node)


def _same(columnar: Any, reference: Any) -> None:
    assert columnar.placed == reference.placed
    assert columnar.schedulable == reference.schedulable
    assert columnar.summary == reference.summary
    assert columnar.attempts == reference.attempts
    assert dict(columnar.evaluated) == dict(reference.evaluated)
    assert dict(columnar.verdicts) == dict(reference.verdicts)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_columnar_path_decides_as_the_per_cluster_reference(data: st.DataObject) -> None:
    fleet = data.draw(fleets())
    names = [c.name for c in fleet]
    placement = Placement.model_validate(data.draw(placements(names)))
    demand = data.draw(demands())
    current = data.draw(st.dictionaries(st.sampled_from(names), st.integers(0, 4), max_size=3))
    quota = data.draw(
        st.none()
        | st.dictionaries(
            st.sampled_from(names),
            st.fixed_dictionaries({"cpu": st.integers(0, 20).map(Decimal)}),
            max_size=4,
        )
    )
    snapshot = build_snapshot(fleet, {"f": names}, generation=1)
    age = data.draw(st.sampled_from([0.0, 999.0]))  # fast path, or a full scan
    explain = data.draw(st.booleans())
    decisions = [
        Scheduler(PROFILE, columnar=columnar).schedule(
            snapshot,
            "f",
            placement,
            demand,
            quota,
            age_s=age,
            explain=explain,
            current=current,
            application="uid-1",
        )
        for columnar in (True, False)
    ]
    _same(*decisions)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_answers_kept_from_earlier_decisions_decide_as_the_reference(
    data: st.DataObject,
) -> None:
    """One scheduler, one snapshot, several applications: what the built-ins answered for
    the earlier ones (kept per generation and memo key) never changes a later decision."""
    fleet = data.draw(fleets())
    names = [c.name for c in fleet]
    snapshot = build_snapshot(fleet, {"f": names}, generation=1)
    kept = Scheduler(PROFILE)
    shared = data.draw(placements(names))
    for _ in range(data.draw(st.integers(2, 5))):
        # Often the same template (tolerations, preferences, layers), sometimes not.
        spec = shared if data.draw(st.booleans()) else data.draw(placements(names))
        excluded = data.draw(st.lists(st.sampled_from(names), unique=True, max_size=2))
        spec = {**spec, "excludeClusters": excluded}
        placement = Placement.model_validate(spec)
        demand = data.draw(demands())
        current = data.draw(st.dictionaries(st.sampled_from(names), st.integers(0, 4), max_size=3))
        explain = data.draw(st.booleans())
        decisions = [
            scheduler.schedule(
                snapshot,
                "f",
                placement,
                demand,
                age_s=0.0,
                explain=explain,
                current=current,
                application="uid-1",
            )
            for scheduler in (kept, Scheduler(PROFILE, columnar=False))
        ]
        _same(*decisions)


def test_answers_are_kept_from_the_second_time_their_key_is_asked_about() -> None:
    fleet = {n: ClusterInfo(n, MappingProxyType({}), "gold") for n in ("a", "b")}
    cols = Columns(fleet)
    assert not cols.worth_keeping("k")  # a one-off so far
    assert cols.worth_keeping("k")
    cols.remember("k", 1)
    assert cols.recall("k") == 1
    assert not cols.worth_keeping("other")
    # past the bound on answers kept, the memo starts over
    cols.answered(MEMO_ANSWERS)
    assert cols.recall("k") == 1
    cols.answered(1)
    assert cols.recall("k") is None
    # the next generation's columns start with nothing kept or asked
    changed = {**fleet, "a": ClusterInfo("a", MappingProxyType({}), "edge")}
    updated = cols.updated(changed)
    assert updated.recall("k") is None
    assert not updated.worth_keeping("k")


def test_a_bitset_decodes_to_its_clusters_within_the_memory_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fleet = {n: ClusterInfo(n, MappingProxyType({}), "gold") for n in ("c", "a", "b", "d")}
    cols = Columns(fleet)  # numbered by name: a=0, b=1, c=2, d=3
    positions, infos = cols.members(0b1101)
    assert positions == (0, 2, 3)
    assert [c.name for c in infos] == ["a", "c", "d"]
    assert cols.members(0b1101) is cols.members(0b1101)  # kept
    assert cols.members(0) == ((), ())
    # past the bound on clusters held, what was kept is let go (and made again when asked)
    monkeypatch.setattr("fleet.columns.MEMO_ANSWERS", 4)
    kept = cols.members(0b0011)
    cols.members(0b0111)
    assert cols.members(0b0011) is not kept
    assert cols.members(0b0011) == kept


def test_columns_hold_what_the_filters_read() -> None:
    a = ClusterInfo(
        "a",
        MappingProxyType({"env": "prod", "size": "12"}),
        "gold",
        taints=(Taint(key="gpu", value="", effect="NoSchedule"),),
        ready=True,
        api_enablements=frozenset({DEPLOYMENT}),
        available=MappingProxyType({"cpu": Decimal(3)}),
    )
    b = ClusterInfo("b", MappingProxyType({"env": "dev"}), "edge", ready=False)
    cols = Columns({"b": b, "a": a})
    assert cols.names == ("a", "b")
    assert (cols.ready, cols.all) == (0b01, 0b11)
    assert cols.with_label("env", "prod") == 0b01
    assert cols.with_label("env") == 0b11
    assert cols.serves[DEPLOYMENT] == 0b01
    assert cols.available["cpu"] == [Decimal(3), None]
    assert list(cols.each(0b11)) == [0, 1]
    selector = Placement.model_validate(
        {
            "clusterSelector": {
                "matchExpressions": [{"key": "size", "operator": "Gt", "values": ["8"]}]
            }
        }
    ).cluster_selector
    assert selector is not None
    assert cols.selected(selector) == 0b01


def _normal(cols: Columns) -> dict[str, Any]:
    """What the columns say, with empty bitsets left out (an update may leave some)."""
    return {
        "names": cols.names,
        "infos": list(cols.infos),
        "ready": cols.ready,
        "layers": list(cols.layers),
        "in_layer": {k: bits for k, bits in cols.in_layer.items() if bits},
        "labels": {
            (k, v): bits for k, values in cols.labels.items() for v, bits in values.items() if bits
        },
        "taints": {k: bits for k, (_, bits) in cols.taints.items() if bits},
        "serves": {k: bits for k, bits in cols.serves.items() if bits},
        "free": (list(cols.free_cpu), list(cols.free_memory)),
        "total": (list(cols.total_cpu), list(cols.total_memory)),
        "available": {
            r: list(c) for r, c in cols.available.items() if any(v is not None for v in c)
        },
        "scaled": {  # the values they stand for (the unit may be finer after an update)
            r: [None if v is None else Decimal(v).scaleb(s.exponent) for v in s.values]
            for r in ("cpu", "memory", "pods")
            if (s := cols.scaled(r)) is not None and any(v is not None for v in s.values)
        },
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_columns_updated_after_a_few_changes_are_the_columns_built_anew(
    data: st.DataObject,
) -> None:
    fleet = data.draw(fleets())
    names = [c.name for c in fleet]
    before = build_snapshot(fleet, {"f": names}, generation=1)
    for resource in ("cpu", "memory", "pods"):
        before.columns.scaled(resource)  # built, to be carried over
    changed = data.draw(st.lists(st.sampled_from(names), unique=True, max_size=3))
    after = [data.draw(clusters(c.name)) if c.name in changed else c for c in fleet]
    snapshot = build_snapshot(after, {"f": names}, generation=2, previous=before)
    updated = snapshot.columns
    assert _normal(updated) == _normal(Columns(snapshot.clusters))
    assert (
        updated.taints_exact
        or not Columns(snapshot.clusters).taints_exact
        or before.columns.taints_exact is False
    )
