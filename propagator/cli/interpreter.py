"""``propagator interpreter``: the built-in interpreter rules, and ResourceInterpreters
compiled as the controller compiles them (for a platform's CI, before they reach the hub)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from api.crd import to_yaml
from propagator.interpreter.builtins import builtin_interpreters
from propagator.interpreter.registry import Interpreters


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "interpreter",
        help="print the built-in interpreter rules, or check ResourceInterpreters",
        description="Interpreter rules: how Propagator reads each kind's health, replicas, "
        "status and dependencies (docs/interpreter.md).",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    defaults = actions.add_parser(
        "defaults",
        help="print the built-in rules as ResourceInterpreters (a starting point)",
        description="Print the rules the controller ships for core kinds, one "
        "ResourceInterpreter per kind; apply one (edited) to replace those parts of it.",
    )
    defaults.add_argument("--kind", help="only this kind (e.g. Deployment)")
    defaults.set_defaults(run=_defaults)
    check = actions.add_parser(
        "check",
        help="compile ResourceInterpreters from files; exit 1 naming each problem",
        description="Compile and type-check every ResourceInterpreter in the files as the "
        "controller does; print each expression that fails, where and why.",
    )
    check.add_argument("files", nargs="+", type=Path, metavar="FILE", help="YAML, '-': stdin")
    check.set_defaults(run=_check)


def _defaults(args: argparse.Namespace) -> int:
    chosen = [
        r.model_dump(by_alias=True, exclude_none=True, exclude={"status"})
        for r in builtin_interpreters()
        if args.kind is None or r.spec.target.kind.lower() == args.kind.lower()
    ]
    if not chosen:
        print(f"no built-in rules for kind {args.kind!r}", file=sys.stderr)
        return 1
    print(to_yaml(chosen), end="")
    return 0


def _documents(path: Path) -> list[Any]:
    text = sys.stdin.read() if str(path) == "-" else path.read_text()
    return [d for d in yaml.safe_load_all(text) if d is not None]


def _check(args: argparse.Namespace) -> int:
    problems = 0
    for path in args.files:
        try:
            documents = _documents(path)
        except (OSError, yaml.YAMLError) as exc:
            print(f"{path}: {exc}", file=sys.stderr)
            problems += 1
            continue
        for index, doc in enumerate(documents):
            if not isinstance(doc, dict) or doc.get("kind") != "ResourceInterpreter":
                continue
            name = str((doc.get("metadata") or {}).get("name") or f"document {index + 1}")
            compiled = Interpreters().set(doc)
            if compiled.error is None:
                print(f"{path}: ResourceInterpreter {name}: compiled")
            else:
                print(f"{path}: ResourceInterpreter {name}: {compiled.error}", file=sys.stderr)
                problems += 1
    return 1 if problems else 0
