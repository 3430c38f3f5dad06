"""What an HTTP/2 server may make our client do, bounded: the limits
:class:`kube.http2state.ClientState` and :class:`kube.http2conn.Http2Connection` enforce
against a broken or hostile API server, and the allowance for frames that carry nothing.

Each limit answers one class of attack on HTTP/2 peers, as mature stacks bound them:

- frames that cost us work but carry nothing (PINGs we must answer, SETTINGS, empty or
  tiny DATA frames, empty header fragments, PRIORITY, unknown types, resets and window
  updates for streams that are gone: CVE-2019-9512, -9515, -9516, -9518, and the
  client's side of CVE-2023-44487) draw on an :class:`Allowance` that useful bytes and
  time refill; a server past it gets GOAWAY ENHANCE_YOUR_CALM, as nghttp2's and h2o's
  glitch limits do;
- a header block takes at most :data:`MAX_CONTINUATIONS` CONTINUATION frames and the
  header list size we advertise (CVE-2024-27316 and its siblings; nghttp2 allows 8);
- a server that does not read what we send (acknowledgements among it) is not read from
  until it does (nghttp2's and Go's queued control frame limits close such a connection;
  here the socket's write buffer is the queue, and it stops growing);
- one connection's frames are handled for at most :data:`RECEIVE_SLICE_S` at a time; the
  rest waits for the event loop's next round, so no member holds the loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable

MAX_CONTINUATIONS = 8
"""CONTINUATION frames after one HEADERS at most (nghttp2's default)."""
UNUSEFUL_BURST = 1000
"""Frames that carry nothing a server may send at once (nghttp2's reset rate limit burst)."""
UNUSEFUL_PER_S = 100.0
"""And per second after that."""
USEFUL_BYTES_PER_FRAME = 1024
"""Body bytes (either way) that earn one more such frame: a server busy with real work
sends window updates and the odd empty frame in proportion to it."""
SMALL_DATA = 16
"""A DATA frame with fewer body bytes than this (not ending its stream) right after
another such frame of its stream counts as one that carries nothing: a body sent a byte a
frame costs a frame's work per byte (an API server writes a watch event, a hundred bytes
or more, as one frame; a small answer's body may come in a frame of its own before the
one that ends it)."""
RECEIVE_SLICE_S = 0.002
"""How long one connection's frames are handled in one go before the event loop's other
work gets its turn."""


class Allowance:
    """A token bucket for frames that carry nothing: ``burst`` at most, refilled at
    ``per_s`` a second and one per ``bytes_per_token`` useful bytes."""

    __slots__ = ("_burst", "_bytes", "_clock", "_per_byte", "_per_s", "_tokens", "_when")

    def __init__(
        self,
        burst: int = UNUSEFUL_BURST,
        per_s: float = UNUSEFUL_PER_S,
        bytes_per_token: int = USEFUL_BYTES_PER_FRAME,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._burst = float(burst)
        self._per_s = per_s
        self._per_byte = 1.0 / bytes_per_token
        self._clock = clock
        self._tokens = float(burst)
        self._when = clock()
        self._bytes = 0

    def earn(self, useful_bytes: int) -> None:
        """``useful_bytes`` of body went through (counted when a frame is next spent)."""
        self._bytes += useful_bytes

    def spend(self) -> bool:
        """Take one frame's token; False when none is left (the peer is over its limit)."""
        now = self._clock()
        tokens = self._tokens + (now - self._when) * self._per_s + self._bytes * self._per_byte
        self._when, self._bytes = now, 0
        self._tokens = min(tokens, self._burst) - 1.0
        return self._tokens >= 0.0
