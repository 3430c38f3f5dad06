"""Where the Kubernetes test binaries are: built by hack/testbin.sh from pinned Go modules."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

BINARIES = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "kwok",
)
ENV_VAR = "PROPAGATOR_TESTBIN_DIR"
# Present when running from a source checkout; installed wheels have no hack/.
_BUILD_SCRIPT = Path(__file__).resolve().parents[2] / "hack" / "testbin.sh"


class TestbinError(RuntimeError):
    """The Kubernetes test binaries are missing and cannot be built here."""


def _check(directory: Path) -> Path:
    missing = [b for b in BINARIES if not os.access(directory / b, os.X_OK)]
    if missing:
        raise TestbinError(
            f"{ENV_VAR}={directory} lacks {', '.join(missing)}; run `make testbin` "
            "(hack/testbin.sh) to build the Kubernetes test binaries"
        )
    return directory


def testbin_dir() -> Path:
    """The directory holding the binaries, building them first from a source checkout.

    ``PROPAGATOR_TESTBIN_DIR`` wins; otherwise ``hack/testbin.sh`` of the checkout is run,
    which returns at once when its cache is current.
    """
    if explicit := os.environ.get(ENV_VAR):
        return _check(Path(explicit))
    if not _BUILD_SCRIPT.exists():
        raise TestbinError(
            f"set {ENV_VAR} to a directory holding {', '.join(BINARIES)} "
            "(build them with `make testbin` in a Propagator checkout)"
        )
    result = subprocess.run(
        ["bash", str(_BUILD_SCRIPT)], stdout=subprocess.PIPE, text=True, check=False
    )
    if result.returncode != 0:
        raise TestbinError(f"{_BUILD_SCRIPT} failed with exit code {result.returncode}")
    return _check(Path(result.stdout.strip().splitlines()[-1]))
