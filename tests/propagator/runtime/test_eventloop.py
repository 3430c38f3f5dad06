"""propagator.runtime.eventloop: the controller's event loop, uvloop or asyncio's own."""

from __future__ import annotations

import asyncio
import importlib.util

import pytest
import uvloop

from propagator.cli.main import main
from propagator.runtime import eventloop


async def _loop_type() -> type:
    return type(asyncio.get_running_loop())


def test_the_controller_runs_on_uvloop_by_default_and_on_asyncio_when_asked() -> None:
    assert eventloop.run(_loop_type) is uvloop.Loop
    assert eventloop.run(_loop_type, event_loop="asyncio") is not uvloop.Loop
    assert issubclass(eventloop.run(_loop_type, event_loop="asyncio"), asyncio.BaseEventLoop)


def _without_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "uvloop" else real(name, *a)
    )


def test_uvloop_missing_is_a_clear_error_that_names_the_way_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _without_uvloop(monkeypatch)
    with pytest.raises(eventloop.EventLoopUnavailable, match=r"pip install uvloop.*'asyncio'"):
        eventloop.run(_loop_type)
    assert eventloop.run(_loop_type, event_loop="asyncio") is not uvloop.Loop


def test_propagator_run_refuses_an_unknown_event_loop_naming_the_setting(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", "--event-loop", "trio"]) == 2
    err = capsys.readouterr().err
    assert "PROPAGATOR_EVENT_LOOP / --event-loop = 'trio'" in err
    assert "'uvloop' or 'asyncio'" in err


def test_propagator_run_without_uvloop_says_what_to_do_before_anything_starts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _without_uvloop(monkeypatch)
    assert main(["run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("propagator run: PROPAGATOR_EVENT_LOOP / --event-loop: ")
    assert "pip install uvloop" in err
