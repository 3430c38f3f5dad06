from __future__ import annotations

import pytest

from propagator.interpreter.cel import (
    ITERATIONS,
    LIST_MAX,
    Bound,
    CompileError,
    EvaluationError,
    Program,
)


def test_an_expression_that_does_not_parse_is_refused_with_where_and_why() -> None:
    with pytest.raises(CompileError) as caught:
        Program("self.status.replicas +", "int")
    assert (caught.value.line, caught.value.column) == (1, 23)
    assert "Syntax error" in caught.value.reason
    assert "self.status.replicas +" in str(caught.value)


def test_an_expression_of_the_wrong_type_is_refused_at_compile_time() -> None:
    with pytest.raises(CompileError, match="is of type STRING, not bool"):
        Program("'yes'", "bool")
    with pytest.raises(CompileError, match="no matching overload"):
        Program("1 + 'a'", "any")
    with pytest.raises(CompileError, match="not a list"):
        Program("1", "list")
    Program("self.status.ready", "bool")  # dyn: checked when evaluated


def test_a_rule_sees_only_the_object() -> None:
    with pytest.raises(CompileError, match=r"undeclared reference to 'env\.HOME'"):
        Program("env.HOME", "any")
    with pytest.raises(CompileError, match="undeclared reference"):
        Program("readFile('/etc/passwd')", "any")


def test_optional_fields_strings_and_bind_are_there() -> None:
    obj = {"status": {"phase": "Bound"}, "metadata": {"name": "data-0"}}
    assert Program("self.status.?replicas.orValue(7)", "int").evaluate(Bound(obj)).value == 7
    assert Program("self.metadata.name.split('-')[1]", "string").evaluate(Bound(obj)).value == "0"
    assert (
        Program("cel.bind(s, self.status, s.phase == 'Bound')", "bool").evaluate(Bound(obj)).value
    )


def test_an_evaluation_that_fails_says_why() -> None:
    with pytest.raises(EvaluationError, match="Key not found"):
        Program("self.status.ready", "bool").evaluate(Bound({}))
    with pytest.raises(EvaluationError, match="gave str"):
        Program("self.x", "bool").evaluate(Bound({"x": "true"}))


def test_comprehensions_stop_at_the_iteration_budget() -> None:
    # nested: 200 x 200 is over the budget although each list is small
    square = {"items": list(range(200))}
    with pytest.raises(EvaluationError, match=f"over the budget of {ITERATIONS:,} iterations"):
        Program("self.items.all(x, self.items.all(y, x + y >= 0))", "bool").evaluate(Bound(square))
    # the budget is what the runtime allows, no less: 99 + 99 x 99 iterations fit, 100 +
    # 100 x 100 do not
    nested = "self.items.all(x, self.items.all(y, x + y >= 0))"
    assert Program(nested, "bool").evaluate(Bound({"items": list(range(99))})).value
    with pytest.raises(EvaluationError, match="over the budget"):
        Program(nested, "bool").evaluate(Bound({"items": list(range(100))}))


def test_an_object_holding_a_list_too_long_to_walk_is_not_evaluated() -> None:
    # The runtime copies a comprehension's result at each step: a filter over 9,000 items
    # took seconds. Such an object is refused before the runtime sees it, naming the list.
    big = {"spec": {"volumes": [{"name": str(i)} for i in range(20_000)]}}
    with pytest.raises(
        EvaluationError, match=f"/spec/volumes holds 20,000 items, more than the {LIST_MAX}"
    ):
        Program("self.spec.volumes.filter(v, v.name != '').size() > 0", "bool").evaluate(Bound(big))
    at_most = {"spec": {"volumes": [{"name": str(i)} for i in range(LIST_MAX)]}}
    program = Program("self.spec.volumes.filter(v, v.name != '').size()", "int")
    assert program.evaluate(Bound(at_most)).value == LIST_MAX


def test_a_dependency_list_may_be_larger_than_a_status_value() -> None:
    many = {"names": [f"config-{i:03d}" for i in range(200)]}
    source = "self.names.map(n, {'apiVersion': 'v1', 'kind': 'ConfigMap', 'name': n})"
    with pytest.raises(EvaluationError, match="over 4096 bytes"):
        Program(source, "list").evaluate(Bound(many))
    assert len(Program(source, "list", 256 << 10).evaluate(Bound(many)).value) == 200


def test_a_result_too_large_for_a_status_is_refused() -> None:
    obj = {"big": "x" * 3000}
    with pytest.raises(EvaluationError, match="over 4096 bytes"):
        Program("self.big + self.big", "any").evaluate(Bound(obj))
