"""What a scheduler plugin is: the protocols a plugin implements (declared here, so a
plugin of another package can be checked against them).

A plugin has a ``name`` and a ``filter`` method (returns None to keep the cluster,
``(reason, detail)`` or :class:`Unschedulable` to drop it, :class:`Failed` when it could
not judge) and/or a ``score`` method (0 to 100; clamped). Plugins are found through the
entry point group ``propagator.scheduler.plugins`` (see
:mod:`propagator.scheduler.pluginregistry`); the built-ins, one module each in this
package, are registered there by Propagator's own pyproject.

The built-ins also judge a whole candidate set at once from the snapshot's columns
(``filter_columns``: the rejected clusters as a bitset; ``score_columns``: one score per
position), with results equal to their per-cluster methods; returning None from
``filter_columns`` hands the set to the per-cluster method.

A plugin may also say what its answers depend on besides the cluster: ``memo_key(ctx)``
returns a hashable value (None: nothing can be kept), and the scheduler keeps its answers
for each cluster under that key until the snapshot's next generation — applications made
from one template share tolerations, selectors and demand, so most decisions find the
built-ins' answers made. A filter's answer on a cluster where the application runs is
never kept (it counts the application's own use there).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Protocol, runtime_checkable

from fleet.columns import Columns
from fleet.snapshot import ClusterInfo
from propagator.scheduler.types import (
    SchedulingContext,
)

_ZERO = Decimal(0)
Rejection = tuple[str, str]
"""(short reason counted in summaries, detail for explanations)."""


@dataclass(frozen=True)
class Unschedulable:
    """The cluster cannot take the application (the same as returning a Rejection)."""

    reason: str
    detail: str


@dataclass(frozen=True)
class Failed:
    """The plugin could not judge the cluster (an error of its own, not of the cluster):
    the cluster is left out of this decision, and the decision says so."""

    reason: str
    detail: str


FilterResult = Rejection | Unschedulable | Failed | None


@runtime_checkable
class FilterPlugin(Protocol):
    name: str

    def filter(self, cluster: ClusterInfo, ctx: SchedulingContext) -> FilterResult:
        """None to keep ``cluster``; (reason, detail) or Unschedulable to drop it; Failed
        when it cannot tell."""


@runtime_checkable
class ScorePlugin(Protocol):
    name: str

    def score(self, cluster: ClusterInfo, ctx: SchedulingContext) -> float:
        """How good ``cluster`` is for this placement, 0 to 100."""


@runtime_checkable
class Memoized(Protocol):
    """A plugin whose answers depend on nothing but the cluster and what ``memo_key``
    returns: the scheduler keeps them per cluster under that key until the snapshot's
    next generation (None: nothing can be kept this time)."""

    def memo_key(self, ctx: SchedulingContext) -> Hashable | None: ...


@runtime_checkable
class ColumnarFilter(FilterPlugin, Protocol):
    """A filter that judges a whole candidate set at once from the snapshot's columns,
    with the answers of its per-cluster method."""

    def filter_columns(self, cols: Columns, alive: int, ctx: SchedulingContext) -> int | None:
        """The rejected clusters among ``alive`` (a bitset by column position); None hands
        the set to :meth:`filter`, cluster by cluster."""
        ...


@runtime_checkable
class ColumnarScore(ScorePlugin, Protocol):
    """A score that scores a whole candidate set at once from the snapshot's columns,
    with the answers of its per-cluster method."""

    def score_columns(
        self, cols: Columns, positions: Sequence[int], ctx: SchedulingContext
    ) -> list[float] | None:
        """One score per position in ``positions``; None hands them to :meth:`score`."""
        ...
