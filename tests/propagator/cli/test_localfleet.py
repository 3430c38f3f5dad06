"""Bad input to ``propagator local`` fails before anything starts, naming flag and value."""

from __future__ import annotations

from pathlib import Path

import pytest

from propagator.cli.main import main


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--members", "-1"], "--members=-1: Input should be greater than or equal to 0"),
        (["--members", "50"], "--members=50: Input should be less than or equal to 20"),
        (["--nodes-per-cluster", "0"], "--nodes-per-cluster=0"),
        (["--node-memory", "32GB"], "--node-memory: '32GB' is not a quantity: unexpected 'B'"),
        (["--node-cpu", "0"], "--node-cpu='0': must be greater than zero"),
        (["--timeout", "0"], "--timeout=0.0"),
    ],
)
def test_up_rejects_bad_flags(
    argv: list[str], expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["local", "up", "--state-dir", str(tmp_path / "s"), *argv])
    assert code == 1
    assert expected in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def test_down_without_a_fleet_says_where_it_looked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["local", "down", "--state-dir", str(tmp_path)]) == 1
    assert f"no local fleet in {tmp_path}" in capsys.readouterr().err


def test_help_lists_the_local_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["local", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for action in ("up", "down", "status"):
        assert action in out
