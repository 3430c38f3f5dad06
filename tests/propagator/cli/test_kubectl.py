"""kubectl propagator: the rebalance action, its waiting, and its bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import anyio
import pytest
import yaml

from kube.connection import KubeConnection
from kube.hub import context_namespace
from propagator.cli.canary import read_status, request_action
from propagator.cli.kubectl import _request_rebalance, main
from propagator.cli.rollout import NotKept, request_rollout, rollout_status


class FakeHub:
    """Records the patch; the controller "acts" on it after ``acts_after`` reads."""

    def __init__(self, acts_after: int | None) -> None:
        self.acts_after = acts_after
        self.patches: list[tuple[str, str | None, dict[str, Any]]] = []
        self.reads = 0

    async def merge_patch(
        self, api_version: str, kind: str, name: str, body: dict[str, Any], **kw: Any
    ) -> dict[str, Any]:
        self.patches.append((name, kw.get("namespace"), body))
        return body

    async def get(self, api_version: str, kind: str, name: str, **kw: Any) -> dict[str, Any]:
        self.reads += 1
        value = self.patches[-1][2]["metadata"]["annotations"]["propagator.io/rebalance"]
        acted = self.acts_after is not None and self.reads > self.acts_after
        status = {
            "rebalanced": value if acted else "an older one",
            "placement": [{"cluster": "a", "replicas": 2}, {"cluster": "b", "replicas": 2}],
        }
        return {"status": status}


def _rebalance(hub: FakeHub, wait_s: float | None) -> str:
    return anyio.run(_request_rebalance, cast(KubeConnection, hub), "shop", "web", wait_s)


def test_rebalance_sets_a_new_annotation_value_each_time() -> None:
    hub = FakeHub(None)
    first, second = _rebalance(hub, None), _rebalance(hub, None)
    assert first.startswith("applicationpropagation.propagator.io/web rebalance requested (")
    values = [p[2]["metadata"]["annotations"]["propagator.io/rebalance"] for p in hub.patches]
    assert [p[:2] for p in hub.patches] == [("web", "shop"), ("web", "shop")]
    assert values[0] != values[1]
    assert hub.reads == 0  # no --wait: no reads
    assert first != second


def test_rebalance_wait_prints_the_new_placement_once_the_controller_acted() -> None:
    hub = FakeHub(acts_after=1)
    out = _rebalance(hub, 10)
    assert out.endswith("placed again: a=2, b=2")
    assert hub.reads == 2


def test_rebalance_wait_runs_out_with_a_hint() -> None:
    with pytest.raises(TimeoutError, match="had not acted on it after 0s"):
        _rebalance(FakeHub(None), 0)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["rebalance", "Web"], "NAME 'Web': not an object name"),
        (["rebalance", "../apis"], "NAME '../apis': not an object name"),
        (["-n", "a/b", "rebalance", "web"], "--namespace 'a/b': not a namespace name"),
        (["rebalance", "web", "--wait", "--timeout", "soon"], "--timeout: 'soon' is not a"),
        (["canary", "promote", "Web"], "canary promote: NAME 'Web': not an object name"),
        (["canary", "status", "web", "-n", "A_B"], "--namespace 'A_B': not a namespace name"),
        (["rebalance", "web", "--namespace=x/y"], "--namespace 'x/y': not a namespace name"),
        (["canary", "abort", "web", "--wait", "--timeout", "x"], "--timeout: 'x' is not a"),
        (["rollout", "promote", "Web"], "rollout promote: NAME 'Web': not an object name"),
        (["rollout", "status", "web", "--to-revision", "3"], "--to-revision is for undo"),
    ],
)
def test_bad_input_is_refused_before_the_hub_is_asked(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_the_namespace_defaults_to_the_contexts(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text(
        yaml.safe_dump(
            {
                "current-context": "hub",
                "contexts": [
                    {"name": "hub", "context": {"cluster": "c", "namespace": "shop"}},
                    {"name": "other", "context": {"cluster": "c"}},
                ],
            }
        )
    )
    assert context_namespace(config) == "shop"
    assert context_namespace(config, "other") is None


class FakeCanaryHub:
    """Acts on a canary action at the second read; holds a canary in the middle of a step."""

    def __init__(self) -> None:
        self.values: list[str] = []
        self.reads = 0

    async def merge_patch(
        self, api_version: str, kind: str, name: str, body: dict[str, Any], **kw: Any
    ) -> dict[str, Any]:
        self.values.append(body["metadata"]["annotations"]["propagator.io/canary-action"])
        return body

    async def get(self, api_version: str, kind: str, name: str, **kw: Any) -> dict[str, Any]:
        self.reads += 1
        return {
            "metadata": {"name": name},
            "spec": {"canary": {"steps": [{"weight": 10}, {"weight": 50}, {"weight": 100}]}},
            "status": {
                "canary": {
                    "phase": "Progressing",
                    "step": 1,
                    "weight": 50,
                    "stableRevision": "aaa",
                    "canaryRevision": "bbb",
                    "message": "step 2 of 3, weight 50: starting",
                    "lastAction": self.values[-1] if self.reads > 1 else None,
                    "clusters": [
                        {
                            "name": "member-1",
                            "weight": 50,
                            "stableReady": "5/5",
                            "canaryReady": "3/5",
                        }
                    ],
                }
            },
        }


def test_canary_actions_are_new_annotation_values_and_wait_for_the_controller() -> None:
    hub = FakeCanaryHub()
    conn = cast(KubeConnection, hub)
    out = anyio.run(request_action, conn, "shop", "web", "promote", 10)
    anyio.run(request_action, conn, "shop", "web", "promote", None)
    assert [v.split("/", 1)[0] for v in hub.values] == ["promote", "promote"]
    assert hub.values[0] != hub.values[1]  # each request is acted on once
    assert out.splitlines() == [
        "applicationpropagation.propagator.io/web canary promote requested",
        "Progressing: step 2 of 3, weight 50: starting",
    ]


def test_canary_status_shows_each_canary_cluster() -> None:
    hub = FakeCanaryHub()
    hub.values.append("x")
    text = anyio.run(read_status, cast(KubeConnection, hub), "shop", "web")
    assert text.splitlines() == [
        "applicationpropagation.propagator.io/web: Progressing: step 2 of 3, weight 50: starting",
        "stable revision: aaa   canary revision: bbb",
        "CLUSTER    WEIGHT   STABLE READY   CANARY READY",
        "member-1   50       5/5            3/5",
    ]


class RolloutHub:
    """The hub as ``kubectl propagator rollout`` sees it: revisions 2 and 3 kept, an
    application halted at its first wave."""

    def __init__(self) -> None:
        self.patches: list[dict[str, Any]] = []

    async def list(self, api_version: str, kind: str, namespace: str, **kw: Any) -> Any:
        assert kw["labelSelector"] == "propagator.io/application=web,propagator.io/rollout-revision"
        return {"items": [{"revision": 3}, {"revision": 2}]}

    async def merge_patch(
        self, api_version: str, kind: str, name: str, body: dict[str, Any], **kw: Any
    ) -> dict[str, Any]:
        self.patches.append(body)
        return body

    async def get(self, api_version: str, kind: str, name: str, **kw: Any) -> dict[str, Any]:
        return {
            "metadata": {"name": "web", "generation": 4},
            "status": {
                "observedGeneration": 4,
                "rollout": {
                    "phase": "Halted",
                    "revision": 3,
                    "previousRevision": 2,
                    "specRevision": 3,
                    "wave": 0,
                    "message": "halted at wave 1 (eu): not healthy",
                    "history": [2, 3],
                    "halted": {
                        "wave": 0,
                        "name": "eu",
                        "reason": "ProgressDeadline",
                        "clusters": ["a"],
                    },
                },
                "clusters": [
                    {"name": "a", "rolloutRevision": 3, "wave": 0},
                    {"name": "b", "rolloutRevision": 2, "wave": 1, "suspended": True},
                ],
            },
        }


def test_rollout_undo_to_a_revision_not_kept_is_refused_naming_those_kept() -> None:
    hub = RolloutHub()
    with pytest.raises(NotKept, match=r"revision 1 is no longer kept \(kept: 2, 3\)"):
        anyio.run(
            lambda: request_rollout(cast(KubeConnection, hub), "shop", "web", "undo", None, 1)
        )
    assert hub.patches == []
    anyio.run(lambda: request_rollout(cast(KubeConnection, hub), "shop", "web", "undo", None, 2))
    value = hub.patches[0]["metadata"]["annotations"]["propagator.io/rollout-action"]
    assert value.startswith("undo:2/")


def test_rollout_resume_clears_a_suspension_and_pause_suspend_sets_it() -> None:
    hub = RolloutHub()
    anyio.run(lambda: request_rollout(cast(KubeConnection, hub), "shop", "web", "resume", None))
    anyio.run(
        lambda: request_rollout(
            cast(KubeConnection, hub), "shop", "web", "pause", None, suspend=True
        )
    )
    assert [p["spec"] for p in hub.patches] == [{"suspend": False}, {"suspend": True}]


def test_rollout_status_shows_each_wave_and_a_halted_one_for_the_exit_code() -> None:
    text, halted = anyio.run(
        lambda: rollout_status(cast(KubeConnection, RolloutHub()), "shop", "web", 5)
    )
    assert halted
    assert text.splitlines() == [
        "applicationpropagation.propagator.io/web: Halted: halted at wave 1 (eu): not healthy",
        "revision: 3   from: 2   spec: 3   kept: 2, 3",
        "halted at wave 1 (eu): ProgressDeadline on a",
        "WAVE   STATE    CLUSTERS (REVISION)",
        "1      halted   a=3",
        "2      next     b=2 (suspended)",
    ]
