"""``propagator local up/status/down`` and the failure path of ``up``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from fleet import local
from fleet.local.testbin import BINARIES, ENV_VAR


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().decode(errors="replace")
        except OSError:
            continue
        if text in args and str(os.getpid()) != cmdline.parent.name:
            found.append(args.replace("\0", " "))
    return found


def _propagator(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "propagator.cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def test_cli_up_status_down_leaves_no_process(testbin: Path, tmp_path: Path) -> None:
    state_dir = tmp_path / "cli-fleet"
    env = {**os.environ, ENV_VAR: str(testbin)}
    up = _propagator(
        "local",
        "up",
        "--members",
        "1",
        "--nodes-per-cluster",
        "1",
        "--state-dir",
        str(state_dir),
        env=env,
    )
    assert up.returncode == 0, up.stderr
    assert f"kubeconfig: {state_dir}/kubeconfigs/hub.yaml" in up.stdout
    assert f"kubeconfig: {state_dir}/kubeconfigs/member-1.yaml" in up.stdout

    again = _propagator("local", "up", "--state-dir", str(state_dir), env=env)
    assert again.returncode == 1
    assert "already running" in again.stderr

    status = _propagator("local", "status", "--state-dir", str(state_dir), env=env)
    assert status.returncode == 0, status.stderr
    rows = [line.split() for line in status.stdout.splitlines()[1:]]
    assert [(r[0], r[2]) for r in rows] == [("hub", "ready"), ("member-1", "ready")]
    assert all("DOWN" not in line for line in status.stdout.splitlines())

    kubectl = subprocess.run(
        [
            str(testbin / "kubectl"),
            "--kubeconfig",
            str(state_dir / "kubeconfigs/member-1.yaml"),
            "get",
            "nodes",
            "-o",
            "name",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert kubectl.stdout.strip() == "node/member-1-node-1", kubectl.stderr

    down = _propagator("local", "down", "--state-dir", str(state_dir), env=env)
    assert down.returncode == 0, down.stderr
    assert _processes_mentioning(str(state_dir)) == []
    assert not state_dir.exists()


def test_up_stops_everything_and_names_the_component_that_died(
    testbin: Path, tmp_path: Path
) -> None:
    broken = tmp_path / "bin"
    broken.mkdir()
    for name in BINARIES:
        (broken / name).symlink_to(testbin / name)
    (broken / "kube-apiserver").unlink()
    (broken / "kube-apiserver").write_text(
        "#!/bin/sh\necho 'E1130 flag provided but not defined: -oops' >&2\nexit 2\n"
    )
    (broken / "kube-apiserver").chmod(0o755)
    state_dir = tmp_path / "broken-fleet"

    with pytest.raises(local.LocalFleetError) as failed:
        anyio.run(local.up, state_dir, broken, local.FleetOptions(members=1, nodes_per_cluster=1))

    message = str(failed.value)
    assert "/kube-apiserver: exited during start-up" in message
    assert "flag provided but not defined: -oops" in message
    assert "stopped everything it started" in message
    assert _processes_mentioning(str(state_dir)) == []
    assert (state_dir / "clusters" / "hub" / "logs" / "etcd.log").exists()
