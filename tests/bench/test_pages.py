"""docs/benchmarks.md is what ``python -m bench.pages`` writes from the benches'
descriptions and their recorded runs (``--record``): a description or a recorded run
changed without writing the page again fails here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import pages, report


def test_the_benchmarks_page_is_generated_from_the_benches_and_their_runs() -> None:
    assert pages.PAGE.read_text() == pages.render(), "run: python -m bench.pages"


def test_a_recorded_run_is_on_the_page_with_its_command_machine_and_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(report, "RESULTS", tmp_path)
    monkeypatch.setattr(report, "_recording", None)
    monkeypatch.setattr("atexit.register", lambda fn: None)  # written below, not at exit
    report._start_recording("bench.scheduler", ["--quick"])
    columns = [("clusters", "clusters"), ("p99_ms", "p99 ms")]
    report.emit([{"clusters": 10, "p99_ms": 0.25}], columns, False)
    report._write_recording()
    (written,) = tmp_path.glob("*.json")
    assert written.name == "scheduler-quick.json"
    run = json.loads(written.read_text())
    assert run["command"] == "python -m bench.scheduler --quick"
    assert "cores" in run["machine"]
    monkeypatch.setattr(pages, "RESULTS", tmp_path)
    page = pages.render()
    section = page[page.index("## scheduler") : page.index("## fanout")]
    assert "`python -m bench.scheduler --quick` (a `--quick` run): commit" in section
    assert run["machine"] in section
    assert "| clusters | p99 ms |" in section
    assert "| 10 | 0.250 |" in section
    assert "No recorded run yet: `python -m bench.calls --record`." in page
