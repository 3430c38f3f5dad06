"""What an application propagates, resolved: a chart release can only come from
``spec.resources.charts``, never written by hand."""

from __future__ import annotations

import anyio
import pytest

from api.application import ApplicationPropagation
from propagator.propagation.resolve import resolve
from propagator.tenancy.policy import Forbidden, policy_for
from tests.fakes import FakeMember
from tests.propagator.tenancy.test_policy import PLATFORM

FORGED = {
    "apiVersion": "propagator.io/v1alpha1",
    "kind": "ChartRelease",
    "metadata": {"name": "web"},
    "chart": {"repository": "oci://internal.example.com/x", "name": "web"},
    "archive": "dGVuYW50IGJ5dGVz",
}


def app(**resources: object) -> ApplicationPropagation:
    return ApplicationPropagation.model_validate(
        {
            "apiVersion": "propagator.io/v1alpha1",
            "kind": "ApplicationPropagation",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"fleet": "all", "resources": resources},
        }
    )


@pytest.mark.parametrize("platform", [False, True])
def test_a_chart_release_written_by_hand_is_forbidden_for_everyone(platform: bool) -> None:
    namespace = "propagator-system" if platform else "shop"
    policy = policy_for(namespace, None, PLATFORM)
    with pytest.raises(Forbidden, match=r"spec.resources.manifests\[0\]: .* name charts in"):
        anyio.run(resolve, app(manifests=[FORGED]), FakeMember(), policy)  # type: ignore[arg-type]
