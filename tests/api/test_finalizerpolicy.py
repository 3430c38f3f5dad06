"""The admission policy that adds the cleanup finalizer at creation, and how it is
printed for a manual install (the chart's copy is checked against it in e2e)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from api.crd import crds
from api.finalizerpolicy import FINALIZER, PLURALS, POLICY_NAME, cleanup_finalizer_policy
from propagator.cli.main import main


def test_the_policy_adds_the_finalizer_to_new_applications_only() -> None:
    policy, binding = cleanup_finalizer_policy()
    assert [policy["kind"], binding["kind"]] == list(PLURALS)
    assert binding["spec"]["policyName"] == policy["metadata"]["name"] == POLICY_NAME
    spec = policy["spec"]
    (rule,) = spec["matchConstraints"]["resourceRules"]
    assert rule["operations"] == ["CREATE"]  # an update never adds it back
    assert rule["resources"] == ["applicationpropagations"]
    assert rule["apiGroups"] == ["propagator.io"]
    # A policy that fails lets the create through: the controller adds the finalizer then.
    assert spec["failurePolicy"] == "Ignore"
    (condition,) = spec["matchConditions"]
    assert FINALIZER in condition["expression"]
    (mutation,) = spec["mutations"]
    # Appended to what the request carries (a JSON patch, not an apply that could replace
    # the list), or the list made when there is none.
    expression = mutation["jsonPatch"]["expression"]
    assert '"/metadata/finalizers/-"' in expression
    assert f'["{FINALIZER}"]' in expression


@pytest.mark.parametrize("flag", [[], ["--admission-policy"]], ids=["crds", "with the policy"])
def test_propagator_crds_prints_the_policy_when_asked(
    flag: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["crds", *flag]) == 0
    printed = list(yaml.safe_load_all(capsys.readouterr().out))
    assert printed == [*crds(), *(cleanup_finalizer_policy() if flag else [])]


def test_the_policy_is_not_written_with_the_chart_crds(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``--output-dir`` writes the chart's crds/ (the chart installs the policy itself)."""
    with pytest.raises(SystemExit) as exited:
        main(["crds", "--admission-policy", "--output-dir", str(tmp_path)])
    assert exited.value.code == 2
    assert "not allowed with argument --admission-policy" in capsys.readouterr().err
