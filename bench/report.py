"""Printing benchmark rows as a table or as JSON lines, recording them for the
documentation (``--record``: ``bench/results/<bench>.json``, from which
``python -m bench.pages`` writes docs/benchmarks.md), and percentiles."""

from __future__ import annotations

import argparse
import atexit
import datetime as dt
import json
import os
import platform
import re
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
"""Where ``--record`` keeps each bench's last recorded run."""


def arguments(
    doc: str | None,
    quick: str = "a shorter run (under a minute)",
    more: Callable[[argparse.ArgumentParser], None] | None = None,
) -> argparse.Namespace:
    """The options every benchmark takes, --quick and --json, and those ``more`` adds."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=quick)
    parser.add_argument("--json", action="store_true", help="one JSON object per row")
    parser.add_argument(
        "--record",
        action="store_true",
        help=f"also keep the run's rows in {RESULTS.name}/ for the documentation",
    )
    if more is not None:
        more(parser)
    args = parser.parse_args()
    if args.record:
        main = sys.modules["__main__"]
        module = main.__spec__.name if main.__spec__ is not None else Path(sys.argv[0]).stem
        _start_recording(module, [a for a in sys.argv[1:] if a not in ("--record", "--json")])
    return args


_recording: dict[str, Any] | None = None


def _start_recording(module: str, options: list[str]) -> None:
    """Keep every table :func:`emit` prints, written out when the bench (``module``, run
    with ``options``) ends, if it printed any: a bench that failed leaves the last
    recorded run as it was."""
    global _recording
    name = module.rpartition(".")[2]
    slug = re.sub(r"[^a-z0-9]+", "-", " ".join(options).lower()).strip("-")
    _recording = {
        "bench": module,
        "command": " ".join(["python -m", module, *options]),
        "file": f"{name}{'-' + slug if slug else ''}.json",
        "machine": machine(),
        "commit": _commit(),
        "date": dt.date.today().isoformat(),
        "tables": [],
    }
    atexit.register(_write_recording)


def _write_recording() -> None:
    if _recording is None or not _recording["tables"]:
        return
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / _recording.pop("file")
    path.write_text(json.dumps(_recording, indent=1) + "\n")
    print(f"recorded in {path}", file=sys.stderr)


def machine() -> str:
    """This machine, as a benchmark page names it: cores, memory, CPU model, Python."""
    memory = ""
    try:
        with open("/proc/meminfo") as f:
            kib = int(next(line for line in f if line.startswith("MemTotal")).split()[1])
        memory = f", {round(kib / 2**20)} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line for line in f if line.startswith("model name")).split(":")[1]
        model = f" ({model.strip()})"
    except (OSError, StopIteration, IndexError):
        pass
    cores = os.cpu_count() or 0
    return (
        f"{cores} cores{model}{memory}, {platform.system()} {platform.machine()}, "
        f"Python {platform.python_version()}"
    )


def _commit() -> str:
    """The commit measured (``+`` when the tree differs from it)."""
    root = RESULTS.parent.parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return (head or "unknown") + ("+" if dirty else "")


def percentile(samples: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile (0-100) of ``samples``, by linear interpolation."""
    ordered = sorted(samples)
    if len(ordered) == 1:
        return ordered[0]
    return statistics.quantiles(ordered, n=100, method="inclusive")[max(0, min(98, int(pct) - 1))]


def _cell(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def emit(rows: list[dict[str, Any]], columns: list[tuple[str, str]], as_json: bool) -> None:
    """Print ``rows``: one JSON object per line, or a table with ``columns`` (key, header;
    a row without a key has an empty cell); recorded as well with ``--record``."""
    if _recording is not None:
        _recording["tables"].append({"columns": [list(c) for c in columns], "rows": rows})
    if as_json:
        for row in rows:
            print(json.dumps(row))
        return
    cells = [[h for _, h in columns]] + [
        [_cell(row.get(k, "")) for k, _ in columns] for row in rows
    ]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    for r in cells:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)))
