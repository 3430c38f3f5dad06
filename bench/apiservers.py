"""What the members' API servers count themselves, read from their ``/metrics``."""

from __future__ import annotations

from fleet import local
from fleet.local import cluster as local_cluster


def watch_counts(state: local.FleetState) -> dict[str, int]:
    """What the members' API servers have counted so far, summed over the members:

    - ``watches_cut``: watches cut for falling behind. A server's watch cache offers each
      event of a kind to every watch of that kind that may match (by namespace, not by
      label), into a short queue per watch, and closes a watch whose queue stays full
      past a small shared time budget; the client starts it again from its last
      version, which the server replays from its cache.
    - ``config_map_events``: ConfigMap events sent to watches (those a watch's
      selector let through)."""
    cut = events = 0.0
    for member in state.members:
        text = local_cluster.metrics(member)
        cut += local_cluster.counted(text, "apiserver_terminated_watchers_total")
        events += local_cluster.counted(
            text, "apiserver_watch_events_total", {"resource": "configmaps"}
        )
    return {"watches_cut": int(cut), "config_map_events": int(events)}


def watch_counts_since(state: local.FleetState, before: dict[str, int]) -> dict[str, int]:
    """:func:`watch_counts` counted since ``before`` (an earlier result of it)."""
    return {key: value - before[key] for key, value in watch_counts(state).items()}
