"""Printing benchmark rows as a table or as JSON lines, and percentiles."""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable, Sequence
from typing import Any


def arguments(
    doc: str | None,
    quick: str = "a shorter run (under a minute)",
    more: Callable[[argparse.ArgumentParser], None] | None = None,
) -> argparse.Namespace:
    """The options every benchmark takes, --quick and --json, and those ``more`` adds."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=quick)
    parser.add_argument("--json", action="store_true", help="one JSON object per row")
    if more is not None:
        more(parser)
    return parser.parse_args()


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
    a row without a key has an empty cell)."""
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
