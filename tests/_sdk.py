"""A strict check of a JSON value against an official SDK's request type.

The SDKs describe request bodies as TypedDicts, and neither they nor pydantic
reject a key a TypedDict does not declare (and pydantic checks ``Iterable``
fields lazily). :func:`check` walks the value and the type together and
reports the first place where they disagree: an unknown key, a missing
required key, a value of another type, a literal outside its set, in every
item of every list.
"""

from __future__ import annotations

import collections.abc
import functools
import types
import typing
from typing import Any

import typing_extensions

__all__ = ["Mismatch", "check"]


class Mismatch(AssertionError):
    """Where a value and a type disagree (``$.messages[2].content``), and how."""


class _OtherKind(Mismatch):
    """A literal field (``type``, ``role``) says the value is another type of a union."""


_WRAPPERS = {
    typing.Required,
    typing.NotRequired,
    typing_extensions.Required,
    typing_extensions.NotRequired,
    typing_extensions.ReadOnly,
}
_LISTS = {list, collections.abc.Iterable, collections.abc.Sequence, list, typing.Iterable}
_MAPS = {dict, collections.abc.Mapping, dict, typing.Mapping}


def check(value: Any, tp: Any, where: str = "$") -> None:
    """Raise :class:`Mismatch` unless ``value`` (parsed JSON) is of type ``tp``, strictly."""
    tp = _unwrap(tp)
    origin = typing.get_origin(tp)
    if tp is Any or tp is object:
        return
    if origin in (typing.Union, types.UnionType):
        _union(value, typing.get_args(tp), where)
    elif origin is typing.Literal or origin is typing_extensions.Literal:
        if value not in typing.get_args(tp):
            raise Mismatch(f"{where}: {value!r} is none of {typing.get_args(tp)}")
    elif typing_extensions.is_typeddict(tp):
        _typeddict(value, tp, where)
    elif origin in _LISTS or tp in _LISTS or getattr(origin, "__name__", "") == "SequenceNotStr":
        if type(value) is not list:
            raise Mismatch(f"{where}: {_show(value)} is not a list")
        (item,) = typing.get_args(tp) or (Any,)
        for index, element in enumerate(value):
            check(element, item, f"{where}[{index}]")
    elif origin in _MAPS or tp in _MAPS:
        if type(value) is not dict:
            raise Mismatch(f"{where}: {_show(value)} is not an object")
        _, item = typing.get_args(tp) or (str, Any)
        for key, element in value.items():
            check(element, item, f"{where}.{key}")
    elif tp is type(None) or tp is None:
        if value is not None:
            raise Mismatch(f"{where}: {_show(value)} is not null")
    elif tp is float:
        if type(value) not in (int, float):
            raise Mismatch(f"{where}: {_show(value)} is not a number")
    elif tp in (str, int, bool):
        if type(value) is not tp:
            raise Mismatch(f"{where}: {_show(value)} is not {tp.__name__}")
    else:
        raise Mismatch(f"{where}: no JSON value is a {tp!r}")


def _unwrap(tp: Any) -> Any:
    """The type under ``Required[...]``, ``Annotated[...]`` and type aliases."""
    while True:
        origin = typing.get_origin(tp)
        if origin in _WRAPPERS or origin is typing.Annotated:
            tp = typing.get_args(tp)[0]
        elif isinstance(tp, typing_extensions.TypeAliasType):
            tp = tp.__value__
        else:
            return tp


def _union(value: Any, options: tuple[Any, ...], where: str) -> None:
    failures: list[Mismatch] = []
    for option in options:
        try:
            check(value, option, where)
        except Mismatch as exc:
            failures.append(exc)
        else:
            return
    # The closest miss: of the right kind (its literal fields match), the deepest.
    closest = max(
        failures,
        key=lambda exc: (not isinstance(exc, _OtherKind), len(str(exc).partition(":")[0])),
    )
    others = len(failures) - 1
    raise Mismatch(
        f"{closest} (and {others} other type(s) of the union fail)" if others else closest
    )


@functools.cache
def _fields(tp: Any) -> tuple[dict[str, Any], frozenset[str]]:
    """A TypedDict's fields by their JSON name (an alias where one is declared), and the
    names of the required ones."""
    hints = typing.get_type_hints(tp, include_extras=True)
    fields: dict[str, Any] = {}
    required: set[str] = set()
    for name, hint in hints.items():
        key = _alias(hint) or name
        fields[key] = hint
        wrapper = typing.get_origin(hint)
        if wrapper in (typing.Required, typing_extensions.Required) or (
            name in tp.__required_keys__
            and wrapper not in (typing.NotRequired, typing_extensions.NotRequired)
        ):
            required.add(key)
    return fields, frozenset(required)


def _alias(hint: Any) -> str | None:
    for layer in _layers(hint):
        for meta in getattr(layer, "__metadata__", ()):
            alias = getattr(meta, "alias", None)
            if isinstance(alias, str):
                return alias
    return None


def _layers(hint: Any) -> list[Any]:
    out = [hint]
    while typing.get_origin(hint) in (*_WRAPPERS, typing.Annotated):
        hint = typing.get_args(hint)[0] if typing.get_origin(hint) in _WRAPPERS else hint.__origin__
        out.append(hint)
    return out


def _typeddict(value: Any, tp: Any, where: str) -> None:
    if type(value) is not dict:
        raise Mismatch(f"{where}: {_show(value)} is not an object ({tp.__name__})")
    fields, required = _fields(tp)
    for key, hint in fields.items():
        if key in value and typing.get_origin(_unwrap(hint)) is typing.Literal:
            try:
                check(value[key], hint, f"{where}.{key}")
            except Mismatch as exc:
                raise _OtherKind(str(exc)) from None
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise Mismatch(f"{where}: unknown key(s) {unknown} for {tp.__name__}")
    missing = sorted(required - set(value))
    if missing:
        raise Mismatch(f"{where}: missing required key(s) {missing} of {tp.__name__}")
    for key, element in value.items():
        check(element, fields[key], f"{where}.{key}")


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
