"""Process handling of fleet.local: whole process groups stop, recycled pids are not ours."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from fleet.local import process
from fleet.local.process import ProcessRecord


def _pids_in_group(pgid: int) -> list[int]:
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            pids.append(int(stat.parent.name))
    return pids


def test_stop_kills_the_whole_process_group(tmp_path: Path) -> None:
    # The shell leaves a grandchild behind; stopping must take it too.
    record = process.start(
        ProcessRecord(
            name="sleeper",
            argv=["bash", "-c", "sleep 300 & echo started; wait"],
            log=tmp_path / "sleeper.log",
        )
    )
    assert record.pid is not None
    while "started" not in record.log.read_text():
        time.sleep(0.01)
    assert process.is_running(record)
    assert len(_pids_in_group(record.pid)) == 2
    process.stop(record)
    assert not process.is_running(record)
    assert _pids_in_group(record.pid) == []


def test_a_recycled_pid_is_not_the_component(tmp_path: Path) -> None:
    record = process.start(ProcessRecord(name="s", argv=["sleep", "300"], log=tmp_path / "s.log"))
    assert record.started_at is not None
    other = record.model_copy(update={"started_at": record.started_at - 1})
    assert process.is_running(record)
    assert not process.is_running(other)
    process.stop(other)  # must not touch a process that is not ours
    assert process.is_running(record)
    process.stop(record)


def test_exited_component_reports_its_log_tail(tmp_path: Path) -> None:
    record = process.start(
        ProcessRecord(
            name="bad",
            argv=["bash", "-c", "echo 'flag --nope: unknown' >&2; exit 3"],
            log=tmp_path / "bad.log",
        )
    )
    while process.is_running(record):
        time.sleep(0.01)
    assert "flag --nope: unknown" in process.log_tail(record)
    assert process.rss_bytes(record) == 0


def test_stop_returns_only_once_a_killed_component_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A component that ignores SIGTERM is killed after the grace period; stop() must not
    # return while it is still there (a restart would find it holding its port).
    monkeypatch.setattr(process, "_STOP_GRACE_S", 0.2)
    record = process.start(
        ProcessRecord(
            name="stubborn",
            argv=["bash", "-c", "trap '' TERM; while true; do sleep 0.05; done"],
            log=tmp_path / "stubborn.log",
        )
    )
    time.sleep(0.2)  # let bash install its trap
    process.stop(record)
    assert not process.is_running(record)


def test_cpu_seconds_is_what_the_component_used_and_nothing_once_it_stopped(
    tmp_path: Path,
) -> None:
    # The benchmarks split a run's CPU by component with it.
    burn = (
        "import time\n"
        "start = time.process_time()\n"
        "while time.process_time() - start < 0.3: pass\n"
        "print('burnt', flush=True)\n"
        "time.sleep(60)\n"
    )
    record = process.start(
        ProcessRecord(name="burner", argv=[sys.executable, "-c", burn], log=tmp_path / "b.log")
    )
    try:
        while "burnt" not in record.log.read_text():
            assert process.is_running(record), process.log_tail(record)
            time.sleep(0.01)
        # /proc counts in clock ticks, the burner in exact time: a tick of slack.
        assert 0.28 <= process.cpu_seconds(record) < 5
        assert process.cpu_seconds_of(record.pid or 0) == process.cpu_seconds(record)
    finally:
        process.stop(record)
    assert process.cpu_seconds(record) == 0.0
    assert process.cpu_seconds_of(2**22 + 1) == 0.0  # above any pid Linux hands out
