"""The last renders of each application, kept by their inputs.

An application is planned again on every resync, on every change of its Fleet's clusters
in the snapshot and when a hub object it selects changes; most of those plans render the
same manifests with the same overrides for the same clusters as the one before. A render
with templates or overrides is a round trip to a worker process that runs at a lower CPU
priority (a quarter of a plan's time on a busy machine). A render whose inputs are those of
one of the application's last renders returns that render's output instead.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from api.application import Override
from propagator.render.manifests import ApplicationRef
from propagator.render.worker import RenderTarget

Rendered = dict[str, list[dict[str, Any]]]
RenderFn = Callable[
    [Sequence[Mapping[str, Any]], Sequence[Override], Sequence[RenderTarget], ApplicationRef],
    Awaitable[Rendered],
]

KEPT_PER_APPLICATION = 3
"""Renders kept per application: a plan renders the revision rolled out, the one the
clusters a rollout has not reached run, and a canary's stable revision."""


def inputs_digest(
    manifests: Sequence[Mapping[str, Any]],
    overrides: Sequence[Override],
    targets: Sequence[RenderTarget],
    app: ApplicationRef,
) -> bytes:
    """A digest of everything a render reads."""
    text = json.dumps(
        [
            list(manifests),
            [o.model_dump(mode="json") for o in overrides],
            [vars(t) for t in targets],  # plain fields, no copy (asdict copies deep)
            vars(app),
        ],
        sort_keys=True,
        separators=(",", ":"),
        default=dict,  # a target's labels may be any mapping
    )
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


class RenderMemo:
    """Renders through ``render`` unless the same application rendered the same inputs
    among its last ``KEPT_PER_APPLICATION`` renders. Failed renders are not kept. The output
    is shared between the plans that get it: nobody may change it (every consumer copies
    before it adds anything)."""

    def __init__(self, render: RenderFn) -> None:
        self._render = render
        self._kept: dict[str, OrderedDict[bytes, Rendered]] = {}

    async def render(
        self,
        key: str,
        manifests: Sequence[Mapping[str, Any]],
        overrides: Sequence[Override],
        targets: Sequence[RenderTarget],
        app: ApplicationRef,
    ) -> Rendered:
        """The objects for each target, as ``render`` returns them (or raises)."""
        digest = inputs_digest(manifests, overrides, targets, app)
        kept = self._kept.get(key)
        if kept is not None and (found := kept.get(digest)) is not None:
            kept.move_to_end(digest)
            return found
        rendered = await self._render(manifests, overrides, targets, app)
        kept = self._kept.setdefault(key, OrderedDict())
        kept[digest] = rendered
        while len(kept) > KEPT_PER_APPLICATION:
            kept.popitem(last=False)
        return rendered

    def forget(self, key: str) -> None:
        """Drop what is kept for an application (deleted)."""
        self._kept.pop(key, None)
