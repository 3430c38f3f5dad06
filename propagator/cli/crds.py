"""``propagator crds``: print (or write) the CustomResourceDefinitions."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from api.crd import RESOURCES, crd_filename, crd_of, crds, to_yaml
from api.finalizerpolicy import cleanup_finalizer_policy


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "crds",
        help="print the CustomResourceDefinitions (pipe into `kubectl apply -f -`)",
        description="Print Propagator's CRDs, generated from the API models.",
    )
    what = parser.add_mutually_exclusive_group()
    what.add_argument(
        "--admission-policy",
        action="store_true",
        help="print the admission policy that adds the cleanup finalizer to each new "
        "ApplicationPropagation too (a Kubernetes 1.36+ hub; the chart installs it there)",
    )
    what.add_argument(
        "--output-dir",
        type=Path,
        help="write one file per CRD into this directory instead of printing "
        "(how charts/propagator/crds/ is generated)",
    )
    parser.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    if args.output_dir is None:
        policy = cleanup_finalizer_policy() if args.admission_policy else []
        print(to_yaml([*crds(), *policy]), end="")
        return 0
    args.output_dir.mkdir(parents=True, exist_ok=True)
    for resource in RESOURCES:
        path = args.output_dir / crd_filename(resource)
        path.write_text(to_yaml([crd_of(resource)]))
        print(f"wrote {path}")
    return 0
