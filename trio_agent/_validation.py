"""Validation of a model's tool-call arguments against the tool's JSON Schema, as pi-ai does it.

This ports pi-ai's ``validateToolArguments`` (``packages/ai/src/utils/validation.ts``) for plain
JSON Schema parameters: the arguments are deep-copied, coerced by pi's ``coerceWithJsonSchema``
(``"7"`` → 7 for an integer, ``5`` → ``"5"`` for a string, ``"true"`` → true, ``null`` → the
type's zero, ``anyOf``/``oneOf`` resolved by trying each member on a copy and keeping the first
that then validates), then validated. Valid → the coerced copy is returned; the caller's object is
never mutated. Invalid → :class:`ToolArgumentsError` with pi's text::

    Validation failed for tool "NAME":
      - PATH: MESSAGE
      ...

    Received arguments:
    <the original, uncoerced arguments as JSON.stringify(args, null, 2) prints them>

MESSAGE is TypeBox 1.4's en_US text for the failing keyword (``src/system/locale/en_US.ts``).
Errors come in TypeBox's order: TypeBox reports, per schema node, ``type``, then the object
keywords (``required``, ``additionalProperties``, ``dependentRequired``, ... ``properties`` ...),
the array, string and number keywords, then ``$ref``, ``const``, ``enum``, ``if``, ``not``,
``allOf``, ``anyOf``, ``oneOf``. jsonschema reports a node's keywords in the schema's key order,
so the error pass runs on a copy of the schema whose keys are sorted into TypeBox's order; a few
keyword adapters give jsonschema TypeBox's error shapes (one ``required`` error listing every
missing property, one ``additionalProperties`` error at the object, the members' errors before
the ``anyOf``/``oneOf`` error, ...). Numbers produced by coercion are ``int`` when integral.

Deviations from pi, all because validity is decided by ``jsonschema`` rather than TypeBox:
``minLength``/``maxLength`` count code points (TypeBox counts grapheme clusters); ``pattern`` and
the ``regex`` format use Python's ``re``, not a JavaScript ``RegExp``; ``format`` is checked by
jsonschema's ``FORMAT_CHECKER`` (formats needing an optional package that is not installed are
not checked; ``email`` is laxer); ``$schema`` picks the draft (TypeBox ignores it); a ``$ref`` that
cannot be resolved makes the whole list ``Unknown validation error`` (pi lists the other errors).
JavaScript object quirks are not reproduced (``"constructor" in {}``, integer-like keys iterating
first), except that the received-arguments dump prints numbers and orders keys as
``JSON.stringify`` does (``5.0`` → ``5``, not ``json.dumps``'s ``5.0``); ``String(n)`` for the
string coercion is JavaScript's too (``1e21`` → ``"1e+21"``, ints past 2**53 rounded).

Speed: everything schema-dependent is compiled once (the coercion plan, with the parts that
cannot change a value pruned; the jsonschema validators). A flat schema (``type: object``, at
most ``type`` per property, ``required``, boolean ``additionalProperties``) has a fast check
that accepts exactly what jsonschema accepts; anything it rejects goes to jsonschema.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import numbers
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

import jsonschema  # type: ignore[import-untyped]
import referencing.exceptions

from trio_agent._errors import ToolArgumentsError, ToolDefinitionError

__all__ = ["ArgumentValidator", "compile_validator"]

# --------------------------------------------------------------------------- JavaScript numbers


def _words(text: str) -> list[str]:
    return text.split()


_JS_SPACE: Final = "\t\n\v\f\r \xa0\u1680\u2028\u2029\u202f\u205f\u3000\ufeff" + "".join(
    map(chr, range(0x2000, 0x200B))
)  # what String.prototype.trim strips
_DECIMAL: Final = re.compile(r"[+-]?(?:Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)")
_NON_DECIMAL: Final = re.compile(r"0(?:([xX])([0-9a-fA-F]+)|([oO])([0-7]+)|([bB])([01]+))")
_INDEX_KEY: Final = re.compile(r"0|[1-9][0-9]{0,9}")  # an array index if < 2**32 - 1


def _js_number(text: str) -> float | None:
    """JavaScript ``Number(text)`` when it is finite, else None."""
    text = text.strip(_JS_SPACE)
    if match := _NON_DECIMAL.fullmatch(text):
        digits = match[2] or match[4] or match[6]
        try:
            value = float(int(digits, 16 if match[1] else 8 if match[3] else 2))
        except OverflowError:
            return None
    elif _DECIMAL.fullmatch(text):
        value = float(text)
    else:
        return None
    return value if math.isfinite(value) else None


def _py_number(value: float) -> int | float:
    # What json.loads gives for JSON.stringify(value): JS prints integral numbers below 1e21 bare.
    return int(value) if value.is_integer() and abs(value) < 1e21 else value


def _js_number_str(value: int | float) -> str:
    """JavaScript ``String(value)`` for a number."""
    if isinstance(value, int):
        if abs(value) <= 2**53:
            return str(value)
        try:
            value = float(value)
        except OverflowError:
            return "Infinity" if value > 0 else "-Infinity"
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    mantissa, _, exponent = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    all_digits = whole + fraction
    significant = all_digits.lstrip("0")
    n = len(whole) + int(exponent or 0) - (len(all_digits) - len(significant))
    digits = significant.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + digits
    tail = "." + digits[1:] if k > 1 else ""
    return f"{sign}{digits[0]}{tail}e{'+' if n > 0 else '-'}{abs(n - 1)}"


def _js_json(value: Any, indent: str = "") -> str:
    """``JSON.stringify(value, null, 2)``."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int | float):
        text = _js_number_str(value)
        return "null" if text in ("NaN", "Infinity", "-Infinity") else text
    inner = indent + "  "
    if isinstance(value, Mapping):
        keys = [str(key) for key in value]
        is_index = [bool(_INDEX_KEY.fullmatch(k)) and int(k) < 2**32 - 1 for k in keys]
        index_keys = sorted((k for k, index in zip(keys, is_index, strict=True) if index), key=int)
        ordered = [*index_keys, *(k for k, index in zip(keys, is_index, strict=True) if not index)]
        by_name = {str(key): item for key, item in value.items()}
        body = [
            f"{inner}{json.dumps(k, ensure_ascii=False)}: {_js_json(by_name[k], inner)}"
            for k in ordered
        ]
        return "{\n" + ",\n".join(body) + f"\n{indent}}}" if body else "{}"
    if isinstance(value, list | tuple):
        body = [inner + _js_json(item, inner) for item in value]
        return "[\n" + ",\n".join(body) + f"\n{indent}]" if body else "[]"
    return json.dumps(str(value), ensure_ascii=False)


# --------------------------------------------------------------------------- coercion (pi's)


def _copy(value: Any) -> Any:
    """``structuredClone`` of JSON data (other objects are deep-copied)."""
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    if kind is dict:
        return {key: _copy(item) for key, item in value.items()}
    if kind is list:
        return [_copy(item) for item in value]
    return copy.deepcopy(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_integer(value: Any) -> bool:
    return _is_number(value) and (isinstance(value, int) or value.is_integer())


# pi's `matchesJsonType`, by type name (JS numbers are Python ints and floats).
_PI_TYPES: Final[dict[str, Callable[[Any], bool]]] = {
    "number": _is_number,
    "integer": _is_integer,
    "boolean": lambda value: isinstance(value, bool),
    "string": lambda value: isinstance(value, str),
    "null": lambda value: value is None,
    "array": lambda value: isinstance(value, list),
    "object": lambda value: isinstance(value, dict),
}
# jsonschema's Draft 6+ type checker (jsonschema/_types.py), for the fast path.
_JSONSCHEMA_TYPES: Final[dict[str, Callable[[Any], bool]]] = {
    **_PI_TYPES,
    "number": lambda value: isinstance(value, numbers.Number) and not isinstance(value, bool),
}


def _coerce_primitive(value: Any, type_name: str) -> Any:
    """pi's ``coercePrimitiveByType``; returns ``value`` itself when nothing applies."""
    if type_name in ("number", "integer"):
        if value is None:
            return 0
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, str) and value.strip(_JS_SPACE):
            parsed = _js_number(value)
            if parsed is not None and (type_name == "number" or parsed.is_integer()):
                return _py_number(parsed)
    elif type_name == "boolean":
        if value is None:
            return False
        if isinstance(value, str) and value in ("true", "false"):
            return value == "true"
        if _is_number(value) and value in (0, 1):
            return value == 1
    elif type_name == "string":
        if value is None:
            return ""
        if isinstance(value, bool):
            return "true" if value else "false"
        if _is_number(value):
            return _js_number_str(value)
    elif type_name == "null" and (
        value is False or value == "" or (_is_number(value) and value == 0)
    ):
        return None
    return value


_PRIMITIVE_TYPES: Final = frozenset({"number", "integer", "boolean", "string", "null"})
_Check = Callable[[Any], bool]
_Member = tuple["_Plan | None", "_Check | None"]


class _Plan:
    """One schema node of pi's ``coerceWithJsonSchema``; parts that cannot change a value are
    pruned at compile time (a pruned subschema is None)."""

    __slots__ = _words("additional all_of any_of items known one_of prims props tests types")

    def __init__(self, schema: dict[str, Any], check: Callable[[Any], _Check | None]) -> None:
        raw = schema.get("type")
        types = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else []
        self.types = tuple(t for t in types if isinstance(t, str))
        self.prims = any(t in _PRIMITIVE_TYPES for t in self.types)
        self.tests = tuple(_PI_TYPES.get(t, _never) for t in self.types)
        self.all_of = tuple(p for s in _list(schema.get("allOf")) if (p := _plan(s, check)))
        self.any_of = _union(schema.get("anyOf"), check)
        self.one_of = _union(schema.get("oneOf"), check)
        self.props: tuple[tuple[str, _Plan], ...] = ()
        self.known: frozenset[str] = frozenset()
        self.additional: _Plan | None = None
        self.items: _Plan | tuple[_Plan | None, ...] | None = None
        properties = schema.get("properties")
        if "object" in self.types and isinstance(properties, dict):
            self.known = frozenset(properties)
            subs = ((key, _plan(sub, check)) for key, sub in properties.items())
            self.props = tuple((key, sub) for key, sub in subs if sub)
        if "object" in self.types:
            self.additional = _plan(schema.get("additionalProperties"), check)
        items = schema.get("items")
        if "array" in self.types and isinstance(items, list):
            plans = tuple(_plan(sub, check) for sub in items)
            self.items = plans if any(plans) else None
        elif "array" in self.types:
            self.items = _plan(items, check)


def _any_true(tests: tuple[Callable[[Any], bool], ...], value: Any) -> bool:
    # Loops rather than any()/all() over generators, here and in _flat_check: hot path, ~2x faster.
    for test in tests:  # noqa: SIM110
        if test(value):
            return True
    return False


def _never(value: Any) -> bool:
    return False


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _plan(schema: Any, check: Callable[[Any], _Check | None]) -> _Plan | None:
    if not isinstance(schema, dict):
        return None
    p = _Plan(schema, check)
    active = p.prims or p.all_of or p.any_of or p.one_of or p.props or p.additional or p.items
    return p if active else None


def _union(members: Any, check: Callable[[Any], _Check | None]) -> tuple[_Member, ...]:
    pairs = tuple((_plan(member, check), check(member)) for member in _list(members))
    return pairs if any(plan for plan, _ in pairs) else ()


def _coerce_union(value: Any, members: tuple[_Member, ...]) -> Any:
    for plan, check in members:
        candidate = _coerce(_copy(value), plan) if plan else value
        if check is not None and check(candidate):
            return candidate
    return value


def _coerce(value: Any, plan: _Plan) -> Any:
    """pi's ``coerceWithJsonSchema``: may mutate ``value`` (a copy of ours) in place."""
    for nested in plan.all_of:
        value = _coerce(value, nested)
    if plan.any_of:
        value = _coerce_union(value, plan.any_of)
    if plan.one_of:
        value = _coerce_union(value, plan.one_of)
    # pi tries the types unless the value has one of several; a value of its only type is left
    # as it is by coercePrimitiveByType anyway.
    if plan.prims and not _any_true(plan.tests, value):
        for type_name in plan.types:
            candidate = _coerce_primitive(value, type_name)
            # JS `candidate !== value`: NaN counts as changed, which stops the search.
            if candidate is not value or (isinstance(value, float) and math.isnan(value)):
                value = candidate
                break
    if isinstance(value, dict) and (plan.props or plan.additional):
        for key, sub in plan.props:
            if key in value:
                value[key] = _coerce(value[key], sub)
        if plan.additional:
            for key, item in value.items():
                if key not in plan.known:
                    value[key] = _coerce(item, plan.additional)
    items = plan.items
    if isinstance(value, list) and items:
        if isinstance(items, tuple):
            for index, item_plan in enumerate(items[: len(value)]):
                if item_plan:
                    value[index] = _coerce(value[index], item_plan)
        else:
            value[:] = [_coerce(item, items) for item in value]
    return value


# --------------------------------------------------------------------------- TypeBox's errors


# TypeBox's ErrorSchema keyword order (src/schema/engine/schema.ts).
_RANK: Final = {
    keyword: rank
    for rank, keyword in enumerate(
        _words(
            "type required additionalProperties dependencies dependentRequired"
            " dependentSchemas patternProperties properties propertyNames minProperties"
            " maxProperties additionalItems contains items maxContains maxItems minContains"
            " minItems prefixItems uniqueItems format maxLength minLength pattern"
            " exclusiveMaximum exclusiveMinimum maximum minimum multipleOf $ref const enum"
            " if not allOf anyOf oneOf unevaluatedItems unevaluatedProperties"
        )
    )
}
_ONE_SCHEMA: Final = frozenset(
    _words(
        "additionalProperties items additionalItems contains not if then else"
        " propertyNames unevaluatedItems unevaluatedProperties"
    )
)
_SCHEMA_LIST: Final = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})
_SCHEMA_MAP: Final = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
)
# `false` as a subschema, spelled so that jsonschema keeps its instance path.
_FALSE_SCHEMA: Final[dict[str, Any]] = {"not": {}}

_MESSAGES: Final[dict[str | None, str]] = {
    None: "schema is false",
    "additionalItems": "schema is false",
    "const": "must be equal to constant",
    "contains": "must contain at least 1 valid item",
    "minContains": "must contain at least 1 valid item",
    "maxContains": "must contain at least 1 valid item",
    "enum": "must be equal to one of the allowed values",
    "exclusiveMaximum": "must be < {}",
    "exclusiveMinimum": "must be > {}",
    "format": 'must match format "{}"',
    "maxItems": "must not have more than {} items",
    "maxLength": "must not have more than {} characters",
    "maxProperties": "must not have more than {} properties",
    "maximum": "must be <= {}",
    "minItems": "must not have fewer than {} items",
    "minLength": "must not have fewer than {} characters",
    "minProperties": "must not have fewer than {} properties",
    "minimum": "must be >= {}",
    "multipleOf": "must be multiple of {}",
    "not": "must not be valid",
    "pattern": 'must match pattern "{}"',
    "unevaluatedItems": "must not have unevaluated items",
    "unevaluatedProperties": "must not have unevaluated properties",
    "uniqueItems": "must not have duplicate items",
}
# Keywords whose errors our adapters word themselves.
_WORDED: Final = frozenset(
    _words(
        "required additionalProperties dependencies dependentRequired propertyNames if anyOf oneOf"
    )
)


class _Raw(str):
    """A path segment TypeBox does not JSON-Pointer-encode (a missing property, a key name)."""

    __slots__ = ()


def _reorder(schema: Any, has_not: bool) -> Any:
    """A copy of ``schema`` with every node's keywords in TypeBox's order and ``false`` spelled
    ``{"not": {}}`` (same meaning; not in draft 3), so jsonschema reports errors as TypeBox does."""
    if schema is False and has_not:
        return _FALSE_SCHEMA
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key in sorted(schema, key=lambda k: _RANK.get(k, len(_RANK))):
        value = schema[key]
        if key in _SCHEMA_MAP and isinstance(value, dict):
            value = {name: _reorder(sub, has_not) for name, sub in value.items()}
        elif key in _SCHEMA_LIST and isinstance(value, list):
            value = [_reorder(sub, has_not) for sub in value]
        elif key in _ONE_SCHEMA:
            value = _reorder(value, has_not)
        out[key] = value
    return out


_Keyword = Callable[[Any, Any, Any, Any], Iterator[Any]]


def _adapters(base: Any) -> dict[str, _Keyword]:
    """Keyword functions giving jsonschema TypeBox's error shapes (same validity)."""
    original: dict[str, _Keyword] = base.VALIDATORS
    error = jsonschema.ValidationError

    def required(validator: Any, required: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if any(True for _ in original["required"](validator, required, instance, schema)):
            missing = [name for name in required if name not in instance]
            err = error("must have required properties " + ", ".join(missing))
            if missing[0]:
                err.path.append(_Raw(missing[0]))
            yield err

    def additional(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
        for _ in original["additionalProperties"](validator, value, instance, schema):
            yield error("must not have additional properties")
            return

    def dependent(keyword: str) -> _Keyword:
        # TypeBox: dependentRequired, an error per missing property; dependencies, one at most.
        def adapter(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
            failed = list(original[keyword](validator, value, instance, schema))
            for name, needs in value.items() if failed else ():
                if name not in instance:
                    continue
                if not isinstance(needs, list):  # `dependencies` with a schema
                    yield from validator.descend(instance, needs, schema_path=name)
                    continue
                text = f"must have properties {', '.join(needs)} when property {name} is present"
                missing = [need for need in needs if need not in instance]
                yield from (
                    error(text) for _ in missing[: 1 if keyword == "dependencies" else None]
                )

        return adapter

    def property_names(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if not validator.is_type(instance, "object"):
            return
        failed: list[str] = []
        for name in instance:
            for err in validator.descend(instance=name, schema=value):
                if not failed or failed[-1] != name:
                    failed.append(name)
                err.path.appendleft(_Raw(name))
                yield err
        if failed:
            yield error(f"property names {', '.join(failed)} are invalid")

    def if_(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
        errors = list(original["if"](validator, value, instance, schema))
        if errors and errors[0].relative_schema_path[0] == "then":
            yield error('must match "then" schema')
        elif errors:
            yield from errors
            yield error('must match "else" schema')

    def union(keyword: str, text: str) -> _Keyword:
        def adapter(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
            for err in original[keyword](validator, value, instance, schema):
                for member_error in err.context:
                    member_error.parent = None
                    yield member_error
                yield error(text)

        return adapter

    adapters = {
        "required": required,
        "additionalProperties": additional,
        "propertyNames": property_names,
        "if": if_,
        "anyOf": union("anyOf", "must match a schema in anyOf"),
        "oneOf": union("oneOf", "must match exactly one schema in oneOf"),
        "dependentRequired": dependent("dependentRequired"),
        "dependencies": dependent("dependencies"),
    }
    return {keyword: fn for keyword, fn in adapters.items() if keyword in original}


@functools.cache
def _error_class(base: Any) -> Any:
    return jsonschema.validators.extend(base, _adapters(base))


def _line(err: Any) -> str:
    segments = (
        str(part) if isinstance(part, _Raw | int) else part.replace("~", "~0").replace("/", "~1")
        for part in err.path
    )
    path = ".".join(segments) or "root"
    keyword, limit = err.validator, err.validator_value
    if keyword in _WORDED:
        return f"  - {path}: {err.message}"
    if keyword == "type":
        text = (
            f"must be {limit}" if isinstance(limit, str) else f"must be either {' or '.join(limit)}"
        )
    elif keyword == "not" and err.schema is _FALSE_SCHEMA:
        text = "schema is false"
    else:
        shown = _js_number_str(limit) if _is_number(limit) else limit
        text = _MESSAGES.get(keyword, "an unknown validation error occurred").format(shown)
    return f"  - {path}: {text}"


# --------------------------------------------------------------------------- public interface

_ANNOTATIONS: Final = frozenset(
    _words("title description default examples $comment deprecated readOnly writeOnly")
)


def _accept(args: dict[str, Any]) -> bool:
    return True


_FLAT_ROOT: Final = _ANNOTATIONS | {"type", "properties", "required", "additionalProperties"}


def _flat_check(schema: dict[str, Any]) -> _Check | None:
    """The fast path: for a flat schema (``type: object``; ``properties`` that at most constrain
    ``type``; ``required``; a boolean ``additionalProperties``) a check of a ``dict`` that says
    what jsonschema's Draft 6+ validators say; None for any other schema."""
    properties, required = schema.get("properties", {}), schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if (
        schema.get("type") != "object"
        or not set(schema) <= _FLAT_ROOT | {"$schema"}
        or not isinstance(properties, dict)
        or not isinstance(extra, bool)
    ):
        return None
    typed: list[tuple[str, tuple[Callable[[Any], bool], ...]]] = []
    for name, sub in properties.items():
        if not (sub is True or (isinstance(sub, dict) and set(sub) <= _ANNOTATIONS | {"type"})):
            return None
        raw = sub.get("type") if isinstance(sub, dict) else None
        if raw is not None:
            names = [raw] if isinstance(raw, str) else raw
            typed.append((name, tuple(_JSONSCHEMA_TYPES[t] for t in names)))
    known = frozenset(properties)
    if not (required or typed or not extra):
        return _accept

    def check(args: dict[str, Any]) -> bool:
        if not (extra or known.issuperset(args)):
            return False
        for name in required:
            if name not in args:
                return False
        for name, tests in typed:  # noqa: SIM110
            if name in args and not _any_true(tests, args[name]):
                return False
        return True

    return check


def _safe(is_valid: _Check) -> _Check:
    def check(value: Any) -> bool:
        try:
            return bool(is_valid(value))
        except referencing.exceptions.Unresolvable:  # TypeBox: an unresolvable $ref fails
            return False

    return check


class ArgumentValidator:
    """Compiled once per tool (at tool construction)."""

    __slots__ = ("_errors", "_fast", "_is_valid", "_plan")

    def __init__(self, schema: dict[str, Any], cls: Any) -> None:
        checker = cls.FORMAT_CHECKER

        def member_check(member: Any) -> _Check | None:
            if not isinstance(member, dict):  # pi: boolean members never match (WeakMap key)
                return None
            return _safe(cls(member, format_checker=checker).is_valid)

        self._plan = _plan(schema, member_check)
        draft6_types = cls.TYPE_CHECKER is jsonschema.Draft202012Validator.TYPE_CHECKER
        self._fast = _flat_check(schema) if draft6_types else None
        self._is_valid: _Check = cls(schema, format_checker=checker).is_valid
        self._errors: Callable[[Any], Iterator[Any]] = _error_class(cls)(
            _reorder(schema, "not" in cls.VALIDATORS), format_checker=checker
        ).iter_errors

    def validate(self, tool_name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Return a coerced deep copy of `arguments` (the caller's object is never mutated)
        or raise ToolArgumentsError with pi's message text."""
        args: dict[str, Any]
        if is_mapping := (type(arguments) is dict or isinstance(arguments, Mapping)):
            args = {key: _copy(item) for key, item in arguments.items()}
        else:  # what a tool's prepare_arguments returned: pi reports it ("root: must be object")
            args = _copy(arguments)
        if self._plan is not None:
            args = _coerce(args, self._plan)
        if is_mapping and self._fast is not None and self._fast(args):
            return args
        try:
            if self._is_valid(args):
                return args
            lines = "\n".join(map(_line, self._errors(args)))
        except referencing.exceptions.Unresolvable:
            lines = ""
        raise ToolArgumentsError(
            f'Validation failed for tool "{tool_name}":\n{lines or "Unknown validation error"}'
            f"\n\nReceived arguments:\n{_js_json(arguments)}"
        )


def compile_validator(schema: Mapping[str, Any], *, tool_name: str) -> ArgumentValidator:
    """Compile ``schema`` (a tool's ``parameters``) into an :class:`ArgumentValidator`.

    Raise :class:`ToolDefinitionError` naming the tool and the problem if ``schema`` is not a
    valid JSON Schema (checked by jsonschema's ``check_schema`` with the Draft 2020-12 validator
    class, or the one named by ``$schema``)."""
    if not isinstance(schema, Mapping):
        raise ToolDefinitionError(
            f"tool {tool_name!r}: parameters must be a JSON Schema object,"
            f" not {type(schema).__name__}"
        )
    plain: dict[str, Any] = {key: _copy(value) for key, value in schema.items()}
    cls = jsonschema.validators.validator_for(plain, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(plain)
    except jsonschema.SchemaError as err:
        raise ToolDefinitionError(
            f"tool {tool_name!r}: parameters is not a valid JSON Schema: {err.message}"
            f" (at {err.json_path})"
        ) from None
    return ArgumentValidator(plain, cls)
