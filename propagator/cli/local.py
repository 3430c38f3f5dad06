"""``propagator local``: start, inspect and stop a local fleet of real control planes.

The parser only: what the actions do (``propagator.cli.localfleet``) is imported when one
runs, as it needs the Kubernetes client of the ``local`` extra.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "local",
        help="run a hub and member clusters locally (etcd, kube-apiserver, "
        "kube-controller-manager, kube-scheduler, kwok)",
        description="Real Kubernetes control planes on loopback, for demos and tests.",
    )
    sub = parser.add_subparsers(dest="local_command", metavar="ACTION", required=True)
    state_help = (
        "state directory (default: $XDG_STATE_HOME/propagator/local, "
        "else ~/.local/state/propagator/local)"
    )

    up = sub.add_parser("up", help="start a hub and N members; returns once all are ready")
    up.add_argument("--members", type=int, default=3, help="member clusters (default: 3)")
    up.add_argument(
        "--nodes-per-cluster", type=int, default=2, help="fake kwok nodes per cluster (default: 2)"
    )
    up.add_argument("--node-cpu", default="8", help="CPU of each fake node (default: 8)")
    up.add_argument(
        "--node-memory", default="32Gi", help="memory of each fake node (default: 32Gi)"
    )
    up.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="seconds to wait for every cluster to become ready (default: 300)",
    )
    up.add_argument("--state-dir", type=Path, default=None, help=state_help)
    up.set_defaults(run=_action("up"))

    down = sub.add_parser("down", help="stop every process of the local fleet")
    down.add_argument("--state-dir", type=Path, default=None, help=state_help)
    down.add_argument(
        "--keep-state",
        action="store_true",
        help="keep the state directory (logs, data, kubeconfigs)",
    )
    down.set_defaults(run=_action("down"))

    status = sub.add_parser("status", help="show each cluster, its components and memory")
    status.add_argument("--state-dir", type=Path, default=None, help=state_help)
    status.set_defaults(run=_action("status"))


def _action(name: str) -> Callable[[argparse.Namespace], int]:
    """The action ``name`` of ``propagator.cli.localfleet``, imported when it runs."""

    def run(args: argparse.Namespace) -> int:
        try:
            from propagator.cli import localfleet
        except ImportError as exc:
            print(
                f"propagator local: needs {exc.name or 'the Kubernetes client'}, which the "
                "controller does not ship with: pip install 'propagator[local]'",
                file=sys.stderr,
            )
            return 1
        action: Callable[[argparse.Namespace], int] = getattr(localfleet, name)
        return action(args)

    return run
