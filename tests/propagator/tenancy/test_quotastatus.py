"""The TenantQuota status from the use the members report (pure)."""

from __future__ import annotations

from decimal import Decimal

from propagator.tenancy.memberquota import Usage
from propagator.tenancy.quotastatus import tenant_status

D = Decimal


def test_limits_and_use_per_cluster_and_exceeded() -> None:
    quota = {"metadata": {"name": "team", "generation": 3}}
    usage = {
        "m1": Usage({"pods": D(6), "memory": D(2 * 1024**3)}, {"pods": D(2), "memory": D(1024**3)}),
        "m2": Usage({"pods": D(6)}, {"pods": D(7), "cpu": D("0.5")}),
    }
    status = tenant_status(quota, usage, "2026-12-01T00:00:00Z")
    assert status["observedGeneration"] == 3
    assert status["clusters"] == [
        {
            "name": "m1",
            "hard": {"memory": "2Gi", "pods": "6"},
            "used": {"memory": "1Gi", "pods": "2"},
        },
        {"name": "m2", "hard": {"pods": "6"}, "used": {"pods": "7"}},  # unlimited cpu not shown
    ]
    [exceeded] = status["conditions"]
    assert (exceeded["type"], exceeded["status"], exceeded["reason"]) == (
        "Exceeded",
        "True",
        "Exceeded",
    )
    assert exceeded["message"] == "over the limit on m2: pods"
    assert status["busiest"] == "memory 1Gi/2Gi on m1, pods 7/6 on m2"


def test_what_is_planned_and_not_running_yet_counts_as_used() -> None:
    from propagator.tenancy.quotastatus import with_planned

    usage = {"m1": Usage({"cpu": D(2), "pods": D(6)}, {"cpu": D("0.5"), "pods": D(4)})}
    planned = {"m1": {"cpu": D("1.5"), "pods": D(2)}, "m2": {"cpu": D(9)}}
    merged = with_planned(usage, planned)
    assert merged == {"m1": Usage({"cpu": D(2), "pods": D(6)}, {"cpu": D("1.5"), "pods": D(4)})}
