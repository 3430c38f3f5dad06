"""kubectl propagator: the rebalance action, its waiting, and its bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import anyio
import pytest
import yaml

from fleet.connection import KubeConnection
from fleet.hub import context_namespace
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
