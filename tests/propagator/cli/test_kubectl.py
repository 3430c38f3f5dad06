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
