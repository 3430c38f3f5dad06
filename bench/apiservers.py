"""What the members' API servers count themselves, read from their ``/metrics``."""

from __future__ import annotations

from fleet import local
from fleet.local import cluster as local_cluster

TERMINATED_WATCHERS = "apiserver_terminated_watchers_total{"


def watches_cut(state: local.FleetState) -> int:
    """Watches the members' API servers have cut so far for falling behind: a server's
    watch cache offers each event of a kind to every watch of that kind that may match
    (by namespace, not by label), into a short queue per watch, and closes a watch whose
    queue stays full past a small shared time budget; the client starts it again from
    its last version, which the server replays from its cache."""
    cut = 0.0
    for member in state.members:
        for line in local_cluster.metrics(member).splitlines():
            if line.startswith(TERMINATED_WATCHERS):
                cut += float(line.rsplit(" ", 1)[1])
    return int(cut)
