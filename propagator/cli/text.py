"""Plain-text output of the CLI."""

from __future__ import annotations

from collections.abc import Sequence


def table(rows: Sequence[Sequence[str]]) -> list[str]:
    """``rows`` (the first one the header) as aligned columns, kubectl style."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return [
        "   ".join([*(v.ljust(w) for v, w in zip(r[:-1], widths, strict=True)), r[-1]]).rstrip()
        for r in rows
    ]
