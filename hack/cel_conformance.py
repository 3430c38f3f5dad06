"""Runs CEL's own conformance tests (cel-spec's tests/simple/testdata/*.textproto) against
the Python CEL runtimes that were candidates for the interpreter rules, and prints how
many each gets right, per file (docs/decisions/0002-cel-runtime.md).

Not part of the project's tests: the losing candidates are not dependencies. Run it in a
throwaway environment that has them:

    python -m venv /tmp/cel && /tmp/cel/bin/pip install cel-expr-python \\
        common-expression-language cel-python
    /tmp/cel/bin/python hack/cel_conformance.py PATH/TO/cel-spec/tests/simple/testdata

A test is run when it needs nothing but the expression: no declared variables or
bindings, no protobuf messages, no container; its expected value is a plain one (null,
bool, int, uint, double, string, bytes, list, map) or an error. A runtime passes a test
when it gives that value (an error where one is expected; a uint and an int of the same
number count as equal, the Python runtimes have one int type).
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

FILES = (
    "basic",
    "comparisons",
    "conversions",
    "integer_math",
    "fp_math",
    "lists",
    "logic",
    "macros",
    "macros2",
    "optionals",
    "parse",
    "plumbing",
    "string",
    "string_ext",
    "timestamps",
    "bindings_ext",
)

# -- a reader for the text format of the test files --------------------------------------

_TOKEN = re.compile(
    r"""\s+|\#[^\n]*|(?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')|(?P<punct>[{}\[\]:,<>;])"""
    r"""|(?P<word>[-+]?[A-Za-z0-9_.+/-]+)""",
    re.S,
)


def _tokens(text: str) -> Iterator[tuple[str, str]]:
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"cannot read at {text[pos : pos + 30]!r}")
        pos = m.end()
        for kind in ("str", "punct", "word"):
            if m.group(kind) is not None:
                yield kind, m.group(kind)


def _unquote(token: str) -> bytes:
    body, out, i = token[1:-1], bytearray(), 0
    simple = {"n": 10, "t": 9, "r": 13, "a": 7, "b": 8, "f": 12, "v": 11}
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode()
            i += 1
            continue
        n = body[i + 1]
        if n in simple:
            out.append(simple[n])
            i += 2
        elif n in "01234567":
            j = i + 1
            while j < len(body) and j < i + 4 and body[j] in "01234567":
                j += 1
            out.append(int(body[i + 1 : j], 8))
            i = j
        elif n == "x":
            out.append(int(body[i + 2 : i + 4], 16))
            i += 4
        elif n in "uU":
            width = 4 if n == "u" else 8
            out += chr(int(body[i + 2 : i + 2 + width], 16)).encode()
            i += 2 + width
        else:
            out += n.encode()
            i += 2
    return bytes(out)


def _message(tokens: list[tuple[str, str]], pos: int, end: str) -> tuple[dict[str, Any], int]:
    out: dict[str, Any] = {}
    while tokens[pos][1] != end:
        name = tokens[pos][1]
        pos += 1
        if tokens[pos][1] == ":":
            pos += 1
        kind, value = tokens[pos]
        if value in ("{", "<"):
            item, pos = _message(tokens, pos + 1, "}" if value == "{" else ">")
        elif kind == "str":
            data = _unquote(value)
            while tokens[pos + 1][0] == "str":  # adjacent strings join
                pos += 1
                data += _unquote(tokens[pos][1])
            item = data
        else:
            item = value
        out.setdefault(name, []).append(item)
        pos += 1
        if pos < len(tokens) and tokens[pos][1] in (",", ";"):
            pos += 1
    return out, pos


def read(path: Path) -> dict[str, Any]:
    tokens = [*_tokens(path.read_text()), ("punct", "EOF")]
    return _message(tokens, 0, "EOF")[0]


# -- expected values ------------------------------------------------------------------------


class Unsupported(Exception):
    """A test this runner does not run."""


def _first(msg: dict[str, Any], key: str) -> Any:
    return msg[key][0]


def expected(value: dict[str, Any]) -> Any:
    if "null_value" in value:
        return None
    if "bool_value" in value:
        return _first(value, "bool_value") == "true"
    for key in ("int64_value", "uint64_value"):
        if key in value:
            return int(_first(value, key))
    if "double_value" in value:
        text = str(_first(value, "double_value")).lower()
        return float({"inf": "inf", "-inf": "-inf", "nan": "nan"}.get(text, text))
    if "string_value" in value:
        return _first(value, "string_value").decode()
    if "bytes_value" in value:
        return bytes(_first(value, "bytes_value"))
    if "list_value" in value:
        return [expected(v) for v in _first(value, "list_value").get("values", [])]
    if "map_value" in value:
        entries = _first(value, "map_value").get("entries", [])
        return {
            _hashable(expected(_first(e, "key"))): expected(_first(e, "value")) for e in entries
        }
    raise Unsupported(f"value {sorted(value)}")


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        raise Unsupported("list key")
    return value


def same(got: Any, want: Any) -> bool:
    if isinstance(want, bool) or isinstance(got, bool):
        return type(got) is bool and type(want) is bool and got == want
    if isinstance(want, float):
        if not isinstance(got, int | float):
            return False
        return (math.isnan(want) and math.isnan(got)) or got == want
    if isinstance(want, int):
        return isinstance(got, int) and not isinstance(got, float) and got == want
    if isinstance(want, list):
        return (
            isinstance(got, list | tuple)
            and len(got) == len(want)
            and all(same(g, w) for g, w in zip(got, want, strict=True))
        )
    if isinstance(want, dict):
        if not isinstance(got, dict) or len(got) != len(want):
            return False
        return all(
            any(same(gk, k) and same(gv, v) for gk, gv in got.items()) for k, v in want.items()
        )
    if isinstance(want, bytes):
        return isinstance(got, bytes | bytearray) and bytes(got) == want
    return type(got) is type(want) and got == want


# -- the runtimes ---------------------------------------------------------------------------

Run = Callable[[str, bool], Any]
"""Evaluate an expression (type-checked first when the second argument is true, as a
runtime with a checker does unless the test says ``disable_check``); raise on any error
(a compile error or an evaluation error)."""


def _cel_expr_python() -> Run:
    from cel_expr_python import cel  # type: ignore[import-not-found]
    from cel_expr_python.ext import (  # type: ignore[import-not-found]
        ext_bindings,
        ext_math,
        ext_optional,
        ext_strings,
    )

    env = cel.NewEnv(
        extensions=[
            ext_optional.ExtOptional(),
            ext_strings.ExtStrings(),
            ext_bindings.ExtBindings(),
            ext_math.ExtMath(),
        ]
    )

    def run(expr: str, check: bool) -> Any:
        result = env.compile(expr, disable_check=not check).eval()
        if result.type().name() == "ERROR":
            raise ValueError(result.plain_value())
        return result.plain_value()

    return run


def _common_expression_language() -> Run:
    import cel  # type: ignore[import-not-found]

    return lambda expr, _check: cel.evaluate(expr, {})


def _cel_python() -> Run:
    import celpy  # type: ignore[import-not-found]

    env = celpy.Environment()

    def run(expr: str, _check: bool) -> Any:
        result = env.program(env.compile(expr)).evaluate({})
        if isinstance(result, Exception):
            raise result
        return _plain(result)

    return run


def _plain(value: Any) -> Any:
    """celpy's types as plain Python values."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, bytes):
        return bytes(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    return value


RUNTIMES = {
    "cel-expr-python": _cel_expr_python,
    "common-expression-language": _common_expression_language,
    "cel-python": _cel_python,
}

# -- running --------------------------------------------------------------------------------


def tests_of(path: Path) -> Iterator[tuple[str, str, bool, Any]]:
    """(name, expression, whether it is type-checked, expected value or the Exception
    class for an error)."""
    for section in read(path).get("section", []):
        for test in section.get("test", []):
            skip = {"type_env", "bindings", "container", "disable_macros", "check_only"}
            if skip & set(test) or "typed_result" in test:
                continue
            expr = _first(test, "expr").decode()
            if "TestAllTypes" in expr or "google.protobuf" in expr or "cel.expr" in expr:
                continue
            name = _first(test, "name").decode()
            check = _first(test, "disable_check") != "true" if "disable_check" in test else True
            if "eval_error" in test:
                yield name, expr, check, Exception
                continue
            try:
                want = expected(_first(test, "value")) if "value" in test else True
            except Unsupported:
                continue
            yield name, expr, check, want


def passes(run: Run, expr: str, check: bool, want: Any) -> bool:
    try:
        got = run(expr, check)
    except Exception:
        return want is Exception
    return want is not Exception and same(got, want)


def main() -> None:
    testdata = Path(sys.argv[1])
    runtimes: dict[str, Run] = {}
    for name, make in RUNTIMES.items():
        try:
            runtimes[name] = make()
        except ImportError as exc:
            print(f"{name}: not installed ({exc})", file=sys.stderr)
    totals = dict.fromkeys(runtimes, 0)
    count = 0
    print(f"{'file':<14} {'tests':>6} " + " ".join(f"{n:>26}" for n in runtimes))
    for file in FILES:
        path = testdata / f"{file}.textproto"
        if not path.exists():
            continue
        cases = list(tests_of(path))
        if not cases:
            continue
        count += len(cases)
        row = []
        for name, run in runtimes.items():
            ok = sum(passes(run, expr, check, want) for _, expr, check, want in cases)
            totals[name] += ok
            row.append(f"{ok:>26}")
        print(f"{file:<14} {len(cases):>6} " + " ".join(row))
    print(f"{'all':<14} {count:>6} " + " ".join(f"{totals[n]:>26}" for n in runtimes))
    for name in runtimes:
        print(f"{name}: {totals[name]}/{count} = {100 * totals[name] / max(count, 1):.1f} %")


if __name__ == "__main__":
    main()
