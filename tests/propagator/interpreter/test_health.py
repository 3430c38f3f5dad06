from __future__ import annotations

from propagator.interpreter.health import worst


def test_worst_wins() -> None:
    assert worst(["Healthy", "Progressing", "Healthy"]) == "Progressing"
    assert worst(["Healthy", "Degraded", "Progressing"]) == "Degraded"
    assert worst(["Healthy", "Unknown"]) == "Unknown"
    assert worst([]) == "Healthy"
