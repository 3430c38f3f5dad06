"""propagator interpreter: the built-in rules printed, and ResourceInterpreters checked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from propagator.cli.main import main
from propagator.interpreter.registry import Interpreters
from tests.root import ROOT


def test_the_defaults_are_resource_interpreters_that_compile(capsys: Any) -> None:
    assert main(["interpreter", "defaults"]) == 0
    printed = list(yaml.safe_load_all(capsys.readouterr().out))
    assert len(printed) == 12
    for doc in printed:
        assert doc["kind"] == "ResourceInterpreter"
        assert Interpreters().set(doc).error is None, doc["metadata"]["name"]
    assert main(["interpreter", "defaults", "--kind", "Gadget"]) == 1
    assert "no built-in rules for kind 'Gadget'" in capsys.readouterr().err


def test_check_names_each_expression_that_fails(tmp_path: Path, capsys: Any) -> None:
    example = ROOT / "docs" / "examples" / "resource-interpreter.yaml"
    assert main(["interpreter", "check", str(example)]) == 0
    assert "workerpool.apps.example.com: compiled" in capsys.readouterr().out
    broken: dict[str, Any] = yaml.safe_load(example.read_text())
    broken["spec"]["replicas"]["count"] = "self.spec.workers + 'x'"
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(broken))
    assert main(["interpreter", "check", str(path)]) == 1
    err = capsys.readouterr().err
    assert "spec.replicas.count: \"self.spec.workers + 'x'\"" in err
    assert "is of type STRING, not int" in err
    assert main(["interpreter", "check", str(tmp_path / "missing.yaml")]) == 1
