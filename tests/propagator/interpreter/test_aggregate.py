from __future__ import annotations

from propagator.interpreter.aggregate import combine, combine_objects


def test_values_combine_by_their_aggregation() -> None:
    assert combine([1, 2, 3.5], "Sum") == 6.5
    assert combine([3, 1, 2], "Min") == 1
    assert combine([3, 1, 2], "Max") == 3
    assert combine([True, False], "All") is False
    assert combine([True, False], "Any") is True
    # values of another type (a hostile member's) are left out; none left: no value
    assert combine([1, "7", True, None], "Sum") == 1
    assert combine(["a"], "Max") is None
    assert combine([1, 2], "None") is None


def test_objects_combine_across_clusters() -> None:
    key = ("example.com/v1", "Widget", "shop", "w")
    combined = combine_objects(
        [
            (key, {"ready": 2, "phase": "Up", "ok": True}, {"ready": "Sum", "ok": "All"}),
            (key, {"ready": 3, "ok": False}, {"ready": "Sum", "ok": "All"}),
            (("v1", "Service", "shop", "s"), {"ip": "x"}, {}),  # nothing aggregated
        ]
    )
    assert combined == [
        {
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "name": "w",
            "namespace": "shop",
            "fields": {"ready": 5, "ok": False},
            "clusters": 2,
        }
    ]
