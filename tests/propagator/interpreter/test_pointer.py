from __future__ import annotations

from typing import Any

from propagator.interpreter.pointer import read_pointer, write_pointer


def test_read_and_write_at_a_pointer() -> None:
    obj: dict[str, Any] = {"spec": {"a/b": {"~x": 1}}}
    assert read_pointer(obj, "/spec/a~1b/~0x") == 1
    assert read_pointer(obj, "") is obj
    assert read_pointer(obj, "/spec/missing/deeper") is None
    assert write_pointer(obj, "/spec/workers/replicas", 3)
    assert obj["spec"]["workers"] == {"replicas": 3}
    obj["spec"]["scalar"] = 5
    assert not write_pointer(obj, "/spec/scalar/replicas", 3)
    assert obj["spec"]["scalar"] == 5
    assert not write_pointer(obj, "", 3)
