"""Entry point of the ``propagator`` command: one sub-command per area."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from propagator.cli import (
    agent,
    chart,
    crds,
    fleet,
    interpreter,
    local,
    reference,
    run,
    schedule,
)
from propagator.cli.parser import Parser


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="propagator",
        description="Propagator: run one application across a fleet of Kubernetes clusters.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    agent.register(commands)
    chart.register(commands)
    crds.register(commands)
    fleet.register(commands)
    interpreter.register(commands)
    local.register(commands)
    reference.register(commands)
    run.register(commands)
    schedule.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
