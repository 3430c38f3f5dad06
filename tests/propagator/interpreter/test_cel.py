from __future__ import annotations

import pytest

from propagator.interpreter.cel import ITERATIONS, Bound, CompileError, EvaluationError, Program


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


def test_comprehensions_over_a_huge_list_stop_at_the_iteration_budget() -> None:
    big = {"items": list(range(ITERATIONS * 2))}
    with pytest.raises(EvaluationError, match=f"over the budget of {ITERATIONS:,} iterations"):
        Program("self.items.all(x, x >= 0)", "bool").evaluate(Bound(big))
    # nested: 200 x 200 is over the budget although each list is small
    square = {"items": list(range(200))}
    with pytest.raises(EvaluationError, match="over the budget"):
        Program("self.items.all(x, self.items.all(y, x + y >= 0))", "bool").evaluate(Bound(square))
    # the budget is what the runtime allows, no less
    within = {"items": list(range(ITERATIONS - 1))}
    assert Program("self.items.all(x, x >= 0)", "bool").evaluate(Bound(within)).value


def test_a_result_too_large_for_a_status_is_refused() -> None:
    obj = {"big": "x" * 3000}
    with pytest.raises(EvaluationError, match="over 4096 bytes"):
        Program("self.big + self.big", "any").evaluate(Bound(obj))
