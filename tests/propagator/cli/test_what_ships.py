"""What the controller ships with: the local fleet (fleet/local) and the Kubernetes client
it drives control planes with are the ``local`` extra, for `propagator local`, the benches
and the tests; the controller imports neither, so an image without them runs it."""

from __future__ import annotations

import subprocess
import sys

CONTROLLER = """
import sys
from propagator.cli.main import build_parser
build_parser()
import propagator.cli.run, propagator.propagation.controller, propagator.fleetmanager.manager
roots = ('kubernetes', 'fleet.local')
loaded = sorted(m for m in sys.modules if m in roots or m.startswith(tuple(r + '.' for r in roots)))
print(loaded)
"""


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120
    )


def test_the_controller_imports_neither_the_local_fleet_nor_the_kubernetes_client() -> None:
    done = _python(CONTROLLER)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_propagator_local_without_the_extra_says_what_to_install() -> None:
    done = _python(
        "import sys\n"
        "sys.modules['kubernetes'] = None  # not installed\n"
        "from propagator.cli.main import main\n"
        "sys.exit(main(['local', 'status']))\n"
    )
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "propagator local: needs kubernetes, which the controller does not ship with: "
        "pip install 'propagator[local]'"
    )
