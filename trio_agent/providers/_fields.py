"""Typed reads of the JSON a server streams, shared by the four stream parsers.

A server may send anything: a list where a token count belongs, a number
where a text delta belongs, a string where an object belongs. A parser that
trusted the documented types would fail with a ``TypeError`` from deep
inside it, and the reply would end as an exception instead of a message.
So the parsers read every field through these accessors: each returns the
field's value when it has the type the API documents, and otherwise raises
:class:`Malformed`, whose message names the field and shows its value
(``usage.prompt_tokens is [1], not a token count``); the parser adds which
event and which provider, and the reply ends as an error that says so.

The rules, the same for every API:

* ``null`` is an absent field: servers send explicit nulls for what they
  leave out (``"content": null``, ``"usage": null``);
* a token count is a non-negative integer up to 2**53; an integral float (``12.0``) and
  a string of decimal digits (``"12"``, proto3 JSON's form of a 64-bit
  integer) are read as that integer;
* any other value of another type is :class:`Malformed`.

An accessor takes the object, the key, and the object's path in the event
(``"choices[0].delta"``), which only an error message reads: a field of the
right type costs a dict lookup and a type check.
"""

from __future__ import annotations

import json
from typing import Any

from ._transport import ProviderFailure

__all__ = [
    "Malformed",
    "count",
    "dumps",
    "flag",
    "integer",
    "obj",
    "objects",
    "path",
    "show",
    "string",
]


class Malformed(ProviderFailure):
    """A field of an event whose value has a type its API does not give it.

    A :class:`ProviderFailure`, so that it ends the reply as an error wherever
    it is raised; a parser catches it to say which event of which provider.
    """

    def __init__(self, where: str, value: Any, expected: str) -> None:
        super().__init__(f"{where} is {show(value)}, not {expected}")


def path(where: str, key: str | int) -> str:
    """The path of ``key`` in the object at ``where`` (``"choices[0]"``, ``"delta.content"``)."""
    if isinstance(key, int):
        return f"{where}[{key}]"
    return f"{where}.{key}" if where else key


def obj(parent: dict[str, Any], key: str, where: str) -> dict[str, Any] | None:
    """``parent[key]``, an object, or None if absent."""
    value = parent.get(key)
    if type(value) is dict or value is None:
        return value
    raise Malformed(path(where, key), value, "an object")


def objects(parent: dict[str, Any], key: str, where: str) -> list[dict[str, Any]]:
    """``parent[key]``, an array of objects (empty if absent)."""
    value = parent.get(key)
    if value is None:
        return []
    if type(value) is not list:
        raise Malformed(path(where, key), value, "an array")
    for index, item in enumerate(value):
        if type(item) is not dict:
            raise Malformed(path(path(where, key), index), item, "an object")
    return value


def string(parent: dict[str, Any], key: str, where: str) -> str | None:
    """``parent[key]``, a string, or None if absent."""
    value = parent.get(key)
    if type(value) is str or value is None:
        return value
    raise Malformed(path(where, key), value, "a string")


def flag(parent: dict[str, Any], key: str, where: str) -> bool | None:
    """``parent[key]``, a boolean, or None if absent."""
    value = parent.get(key)
    if type(value) is bool or value is None:
        return value
    raise Malformed(path(where, key), value, "true or false")


def integer(parent: dict[str, Any], key: str, where: str) -> int | None:
    """``parent[key]``, an integer (an index), or None if absent."""
    value = parent.get(key)
    if type(value) is int or value is None:
        return value
    raise Malformed(path(where, key), value, "an integer")


MAX_COUNT = 2**53
"""The largest token count read (a float holds every integer up to it): a count is
multiplied by a price, and an integer of 400 digits cannot become a float."""


def count(parent: dict[str, Any], key: str, where: str) -> int | None:
    """``parent[key]``, a token count, or None if absent (see the module's rules)."""
    value = parent.get(key)
    if type(value) is int:
        if 0 <= value <= MAX_COUNT:
            return value
    elif value is None:
        return None
    elif type(value) is float:
        if 0 <= value <= MAX_COUNT and value.is_integer():
            return int(value)
    elif (
        type(value) is str
        and 0 < len(value) <= 20
        and value.isascii()
        and value.isdigit()
        and int(value) <= MAX_COUNT
    ):
        return int(value)
    raise Malformed(path(where, key), value, "a token count")


def dumps(value: Any, where: str) -> str:
    """``value`` as compact JSON (a tool call's arguments, a reasoning item to replay).

    Nesting is bounded by the JSON parser (jiter refuses more than about 200
    levels), but the encoder recurses in C against the interpreter's
    recursion limit: an application that lowered it, or that streams from
    deep in a stack, would see a ``RecursionError`` here. It is
    :class:`Malformed` instead.
    """
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except RecursionError:
        raise Malformed(where, value, "a value shallow enough to write as JSON") from None


def show(value: Any, limit: int = 100) -> str:
    """``value`` as JSON for an error message: at most about ``limit`` characters and a
    few levels of nesting, however large or deep the value is."""
    text = _show(value, 3, limit)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _show(value: Any, depth: int, limit: int) -> str:
    if isinstance(value, str):
        return json.dumps(value[:limit], ensure_ascii=False)
    if isinstance(value, dict):
        if depth == 0:
            return "{…}" if value else "{}"
        items = [
            f"{_show(str(key), 0, limit)}: {_show(item, depth - 1, limit)}"
            for key, item in list(value.items())[:6]
        ]
        return "{" + ", ".join(items) + (", …}" if len(value) > 6 else "}")
    if isinstance(value, list | tuple):
        if depth == 0:
            return "[…]" if value else "[]"
        items = [_show(item, depth - 1, limit) for item in value[:6]]
        return "[" + ", ".join(items) + (", …]" if len(value) > 6 else "]")
    try:
        return json.dumps(value)  # null, booleans, numbers (NaN and Infinity as JSON5 has them)
    except (TypeError, ValueError):  # not JSON, or an integer too long to print
        return f"a {type(value).__name__}"
