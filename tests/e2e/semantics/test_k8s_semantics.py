"""api/quantity.py, api/selectors.py and api/taints.py against Kubernetes' own code.

``k8s-semantics`` (hack/tools/k8s-semantics, built by hack/testbin.sh from the pinned
apimachinery v0.37.2 and api v0.37.2) answers each question with the functions the API
server, kube-scheduler and the kubelet use. Thousands of generated inputs, seeded so that a
failure names an input that can be replayed.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from api.quantity import QuantityError, parse
from api.selectors import LabelSelector, LabelSelectorRequirement, to_query
from api.taints import Taint, Toleration

SEED = int(os.environ.get("PROPAGATOR_SEMANTICS_SEED", "20261201"))


def _wire(model: Taint | Toleration) -> dict[str, Any]:
    """A model as the API server reads it: camelCase, unset fields left out."""
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


@pytest.fixture(scope="module")
def kubernetes(testbin: Path) -> Any:
    """Ask Kubernetes: a list of questions in, a list of answers out."""
    oracle = testbin / "k8s-semantics"
    assert os.access(oracle, os.X_OK), f"{oracle} is missing: run `make testbin`"

    def ask(questions: list[dict[str, Any]]) -> list[dict[str, Any]]:
        text = "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in questions)
        done = subprocess.run([oracle], input=text, capture_output=True, text=True, check=True)
        answers = [json.loads(line) for line in done.stdout.splitlines()]
        assert len(answers) == len(questions), done.stderr
        return answers

    return ask


_SUFFIXES = ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]


def _quantity_inputs(rng: random.Random) -> list[str | int | float]:
    inputs: list[str | int | float] = [" 1", "1 ", "\u00a01", ".", "-.", "-", "+", "1e51"]
    inputs += ["1e60", "1" + "0" * 53, "9Ei", "8Ei", "-3.001n", "1G", "1u", "1e4294967296"]
    inputs += [1e51, 0.5, 3, -7, 1e-05, "Ki", "Pi", "e-66", "32GB", "1.G", "+-1", "1e+"]
    alphabet = "0123456789.+-eEinumkKMGTP "
    for _ in range(6000):
        inputs.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8))))
    for _ in range(3000):
        number = str(rng.randint(-(10**25), 10**25))
        fraction = rng.choice(["", ".", f".{rng.randint(0, 10**12)}"])
        suffix = rng.choice([*_SUFFIXES, f"e{rng.randint(-40, 40)}", f"E{rng.randint(-12, 30)}"])
        inputs.append(number + fraction + suffix)
    for _ in range(1000):  # 64-bit exponents wrapped to 32 bits
        exponent = rng.randint(-2, 2) * 2**32 + rng.randint(-3000, 3000)
        inputs.append(f"{rng.randint(0, 10**30)}.{rng.randint(0, 999)}e{exponent}")
    return inputs


def test_quantities_read_and_written_as_kubernetes_does(kubernetes: Any) -> None:
    rng = random.Random(SEED)
    inputs = _quantity_inputs(rng)
    answers = kubernetes([{"op": "quantity", "quantity": q} for q in inputs])
    wrong: list[Any] = []
    for text, theirs in zip(inputs, answers, strict=True):
        try:
            quantity = parse(text)
        except QuantityError:
            if "error" not in theirs:
                wrong.append((text, "refused here", theirs))
            continue
        if "error" in theirs:
            wrong.append((text, f"accepted here as {quantity}", theirs))
        elif (Decimal(theirs["value"]), theirs["format"], theirs["canonical"]) != (
            quantity.value,
            quantity.format,
            str(quantity),
        ):
            wrong.append((text, (str(quantity.value), quantity.format, str(quantity)), theirs))
    assert not wrong, f"{len(wrong)} of {len(inputs)} differ (seed {SEED}): {wrong[:5]}"


def test_quantities_compare_as_kubernetes_does(kubernetes: Any) -> None:
    rng = random.Random(SEED)
    accepted = [q for q in _quantity_inputs(rng) if isinstance(q, str) and _parses(q)]
    pairs = [(rng.choice(accepted), rng.choice(accepted)) for _ in range(3000)]
    answers = kubernetes([{"op": "cmp", "quantity": a, "other": b} for a, b in pairs])
    wrong: list[Any] = []
    for (a, b), theirs in zip(pairs, answers, strict=True):
        x, y = parse(a).value, parse(b).value
        if theirs.get("error") is None and (x > y) - (x < y) != theirs["cmp"]:
            wrong.append((a, b, theirs))
    assert not wrong, f"seed {SEED}: {wrong[:5]}"


def _parses(text: str) -> bool:
    try:
        parse(text.strip())
    except QuantityError:
        return False
    return text == text.strip()  # Go's ParseQuantity (the "other" side) does not trim


_KEYS = ["a", "b", "app", "example.com/team", "-bad", "Bad.Domain/x", "a/b/c", "k" * 64, ""]
_VALUES = ["", "x", "y", "web", "a b", "b,c", "-v", "v" * 64, "007", "5", "12", "-3", "x.y_z"]


def _selector(rng: random.Random) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if rng.random() < 0.6:
        spec["matchLabels"] = {
            rng.choice(_KEYS): rng.choice(_VALUES) for _ in range(rng.randint(0, 3))
        }
    expressions = []
    for _ in range(rng.randint(0, 3)):
        operator = rng.choice(["In", "NotIn", "Exists", "DoesNotExist"])
        count = (
            rng.choice([0, 1, 1, 2, 3]) if operator in ("In", "NotIn") else rng.choice([0, 0, 1])
        )
        values = [rng.choice(_VALUES) for _ in range(count)]
        expressions.append({"key": rng.choice(_KEYS), "operator": operator, "values": values})
    if expressions:
        spec["matchExpressions"] = expressions
    return spec


def _labels(rng: random.Random) -> dict[str, str]:
    valid_keys = ["a", "b", "app", "example.com/team"]
    return {rng.choice(valid_keys): rng.choice(["x", "y", "web", ""]) for _ in range(3)}


def test_selectors_validated_written_and_matched_as_kubernetes_does(kubernetes: Any) -> None:
    rng = random.Random(SEED)
    cases = [(_selector(rng), _labels(rng)) for _ in range(4000)]
    answers = kubernetes([{"op": "selector", "selector": s, "labels": lb} for s, lb in cases])
    wrong: list[Any] = []
    for (spec, labels), theirs in zip(cases, answers, strict=True):
        try:
            selector = LabelSelector.model_validate(spec)
        except ValidationError:
            if not theirs.get("errors"):
                wrong.append((spec, "refused here", theirs))
            continue
        if theirs.get("errors"):
            wrong.append((spec, "accepted here", theirs))
        elif (to_query(selector), selector.matches(labels)) != (
            theirs.get("query", ""),
            theirs["matches"],
        ):
            wrong.append((spec, labels, to_query(selector), theirs))
    assert not wrong, f"{len(wrong)} of {len(cases)} differ (seed {SEED}): {wrong[:5]}"


_NUMBERS = ["0", "5", "12", "007", "-3", "+4", "99999999999999999999", "1.5", "five", ""]


def test_gt_and_lt_requirements_match_as_kubernetes_does(kubernetes: Any) -> None:
    rng = random.Random(SEED)
    cases = []
    for _ in range(2000):
        bound = rng.choice(["0", "5", "12", "007", "9223372036854775807"])
        labels = {"n": rng.choice(_NUMBERS)} if rng.random() < 0.9 else {}
        cases.append((rng.choice(["Gt", "Lt"]), bound, labels))
    answers = kubernetes(
        [
            {"op": "requirement", "key": "n", "operator": op.lower(), "values": [v], "labels": lb}
            for op, v, lb in cases
        ]
    )
    wrong: list[Any] = []
    for (operator, bound, labels), theirs in zip(cases, answers, strict=True):
        requirement = LabelSelectorRequirement(key="n", operator=operator, values=[bound])
        query = f"n{'>' if operator == 'Gt' else '<'}{bound}"
        if (requirement.matches(labels), requirement.to_query()) != (theirs["matches"], query):
            wrong.append((operator, bound, labels, theirs))
        if theirs.get("query", query) != query:
            wrong.append((operator, bound, "query", theirs))
    assert not wrong, f"seed {SEED}: {wrong[:5]}"


def test_tolerations_match_taints_as_kubernetes_does(kubernetes: Any) -> None:
    rng = random.Random(SEED)
    effects = ["NoSchedule", "PreferNoSchedule", "NoExecute"]
    values = ["", "x", "0", "5", "12", "-3", "05", "99999999999999999999"]
    cases: list[tuple[Toleration, Taint]] = []
    while len(cases) < 3000:
        operator = rng.choice(["Exists", "Equal", "Gt", "Lt"])
        spec: dict[str, Any] = {"operator": operator}
        if operator != "Exists" or rng.random() < 0.5:
            spec["key"] = rng.choice(["k", "j"])
        if operator != "Exists":
            spec["value"] = rng.choice(values)
        if rng.random() < 0.5:
            spec["effect"] = rng.choice(effects)
        try:
            toleration = Toleration.model_validate(spec)
        except ValidationError:
            continue  # the API server refuses it too; matching only runs on valid ones
        value = rng.choice([v for v in values if v != "-3"])  # a taint's value is a label value
        taint = Taint(key=rng.choice(["k", "j"]), value=value, effect=rng.choice(effects))
        cases.append((toleration, taint))
    answers = kubernetes(
        [{"op": "tolerates", "toleration": _wire(t), "taint": _wire(taint)} for t, taint in cases]
    )
    wrong = [
        (_wire(t), _wire(taint), theirs)
        for (t, taint), theirs in zip(cases, answers, strict=True)
        if t.tolerates(taint) != theirs["matches"]
    ]
    assert not wrong, f"seed {SEED}: {wrong[:5]}"
