"""propagator.runtime.eventloop: the controller's event loop, uvloop or asyncio's own."""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
import sys

import pytest
import uvloop

from propagator.runtime import eventloop


async def _loop_type() -> type:
    return type(asyncio.get_running_loop())


def test_the_controller_runs_on_uvloop_by_default_and_on_asyncio_when_asked() -> None:
    assert eventloop.run(_loop_type) is uvloop.Loop
    assert eventloop.run(_loop_type, event_loop="asyncio") is not uvloop.Loop
    assert issubclass(eventloop.run(_loop_type, event_loop="asyncio"), asyncio.BaseEventLoop)


def test_uvloop_missing_is_a_clear_error_that_names_the_way_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "uvloop" else real(name, *a)
    )
    with pytest.raises(eventloop.EventLoopUnavailable, match=r"pip install uvloop.*'asyncio'"):
        eventloop.run(_loop_type)
    assert eventloop.run(_loop_type, event_loop="asyncio") is not uvloop.Loop


def test_propagator_run_refuses_an_unknown_event_loop_naming_the_setting() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "propagator.cli.main", "run"],
        env={"PROPAGATOR_EVENT_LOOP": "trio", "PATH": ""},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "PROPAGATOR_EVENT_LOOP / --event-loop = 'trio'" in done.stderr
    assert "'uvloop' or 'asyncio'" in done.stderr
