"""CEL expressions over one object: compiled and type-checked once, evaluated within a
budget.

The runtime is Google's C++ CEL (``cel-expr-python``), the implementation Kubernetes'
own CEL follows, with the optional-field syntax (``self.status.?replicas.orValue(0)``),
the strings extension and ``cel.bind``. An expression sees one variable, ``self`` (the
object), and no function that reads anything else: a rule cannot reach the controller,
the hub or a member.

Bounds of one evaluation: the runtime's iteration budget (:data:`ITERATIONS`, all
comprehensions of the evaluation together), expressions of at most
:data:`api.interpreter.EXPRESSION_MAX` characters, and a result of at most
:data:`RESULT_MAX` bytes as JSON. Time is bounded by those; what an evaluation took (its
thread's processor time) is measured (:attr:`Outcome.seconds`) so the caller can stop
using a rule that is slow on what a member holds.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings

ITERATIONS = 10_000
"""Iterations the runtime allows one evaluation (all its comprehensions together): fixed
by ``cel-expr-python``, checked by a test so an upgrade that changes it is noticed."""
RESULT_MAX = 4096
"""Largest result of one evaluation, as JSON (bytes): what reaches the hub's status."""
LIST_MAX = 256
"""Longest list in an object that expressions read: the runtime builds a comprehension's
result by copying it at each step (a filter over 9,000 items took 2 s on one core, over
1,000 items 37 ms, over 250 under 3 ms), so an object holding a longer list is not
evaluated at all (its health reads Unknown, naming the list), rather than let one object
hold the event loop or get its kind's rules paused for every application."""

Want = Literal["bool", "string", "int", "list", "any"]
_TYPES = {"bool": "BOOL", "string": "STRING", "int": "INT"}


class CompileError(ValueError):
    """An expression that does not parse or type-check: where and why."""

    def __init__(self, expression: str, line: int, column: int, reason: str) -> None:
        self.expression, self.line, self.column, self.reason = expression, line, column, reason
        super().__init__(f"{expression!r}, line {line} column {column}: {reason}")


class EvaluationError(ValueError):
    """An evaluation that failed (a missing field, a wrong type, over the budget)."""


@cache
def _env() -> Any:
    return cel.NewEnv(
        variables={"self": cel.Type.DYN},
        extensions=[
            ext_optional.ExtOptional(),
            ext_strings.ExtStrings(),
            ext_bindings.ExtBindings(),
        ],
    )


_POSITION = re.compile(r"ERROR: <input>:(\d+):(\d+): (.*?)(?:\n|$)")


def _compile_error(expression: str, message: str) -> CompileError:
    found = _POSITION.search(message)
    if found is None:
        return CompileError(expression, 1, 1, message.strip()[:300])
    return CompileError(expression, int(found[1]), int(found[2]), found[3].strip()[:300])


@dataclass(frozen=True)
class Outcome:
    value: Any
    seconds: float


class Bound:
    """One object as expressions read it (made once for all the rules of one object: the
    runtime reads the object lazily through it)."""

    __slots__ = ("activation", "refused")

    def __init__(self, obj: Any) -> None:
        self.refused = _long_list(obj)
        """Why no expression reads this object (a list over :data:`LIST_MAX`), or None."""
        self.activation = _env().Activation(data={"self": obj})


def _long_list(obj: Any) -> str | None:
    """Where ``obj`` holds a list of more than :data:`LIST_MAX` items, if it does (the
    walk keeps no paths: one is found only for an object refused)."""
    stack: list[Any] = [obj]
    push, pop = stack.append, stack.pop
    while stack:
        node = pop()
        if type(node) is dict:
            values: Any = node.values()
        elif type(node) is list:
            if len(node) > LIST_MAX:
                path = _path_to(obj, node)
                return f"{path} holds {len(node):,} items, more than the {LIST_MAX:,} a rule reads"
            values = node
        else:
            continue
        for value in values:
            kind = type(value)
            if kind is dict or kind is list:
                push(value)
    return None


def _path_to(obj: Any, target: Any) -> str:
    """The JSON pointer of ``target`` (by identity) in ``obj``."""
    stack: list[tuple[str, Any]] = [("", obj)]
    while stack:
        path, node = stack.pop()
        if node is target:
            return path or "/"
        if isinstance(node, dict):
            stack.extend((f"{path}/{k}", v) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((f"{path}/{i}", v) for i, v in enumerate(node))
    return "/"


class Program:
    """One compiled expression."""

    __slots__ = ("_program", "result_max", "source", "want")

    def __init__(self, source: str, want: Want, result_max: int = RESULT_MAX) -> None:
        """Compile ``source``; raises :class:`CompileError` when it does not parse or its
        type is not ``want`` (an expression whose type is only known from the object,
        ``dyn``, is checked when it is evaluated). Its results may take ``result_max``
        bytes as JSON."""
        self.source, self.want, self.result_max = source, want, result_max
        try:
            self._program = _env().compile(source)
        except RuntimeError as exc:
            raise _compile_error(source, str(exc)) from None
        got = self._program.return_type()
        if want in _TYPES and got not in (getattr(cel.Type, _TYPES[want]), cel.Type.DYN):
            raise CompileError(source, 1, 1, f"is of type {got.name()}, not {want}")
        if want == "list" and not (got == cel.Type.DYN or got.name().startswith("LIST")):
            raise CompileError(source, 1, 1, f"is of type {got.name()}, not a list")

    def evaluate(self, bound: Bound) -> Outcome:
        """The expression's value over the object ``bound`` holds; raises
        :class:`EvaluationError`."""
        if bound.refused is not None:
            raise EvaluationError(bound.refused)
        # The processor time this thread spent on it: what the rule costs, not the time
        # the process waited for a core on a busy machine (a rule is not slow for that).
        started = time.thread_time()
        try:
            result = self._program.eval(bound.activation)
        except RuntimeError as exc:  # over the iteration budget, or an input CEL cannot hold
            raise EvaluationError(_reason(str(exc))) from None
        finally:
            seconds = time.thread_time() - started
        if result.type().name() == "ERROR":
            raise EvaluationError(_reason(str(result.plain_value())))
        value = result.plain_value()
        _check(value, self.want, self.result_max)
        return Outcome(value, seconds)


def _reason(text: str) -> str:
    # "INTERNAL: Iteration budget exceeded [INTERNAL]" -> "Iteration budget exceeded"
    text = re.sub(r"\s*\[[A-Z_]+\]\s*$", "", text.strip())
    text = re.sub(r"^[A-Z_]+: ", "", text)
    if text.startswith("Iteration budget exceeded"):
        return f"over the budget of {ITERATIONS:,} iterations"
    return text[:300]


def _check(value: Any, want: Want, result_max: int) -> None:
    kinds: dict[str, type | tuple[type, ...]] = {
        "bool": bool,
        "string": str,
        "int": int,
        "list": list,
    }
    wanted = kinds.get(want)
    if wanted is not None and (
        not isinstance(value, wanted) or (want == "int" and isinstance(value, bool))
    ):
        raise EvaluationError(f"gave {type(value).__name__} {_short(value)}, not {want}")
    if isinstance(value, int | float | bool | None):
        return
    if isinstance(value, str) and len(value) <= result_max // 4:  # 4 bytes a character at most
        return
    if len(json.dumps(value, default=str)) > result_max:
        raise EvaluationError(f"gave a result of over {result_max} bytes")


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."
