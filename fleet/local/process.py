"""Processes of the local control planes: each in its own process group, logging to a file.

Processes outlive the command that started them (``propagator local up`` returns while the
clusters keep running), so everything needed to find and stop them again is plain data that
the fleet's state file keeps.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections import deque
from pathlib import Path

from pydantic import BaseModel

_STOP_GRACE_S = 10.0


class ProcessRecord(BaseModel):
    """How one component was started, and the process that runs it."""

    name: str
    argv: list[str]
    log: Path
    pid: int | None = None
    started_at: int | None = None
    """Start time of the process in clock ticks since boot: with the pid, its identity."""
    log_offset: int = 0
    """Size of the log when this run started: what it wrote comes after."""


def start(record: ProcessRecord) -> ProcessRecord:
    """Start the component in a new session (own process group), appending to its log."""
    record.log.parent.mkdir(parents=True, exist_ok=True)
    offset = record.log.stat().st_size if record.log.exists() else 0
    with record.log.open("ab") as log:
        proc = subprocess.Popen(
            record.argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return record.model_copy(
        update={"pid": proc.pid, "started_at": _stat(proc.pid)[1], "log_offset": offset}
    )


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (None: no such process)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _stat(pid: int) -> tuple[str, int | None]:
    """State letter and start time of a process; ("", None) when there is none."""
    fields = _stat_fields(pid)
    return ("", None) if fields is None else (fields[0], int(fields[19]))


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def is_running(record: ProcessRecord) -> bool:
    """True while the recorded process runs and is still this component (not a recycled pid)."""
    if record.pid is None:
        return False
    _reap(record.pid)
    state, started_at = _stat(record.pid)
    return state not in ("", "Z", "X") and started_at == record.started_at


def stop(record: ProcessRecord) -> None:
    """Stop the component's whole process group: SIGTERM, then SIGKILL after a grace period."""
    if not is_running(record):
        return
    assert record.pid is not None
    pgid = os.getpgid(record.pid)
    os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + _STOP_GRACE_S
    while is_running(record) and time.monotonic() < deadline:
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    # A killed process takes a moment to go: return only once it has, so that a restart
    # right after this does not find it still holding its port (or skip the start).
    deadline = time.monotonic() + _STOP_GRACE_S
    while is_running(record) and time.monotonic() < deadline:
        time.sleep(0.01)


def rss_bytes(record: ProcessRecord) -> int:
    """Resident memory of the running component, 0 when it is not running."""
    return rss_bytes_of(record.pid or 0) if is_running(record) else 0


def rss_bytes_of(pid: int) -> int:
    """Resident memory of process ``pid``; 0 when there is no such process."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def cpu_seconds(record: ProcessRecord) -> float:
    """CPU time (user + system) the running component has used, 0 when it is not running."""
    if not is_running(record):
        return 0.0
    return cpu_seconds_of(record.pid or 0)


def cpu_seconds_of(pid: int) -> float:
    """CPU time (user + system) process ``pid`` has used; 0 when there is no such process."""
    fields = _stat_fields(pid)
    return 0.0 if fields is None else (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def log_tail(record: ProcessRecord, lines: int = 20) -> str:
    """What the component's current run logged, for error messages: its first error lines
    (klog "E" or "F" lines, "error" fields) and then its last lines."""
    try:
        with record.log.open("rb") as f:
            f.seek(record.log_offset)
            text = f.read().decode(errors="replace")
    except OSError:
        return "(no log)"
    all_lines = text.splitlines(keepends=True)
    errors = [
        line
        for line in all_lines
        if line[:1] in ("E", "F") or '"level":"error"' in line or '"level":"fatal"' in line
    ][:5]
    tail = list(deque(all_lines, maxlen=lines))
    head = [line for line in errors if line not in tail]
    return "".join(head + (["...\n"] if head else []) + tail)
