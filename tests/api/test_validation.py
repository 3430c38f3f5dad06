"""The models reject what the API server rejects (same table as the e2e test), and accept
every example in docs/examples/."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from api.application import ApplicationPropagationStatus
from api.crd import RESOURCES
from api.resource import Resource
from tests.api.cases import BAD_OBJECTS, BadObject
from tests.root import ROOT


def _condition(type_: str) -> dict[str, Any]:
    return {
        "type": type_,
        "status": "True",
        "reason": "Done",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }


def _evicted(cluster: str) -> dict[str, Any]:
    return {"cluster": cluster, "reason": "ApplicationUnhealthy", "since": "2026-01-01T00:00:00Z"}


EXAMPLES = ROOT / "docs" / "examples"
MODELS: dict[str, type[Resource]] = {r.crd.kind: r for r in RESOURCES}


def _path(error: Any) -> str:
    """Where pydantic says the error is, written like the API server: a.b[0].c, a.b[key]."""
    path = ""
    for part in error["loc"]:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    # A rule with a field path reports it at the start of its message ("steps: ...").
    message = error["msg"].removeprefix("Value error, ")
    head = message.split(": ", 1)[0]
    if ": " in message and head.isidentifier():
        path += f".{head}"
    return path.lstrip(".")


def _normalised(path: str) -> str:
    # pydantic puts map keys in the path like fields: spec.hard.cpu for spec.hard[cpu].
    return path.replace("[", ".").replace("]", "")


@pytest.mark.parametrize("case", BAD_OBJECTS, ids=lambda c: c.id)
def test_models_reject_bad_objects(case: BadObject) -> None:
    with pytest.raises(ValidationError) as rejected:
        MODELS[case.obj["kind"]].model_validate(case.obj)
    paths = [_path(e) for e in rejected.value.errors()]
    assert any(_normalised(p).startswith(_normalised(case.field)) for p in paths), paths


def _examples() -> list[tuple[str, dict[str, Any]]]:
    docs = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc["apiVersion"].startswith("propagator.io/"):
                docs.append((f"{path.name}:{doc['metadata']['name']}", doc))
    return docs


@pytest.mark.parametrize(("name", "doc"), _examples(), ids=[n for n, _ in _examples()])
def test_examples_are_valid(name: str, doc: dict[str, Any]) -> None:
    MODELS[doc["kind"]].model_validate(doc)


def test_every_kind_has_an_example() -> None:
    assert {doc["kind"] for _, doc in _examples()} == set(MODELS)


def test_tenant_quota_takes_huge_and_exponent_quantities() -> None:
    # valid Kubernetes quantities that once raised decimal.InvalidOperation here
    from tests.api.cases import tq

    huge = {"cpu": "1e60", "memory": "1" + "0" * 53, "pods": "1e51"}
    MODELS["TenantQuota"].model_validate(tq({"hard": huge}))


@pytest.mark.parametrize(
    ("status", "refused"),
    [
        (
            {"conditions": [_condition("Applied"), _condition("Ready"), _condition("Applied")]},
            "conditions: {'type': 'Applied'} is listed twice",
        ),
        (
            {"clusters": [{"name": "m1"}, {"name": "m2"}, {"name": "m1"}]},
            "clusters: {'name': 'm1'} is listed twice",
        ),
        (
            {"evicted": [_evicted("m1"), _evicted("m1")]},
            "evicted: {'cluster': 'm1'} is listed twice",
        ),
    ],
)
def test_a_status_list_keyed_by_a_field_refuses_the_same_key_twice(
    status: dict[str, Any], refused: str
) -> None:
    """The status the controller builds is validated before it is written: the API server
    would refuse a map-type list with a key twice."""
    with pytest.raises(ValidationError, match=refused):
        ApplicationPropagationStatus.model_validate(status)
    unique = {k: v[:2] if k != "evicted" else v[:1] for k, v in status.items()}
    ApplicationPropagationStatus.model_validate(unique)
