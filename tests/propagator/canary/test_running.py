"""The canary within the reconcile: when a release needs a canary, and its condition."""

from __future__ import annotations

from typing import Any

from api.rollout import Canary
from propagator.canary.copies import DEPLOYMENTS
from propagator.canary.driver import templates_differ
from propagator.canary.machine import CanaryState
from propagator.canary.plan import CanaryPlan
from propagator.canary.revisions import release_of, source_of
from propagator.canary.running import condition_of, unsupported
from propagator.interpreter.registry import builtin_rules
from tests.propagator.canary.test_copies import deployment

CANARY = Canary.model_validate({"steps": [{"weight": 50}]})
STATEFUL = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"}}


def source(*objects: dict[str, Any], overrides: list[Any] | None = None) -> dict[str, Any]:
    return source_of(objects, overrides or [])


def differ(stable: dict[str, Any], latest: dict[str, Any]) -> bool:
    return templates_differ(stable, latest, DEPLOYMENTS)


def test_only_a_changed_pod_template_needs_a_canary() -> None:
    v1 = source(deployment("v1", replicas=3))
    assert differ(v1, source(deployment("v2", replicas=3)))
    assert not differ(v1, source(deployment("v1", replicas=9)))  # scaled only
    assert not differ(v1, source(deployment("v2", name="api")))  # a new Deployment
    assert differ(v1, source(deployment("v1"), overrides=[{"values": {"a": 1}}]))


def test_a_release_is_named_by_its_workloads_and_overrides() -> None:
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    assert release_of(source(deployment("v1"))) == release_of(source(deployment("v1"), config))
    assert release_of(source(deployment("v1"))) != release_of(source(deployment("v2")))


def plan(*objects: dict[str, Any]) -> CanaryPlan:
    state = CanaryState("Progressing", "a", "b", 0, 50, message="step 1 of 1, weight 50")
    return CanaryPlan(
        CANARY,
        state,
        frozenset({"c1"}),
        "b",
        None,
        unsupported(objects, DEPLOYMENTS, builtin_rules().divides),
    )


def test_statefulsets_and_daemonsets_roll_out_at_once_and_say_so() -> None:
    alone = condition_of(plan(STATEFUL), [STATEFUL])
    assert alone == (
        "CanaryProgressing",
        False,
        "CanaryUnsupported",
        "StatefulSet db roll(s) out at once: canary steps run Deployments and the kinds "
        "whose interpreter rules say canaryCopies",
    )
    mixed = [deployment("v1"), STATEFUL]
    _, status, reason, message = condition_of(plan(*mixed), mixed)
    assert (status, reason) == (True, "Progressing")
    assert message.startswith("step 1 of 1, weight 50; StatefulSet db roll(s) out at once")


def test_a_platform_that_takes_canary_copies_from_deployments_gets_no_ready_counts() -> None:
    from typing import cast

    from propagator.canary.running import canary_status
    from propagator.work.members import MemberView
    from propagator.work.targets import Target

    # the platform's Deployment rules leave canaryCopies out: nothing is split
    state = CanaryState("Progressing", "a", "b", 0, 50, message="step 1 of 1, weight 50")
    unsplit = CanaryPlan(CANARY, state, frozenset({"c1"}), "b", None, kinds={})
    status = canary_status(
        unsplit,
        [Target("c1", None, None, None)],
        {"c1": [deployment("v2")]},
        cast(MemberView, None),
        "shop",
    )
    assert status["clusters"] == [{"name": "c1", "weight": 50}]
