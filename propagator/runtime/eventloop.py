"""The event loop the controller runs on: uvloop (libuv; its transports and TLS in C) or
asyncio's own.

uvloop is the default: with many members at rest the controller uses less CPU on it than
on asyncio's loop, and less memory (asyncio's TLS keeps a 256 KiB read buffer per
connection); the runs are in docs/benchmarks.md.
Everything of ours runs on either: anyio's asyncio backend drives both.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Awaitable, Callable
from typing import Literal, TypeVar, TypeVarTuple

import anyio

EventLoop = Literal["uvloop", "asyncio"]
DEFAULT: EventLoop = "uvloop"

T = TypeVar("T")
Ts = TypeVarTuple("Ts")


class EventLoopUnavailable(RuntimeError):
    """The event loop asked for is not installed here."""


def check(event_loop: EventLoop) -> None:
    """EventLoopUnavailable, saying what to do, when ``event_loop`` cannot run here."""
    if event_loop == "uvloop" and importlib.util.find_spec("uvloop") is None:
        raise EventLoopUnavailable(
            "event loop 'uvloop' is not installed here (pip install uvloop; it has no "
            "Windows build), or choose 'asyncio'"
        )


def run(
    func: Callable[[*Ts], Awaitable[T]],
    *args: *Ts,
    event_loop: EventLoop = DEFAULT,
) -> T:
    """``anyio.run(func, *args)`` on ``event_loop`` (EventLoopUnavailable if it is not
    installed)."""
    check(event_loop)
    return anyio.run(func, *args, backend_options={"use_uvloop": event_loop == "uvloop"})
