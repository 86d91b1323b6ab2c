"""The typed accessors the stream parsers read server JSON with (providers/_fields.py)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from trio_agent.providers._fields import Malformed, count, dumps, obj, objects, show, string
from trio_agent.providers._transport import ProviderFailure


@pytest.mark.parametrize(
    ("value", "expected"),
    [(7, 7), (0, 0), (12.0, 12), ("12", 12), (None, None), (2**53, 2**53)],
)
def test_a_count_is_a_non_negative_integer_however_it_is_written(value: Any, expected: Any) -> None:
    assert count({"n": value}, "n", "usage") == expected


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (True, "true"),
        (-1, "-1"),
        (1.5, "1.5"),
        (math.nan, "NaN"),
        (-math.inf, "-Infinity"),
        ("1e3", '"1e3"'),
        ("٣", '"٣"'),  # a digit, but not an ASCII one
        ("9" * 21, '"999999999999999999999"'),
        ([1], "[1]"),
        (2**53 + 1, "9007199254740993"),  # more than a float holds: a price times it
        (1e300, "1e+300"),
        ("9" * 20, '"99999999999999999999"'),
    ],
)
def test_anything_else_is_malformed_naming_the_field_and_its_value(value: Any, shown: str) -> None:
    with pytest.raises(Malformed) as caught:
        count({"n": value}, "n", "usage")
    assert str(caught.value) == f"usage.n is {shown}, not a token count"
    assert isinstance(caught.value, ProviderFailure)  # it ends a reply wherever it is raised


def test_null_is_absent_and_paths_name_where_the_field_is() -> None:
    assert (obj({"a": None}, "a", ""), string({}, "a", "x")) == (None, None)
    with pytest.raises(Malformed, match=r"^choices\[0\]\.delta is 5, not an object$"):
        obj({"delta": 5}, "delta", "choices[0]")
    with pytest.raises(Malformed, match=r'^parts\[1\] is "x", not an object$'):
        objects({"parts": [{}, "x"]}, "parts", "")


def test_a_value_is_shown_short_however_long_or_deep_it_is() -> None:
    deep: Any = 1
    for _ in range(10_000):  # deeper than json.dumps or repr could go
        deep = {"a": [deep]}
    assert show(deep) == '{"a": [{"a": […]}]}'
    assert show(list(range(100))) == "[0, 1, 2, 3, 4, 5, …]"
    assert show("é" * 1000) == '"' + "é" * 98 + "…"
    assert len(show("x" * 1000, 500)) == 500


def test_a_value_too_deep_to_write_as_json_is_malformed() -> None:
    deep: Any = 1
    for _ in range(5_000):
        deep = {"a": deep}
    with pytest.raises(Malformed, match=r"^args is \{.*\}, not a value shallow enough"):
        dumps(deep, "args")
    assert dumps({"é": [1, 2]}, "args") == '{"é":[1,2]}'
