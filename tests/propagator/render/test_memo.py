"""A plan that renders what the application's last renders did gets their output without a
worker's round trip; anything a render reads that changed renders again."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import pytest

from api.application import Override
from propagator.render.manifests import ApplicationRef, RenderError, render_for_cluster
from propagator.render.memo import RenderMemo
from propagator.render.worker import RenderTarget

REF = ApplicationRef("web", "team-a")
MANIFEST = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "settings"},
    "data": {"where": "{{ cluster.labels.region }}", "size": "{{ values.size }}"},
}
SIZE = Override.model_validate({"clusterNames": ["a", "b"], "values": {"size": "s"}})


class CountingRender:
    """Renders in this process, counting the calls (the worker's stand-in)."""

    def __init__(self) -> None:
        self.calls = 0
        self.fail = False

    async def __call__(
        self,
        manifests: Sequence[Mapping[str, Any]],
        overrides: Sequence[Override],
        targets: Sequence[RenderTarget],
        app: ApplicationRef,
    ) -> dict[str, list[dict[str, Any]]]:
        self.calls += 1
        if self.fail:
            raise RenderError("the worker failed")
        return {
            t.name: render_for_cluster(manifests, overrides, t, app, t.replicas) for t in targets
        }


def _targets(region: str = "eu", replicas: int | None = None) -> list[RenderTarget]:
    return [
        RenderTarget("a", {"region": region}, replicas=replicas),
        RenderTarget("b", {"region": "us"}),
    ]


def _render(memo: RenderMemo, key: str = "team-a/web", **changes: Any) -> Any:
    args: dict[str, Any] = {
        "manifests": [MANIFEST],
        "overrides": [SIZE],
        "targets": _targets(),
        "app": REF,
    }
    args.update(changes)
    return anyio.run(lambda: memo.render(key, **args))


def test_the_same_inputs_render_once_and_give_the_same_objects() -> None:
    worker = CountingRender()
    memo = RenderMemo(worker)
    first = _render(memo)
    again = _render(memo)
    assert worker.calls == 1
    assert again == first
    assert first["a"][0]["data"] == {"where": "eu", "size": "s"}


@pytest.mark.parametrize(
    "change",
    [
        {"manifests": [{**MANIFEST, "data": {"where": "{{ cluster.name }}", "size": "1"}}]},
        {
            "overrides": [
                Override.model_validate({"clusterNames": ["a", "b"], "values": {"size": "m"}})
            ]
        },
        {"targets": _targets(region="ap")},  # a cluster's label changed
        {"targets": _targets(replicas=3)},  # the scheduler divided anew
        {"targets": _targets()[:1]},  # a cluster left the placement
        {"app": ApplicationRef("web", "team-b")},
    ],
)
def test_anything_a_render_reads_that_changed_renders_again(change: dict[str, Any]) -> None:
    worker = CountingRender()
    memo = RenderMemo(worker)
    first = _render(memo)
    _render(memo, **change)
    assert worker.calls == 2
    assert _render(memo) == first  # the first inputs are still kept
    assert worker.calls == 2


def test_a_plan_renders_three_revisions_all_kept_a_fourth_pushes_out_the_oldest() -> None:
    worker = CountingRender()
    memo = RenderMemo(worker)
    # The revision rolled out, the one the clusters not reached yet run, a canary's stable.
    older = [{**MANIFEST, "metadata": {"name": "settings-older"}}]
    canary = [{**MANIFEST, "metadata": {"name": "settings-canary"}}]
    for _ in range(3):
        _render(memo)
        _render(memo, manifests=older)
        _render(memo, manifests=canary)
    assert worker.calls == 3
    _render(memo, targets=_targets(region="ap"))
    _render(memo, manifests=older)
    _render(memo, manifests=canary)
    assert worker.calls == 4
    _render(memo)
    assert worker.calls == 5


def test_applications_keep_their_own_renders_and_a_deleted_one_forgets_them() -> None:
    worker = CountingRender()
    memo = RenderMemo(worker)
    _render(memo, key="team-a/web")
    _render(memo, key="team-a/api")
    assert worker.calls == 2
    memo.forget("team-a/web")
    _render(memo, key="team-a/web")
    _render(memo, key="team-a/api")
    assert worker.calls == 3


def test_a_failed_render_is_not_kept() -> None:
    worker = CountingRender()
    memo = RenderMemo(worker)
    worker.fail = True
    with pytest.raises(RenderError):
        _render(memo)
    worker.fail = False
    assert _render(memo)["b"][0]["data"]["where"] == "us"
    assert worker.calls == 2
