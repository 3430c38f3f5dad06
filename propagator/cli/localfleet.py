"""What ``propagator local`` does: start, inspect and stop a local fleet (imported when
the command runs: the Kubernetes client it needs is the ``local`` extra, which the
controller does not ship with)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import anyio
from pydantic import ValidationError

from api.quantity import QuantityError, parse_quantity
from fleet import local
from fleet.local import cluster as local_cluster
from fleet.local import process


def _state_dir(args: argparse.Namespace) -> Path:
    return Path(args.state_dir or local.default_state_dir()).resolve()


def _fail(message: str) -> int:
    print(f"propagator local: {message}", file=sys.stderr)
    return 1


def up(args: argparse.Namespace) -> int:
    try:
        options = local.FleetOptions(
            members=args.members,
            nodes_per_cluster=args.nodes_per_cluster,
            node_cpu=args.node_cpu,
            node_memory=args.node_memory,
            timeout_s=args.timeout,
        )
    except ValidationError as exc:
        flags = {
            "members": "--members",
            "nodes_per_cluster": "--nodes-per-cluster",
            "timeout_s": "--timeout",
        }
        errors = "; ".join(
            f"{flags.get(str(e['loc'][0]), e['loc'][0])}={e['input']}: {e['msg']}"
            for e in exc.errors()
        )
        return _fail(errors)
    # A fake node still goes through the scheduler's arithmetic: keep it to real sizes.
    bounds = (
        ("--node-cpu", args.node_cpu, 10**4, "10000"),
        ("--node-memory", args.node_memory, 2**50, "1Pi"),
    )
    for flag, value, most, shown in bounds:
        try:
            amount = parse_quantity(value)
        except QuantityError as exc:
            return _fail(f"{flag}: {exc}")
        if not 0 < amount <= most:
            return _fail(f"{flag}={value!r}: must be greater than zero and at most {shown}")
    state_dir = _state_dir(args)
    try:
        binaries = local.testbin_dir()
        print(f"Starting a hub and {options.members} members in {state_dir} ...", flush=True)
        state = anyio.run(local.up, state_dir, binaries, options)
    except (local.LocalFleetError, local.TestbinError) as exc:
        return _fail(str(exc))
    print(f"Local fleet ready: {len(state.clusters)} clusters.")
    for c in state.clusters:
        print(f"  {c.name:<10} {c.role:<6} {c.server:<26} kubeconfig: {c.kubeconfig}")
    print(f"\nUse the hub:  export KUBECONFIG={state.hub.kubeconfig}")
    print(f"Stop it all:  propagator local down --state-dir {state_dir}")
    return 0


def down(args: argparse.Namespace) -> int:
    state_dir = _state_dir(args)
    try:
        state = local.FleetState.load(state_dir)
    except local.LocalFleetError as exc:
        return _fail(str(exc))
    local.down(state, keep_state=args.keep_state)
    kept = f" (state kept in {state_dir})" if args.keep_state else ""
    print(f"Stopped {len(state.clusters)} clusters{kept}.")
    return 0


def status(args: argparse.Namespace) -> int:
    try:
        state = local.FleetState.load(_state_dir(args))
    except local.LocalFleetError as exc:
        return _fail(str(exc))
    print(f"{'CLUSTER':<10} {'ROLE':<6} {'API':<9} {'SERVER':<26} {'RSS':>9}  COMPONENTS")
    for c in state.clusters:
        ready = "ready" if local_cluster.api_ready(c) else "down"
        rss = local_cluster.rss_bytes(c) / (1 << 20)
        parts = " ".join(
            f"{r.name}={'up' if process.is_running(r) else 'DOWN'}" for r in c.components.values()
        )
        print(f"{c.name:<10} {c.role:<6} {ready:<9} {c.server:<26} {rss:>6.0f}MiB  {parts}")
    return 0
