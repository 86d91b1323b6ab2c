"""Validation of a model's tool-call arguments against the tool's JSON Schema, as pi-ai does it.

This ports pi-ai 0.85's ``validateToolArguments`` (``packages/ai/src/utils/validation.ts``) for
plain JSON Schema parameters. The arguments are deep-copied; then pi's ``normalizeOptionalNulls``
drops every ``null`` given for an optional property whose schema refuses ``null`` (models write
``"limit": null`` for "not given"; dropping it lets the tool's default apply), looking into
``properties`` and ``items`` only, as pi does; then pi's ``coerceWithJsonSchema`` coerces what is
left (``"7"`` → 7 for an integer, ``5`` → ``"5"`` for a string, ``"true"`` → true, a remaining
``null`` → the type's zero; ``anyOf``/``oneOf``: a value that some member accepts as it is stays as
it is, else each member is tried on a copy and the first that then validates wins); then the
result is validated. Valid → the coerced copy is returned; the caller's object is never mutated.
Invalid → :class:`ToolArgumentsError` with pi's text::

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
``patternProperties`` match with RE2 (``\\uXXXX`` and ``\\u{...}`` read as JavaScript does),
not a JavaScript ``RegExp``, and a pattern RE2 cannot compile (a backreference, a lookaround, a
repetition past 1,000) is a :class:`ToolDefinitionError` when the tool is made; the ``regex``
format takes what Python's ``re`` or RE2 compiles; ``format`` is checked by jsonschema's
``FORMAT_CHECKER`` (formats needing an optional package that is not installed are not checked;
``email`` is laxer); the root's ``$schema`` picks the draft (TypeBox ignores it), and a
``$schema`` below the root is ignored. A ``$ref`` that does not resolve within the schema (or to a
JSON Schema meta-schema: nothing is fetched), one that points at something that is not a schema,
and a cycle of references that never moves into the arguments are :class:`ToolDefinitionError`
when the tool is made, not a failure of every call.
JavaScript object quirks are not reproduced (``"constructor" in {}``, integer-like keys iterating
first), except that the received-arguments dump prints numbers and orders keys as
``JSON.stringify`` does (``5.0`` → ``5``, not ``json.dumps``'s ``5.0``); ``String(n)`` for the
string coercion is JavaScript's too (``1e21`` → ``"1e+21"``, ints past 2**53 rounded).

Speed: everything schema-dependent is compiled once (the coercion plan, with the parts that
cannot change a value pruned; the jsonschema validators). A flat schema (``type: object``, at
most ``type`` per property, ``required``, boolean ``additionalProperties``) has a fast check
that accepts exactly what jsonschema accepts; anything it rejects goes to jsonschema.

Bounds. Validation runs in the loop task, so it must not hold the Trio run, whatever the schema
(an MCP server's) and the arguments (the model's): jsonschema's work can be exponential in the
schema (``$ref``\\ s shared by ``anyOf`` members), Python's ``re`` in the text. So patterns match
with RE2, and every part of a call's work is counted in *steps* (:mod:`trio_agent._metered`): each
subschema visited (its size), each error made and each level it goes up, each character read or
repr'd, each node copied, compared or coerced. A call may take :data:`BASE_STEPS` plus
:data:`STEPS_PER_UNIT` per unit of its arguments (a value, or :data:`UNIT_CHARS` characters of a
string or key); past that it is a :class:`ToolArgumentsError` (``... took more than N steps``),
which the loop turns into an error result, and the run goes on. Copying the arguments and a flat
schema's fast path are linear and not counted.

How the numbers were chosen (CPU time on a loaded 2-core machine): the costliest steps that
schemas built to be slow could find (errors going up long chains, reprs of large values, RE2
without its DFA, URI references) take about 0.7 µs, so a call with small arguments is stopped
within about 35 ms; real validations take 0.3-0.4 µs a step and 20-40 steps per unit (a schema of
50 properties with an array of 1,000 objects: 219,000 steps of the 1,055,000 its 10,000 units
allow; an 8-member ``oneOf`` checked for every item of such an array, about 130, which the
allowance of 200 leaves room for). The allowance grows with the arguments because honest work
does, every value being checked; what a schema can add is then at most about 140 µs per unit,
linear in what the model sent.

Compiling is bounded too: a schema has at most :data:`MAX_SCHEMA_VALUES` values, is nested at
most :data:`MAX_SCHEMA_DEPTH` levels, has no chain of more than :data:`MAX_SCHEMA_CHAIN`
subschemas that apply to the same value (a ``$ref`` and its target count two), no ``$ref`` into
data (an ``enum``'s, a ``const``), and checking it (jsonschema's ``check_schema``, counted: 110 to
180 steps a value for draft 2020-12) and finding which optional properties refuse ``null`` take
at most :data:`COMPILE_STEPS` steps (about half a second; compiling each pattern with RE2 is
charged too, by its program's size); else it is a
:class:`ToolDefinitionError` naming the tool. Every other walk of the schema at compile time goes
through each node once (a ``$ref`` is looked up, not followed), without recursion past
:data:`MAX_SCHEMA_DEPTH`.
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

import jsonschema  # type: ignore[import-untyped]  # ships no type information
import referencing.exceptions
import referencing.jsonschema

# jsonschema's own dependency (its meta-schemas), which ships no type information.
from jsonschema_specifications import REGISTRY as _SPECIFICATIONS  # type: ignore[import-untyped]  # as said

from trio_agent._errors import ToolArgumentsError, ToolDefinitionError
from trio_agent._metered import (
    CHARS_PER_STEP,
    COST,
    META_COST,
    Budget,
    OverBudget,
    charge,
    format_checker,
    metered_class,
    node_steps,
    regex_problem,
)

__all__ = [
    "BASE_STEPS",
    "COMPILE_STEPS",
    "MAX_DROPPED_PATTERNS",
    "MAX_SCHEMA_CHAIN",
    "MAX_SCHEMA_DEPTH",
    "MAX_SCHEMA_VALUES",
    "STEPS_PER_UNIT",
    "ArgumentValidator",
    "compile_validator",
    "step_budget",
    "without_unmatchable_patterns",
]

# --------------------------------------------------------------------------- bounds

BASE_STEPS: Final = 50_000
STEPS_PER_UNIT: Final = 200
UNIT_CHARS: Final = 64
COMPILE_STEPS: Final = 1_000_000
MAX_SCHEMA_VALUES: Final = 100_000
MAX_SCHEMA_DEPTH: Final = 50
MAX_SCHEMA_CHAIN: Final = 100
# Steps per node of a value checked against a JSON Schema meta-schema (jsonschema's own work).
_META_STEPS: Final = 250
# Steps to build a jsonschema validator for a union's member, or to find whether an optional
# property refuses null.
_BUILD_STEPS: Final = 20

# --------------------------------------------------------------------------- JavaScript numbers


def _words(text: str) -> list[str]:
    return text.split()


_JS_SPACE: Final = "\t\n\v\f\r \xa0\u1680\u2028\u2029\u202f\u205f\u3000\ufeff" + "".join(
    map(chr, range(0x2000, 0x200B))
)  # what String.prototype.trim strips
# Each part has one way to match (no `[0-9]+\.?[0-9]*`, which backtracks quadratically on a long
# run of digits that does not end well).
_DECIMAL: Final = re.compile(
    r"[+-]?(?:Infinity|(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
)
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


def _counted_copy(value: Any) -> Any:
    """:func:`_copy`, a step per node copied."""
    charge(1)
    kind = type(value)
    if kind is dict:
        return {key: _counted_copy(item) for key, item in value.items()}
    if kind is list:
        return [_counted_copy(item) for item in value]
    return _copy(value)


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
            charge(len(value) // CHARS_PER_STEP)
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

    __slots__ = _words(
        "additional all_of any_of items known one_of prims props props_map tests types"
    )

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
        self.props_map: dict[str, _Plan] = {}
        self.known: frozenset[str] = frozenset()
        self.additional: _Plan | None = None
        self.items: _Plan | tuple[_Plan | None, ...] | None = None
        properties = schema.get("properties")
        if "object" in self.types and isinstance(properties, dict):
            self.known = frozenset(properties)
            subs = ((key, _plan(sub, check)) for key, sub in properties.items())
            self.props = tuple((key, sub) for key, sub in subs if sub)
            self.props_map = dict(self.props)
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
    for test in tests:  # noqa: SIM110  (any() is ~2x slower, as said above)
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
    """pi's ``coerceWithUnionSchema``: a value some member accepts as it is stays (``null`` under
    ``anyOf: [integer, null]`` is not made 0); else the first member that accepts a coerced copy."""
    for _, check in members:
        if check is not None and check(value):
            return value
    for plan, check in members:
        # A member without a plan cannot change the value, which it has just refused.
        if plan is not None and check is not None:
            candidate = _coerce(_counted_copy(value), plan)
            if check(candidate):
                return candidate
    return value


def _coerce_types(value: Any, plan: _Plan) -> Any:
    """The primitive types' part of :func:`_coerce`."""
    # pi tries the types unless the value has one of several; a value of its only type is left
    # as it is by coercePrimitiveByType anyway.
    if not _any_true(plan.tests, value):
        for type_name in plan.types:
            candidate = _coerce_primitive(value, type_name)
            # JS `candidate !== value`: NaN counts as changed, which stops the search.
            if candidate is not value or (isinstance(value, float) and math.isnan(value)):
                return candidate
    return value


def _coerce_flat(args: dict[str, Any], plan: _Plan) -> dict[str, Any]:
    """:func:`_coerce` for a flat schema (see :func:`_flat_check`), whose plan is its properties'
    types: a loop over them, not counted (the hot path)."""
    for key, sub in plan.props:
        if key in args and sub.prims:
            args[key] = _coerce_types(args[key], sub)
    return args


def _coerce(value: Any, plan: _Plan) -> Any:
    """pi's ``coerceWithJsonSchema``: may mutate ``value`` (a copy of ours) in place.

    A step per call, and per property looked at (whichever of the value's keys and the plan's
    properties are fewer)."""
    charge(1)
    for nested in plan.all_of:
        value = _coerce(value, nested)
    if plan.any_of:
        value = _coerce_union(value, plan.any_of)
    if plan.one_of:
        value = _coerce_union(value, plan.one_of)
    if plan.prims:
        value = _coerce_types(value, plan)
    if isinstance(value, dict) and (plan.props or plan.additional):
        charge(min(len(plan.props), len(value)) + (len(value) if plan.additional else 0))
        if len(plan.props) <= len(value):
            for key, sub in plan.props:
                if key in value:
                    value[key] = _coerce(value[key], sub)
        else:
            props = plan.props_map
            for key, item in value.items():
                if (found := props.get(key)) is not None:
                    value[key] = _coerce(item, found)
        if plan.additional:
            for key, item in value.items():
                if key not in plan.known:
                    value[key] = _coerce(item, plan.additional)
    items = plan.items
    if isinstance(value, list) and items:
        if isinstance(items, tuple):
            charge(min(len(items), len(value)))
            for index, item_plan in enumerate(items[: len(value)]):
                if item_plan:
                    value[index] = _coerce(value[index], item_plan)
        else:
            value[:] = [_coerce(item, items) for item in value]
    return value


# --------------------------------------------------------------------------- optional nulls (pi's)


class _Nulls:
    """One schema node of pi's ``normalizeOptionalNulls``, compiled: the optional properties whose
    schema refuses ``null`` (a ``null`` given for one is dropped), and where to look further down
    (``properties`` of an object, ``items`` of an array; nothing else, as in pi). Nodes with
    nothing to do below them are pruned (None)."""

    __slots__ = ("drop", "drop_set", "items", "props", "props_map")

    def __init__(
        self,
        drop: tuple[str, ...],
        props: tuple[tuple[str, _Nulls], ...],
        items: _Nulls | tuple[_Nulls | None, ...] | None,
    ) -> None:
        self.drop = drop
        self.drop_set = frozenset(drop)
        self.props = props
        self.props_map = dict(props)
        self.items = items


def _nulls(schema: Any, refuses_null: Callable[[Any], bool]) -> _Nulls | None:
    if not isinstance(schema, dict):
        return None
    drop: list[str] = []
    props: list[tuple[str, _Nulls]] = []
    properties = schema.get("properties")
    if isinstance(properties, dict):
        required = schema.get("required")
        names = frozenset(required) if isinstance(required, list) else frozenset()
        for key, sub in properties.items():
            # pi keeps a null under a `$ref` (its target is not checked here) and under a boolean
            # schema (TypeBox cannot compile one on its own); draft 3 marks `required` in place.
            if (
                key not in names
                and isinstance(sub, dict)
                and not isinstance(sub.get("$ref"), str)
                and sub.get("required") is not True
                and refuses_null(sub)
            ):
                drop.append(key)
            if (nested := _nulls(sub, refuses_null)) is not None:
                props.append((key, nested))
    items: _Nulls | tuple[_Nulls | None, ...] | None = None
    raw_items = schema.get("items")
    if isinstance(raw_items, list):
        each = tuple(_nulls(sub, refuses_null) for sub in raw_items)
        items = each if any(each) else None
    else:
        items = _nulls(raw_items, refuses_null)
    if not (drop or props or items):
        return None
    return _Nulls(tuple(drop), tuple(props), items)


def _drop_nulls(value: Any, nulls: _Nulls) -> None:
    """pi's ``normalizeOptionalNulls`` on ``value`` (a copy of ours), in place.

    A step per call, and per property looked at (whichever of the value's keys and the
    schema's properties are fewer)."""
    charge(1)
    if isinstance(value, dict):
        if len(nulls.drop) + len(nulls.props) <= len(value):
            charge(len(nulls.drop) + len(nulls.props))
            for key in nulls.drop:
                if key in value and value[key] is None:
                    del value[key]
            for key, sub in nulls.props:
                if key in value:
                    _drop_nulls(value[key], sub)
        else:
            charge(len(value))
            drop = nulls.drop_set
            for key in [key for key, item in value.items() if item is None and key in drop]:
                del value[key]
            props = nulls.props_map
            for key, item in value.items():
                if (found := props.get(key)) is not None:
                    _drop_nulls(item, found)
    elif isinstance(value, list):
        items = nulls.items
        if isinstance(items, tuple):
            charge(min(len(items), len(value)))
            for item, item_nulls in zip(value, items, strict=False):
                if item_nulls is not None:
                    _drop_nulls(item, item_nulls)
        elif items is not None:
            for item in value:
                _drop_nulls(item, items)


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
_FALSE_SCHEMA: Final[dict[Any, Any]] = {
    COST: node_steps({"not": {}}),
    "not": {COST: node_steps({})},
}

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


# Draft 3's keywords whose lists may hold schemas beside type names; its `extends`.
_DRAFT3_LISTS: Final = frozenset({"type", "disallow", "extends"})
# Keywords whose values are data, never schemas (even where a `$ref` points into one).
_DATA: Final = frozenset(_words("enum const default examples required"))


class _Copy:
    """The schema the jsonschema validators run on, made from a tool's (which is kept as it is,
    for coercion and null-dropping): every schema node's keywords in TypeBox's order (so that
    jsonschema reports errors as TypeBox does), led by :data:`COST` (its own size, charged when
    the node is visited); ``false`` spelled ``{"not": {}}`` (same meaning; not in draft 3), so
    that jsonschema keeps its instance path; a ``$schema`` below the root dropped (jsonschema
    would switch to another draft's validator, which counts nothing); and a ``$ref`` to a JSON
    Schema meta-schema led by :data:`META_COST`. ``nodes`` maps each schema node of the tool's
    schema (by ``id``) to its copy."""

    __slots__ = ("_has_not", "_meta", "_sort", "_targets", "nodes", "root")

    def __init__(
        self,
        schema: dict[str, Any],
        *,
        has_not: bool,
        targets: frozenset[int] = frozenset(),
        meta: frozenset[int] = frozenset(),
        sort: bool = True,
        root_dialect: bool = True,
    ) -> None:
        self._has_not = has_not
        self._targets = targets  # where a $ref points: a schema, whatever keyword holds it
        self._meta = meta  # the nodes with a $ref to a meta-schema
        self._sort = sort  # keywords in TypeBox's order
        self.nodes: dict[int, Any] = {}
        self.root = self._schema(schema, root=root_dialect)

    def _schema(self, schema: Any, root: bool = False) -> Any:
        if schema is False and self._has_not:
            return _FALSE_SCHEMA
        if not isinstance(schema, dict):
            return schema
        out: dict[Any, Any] = {COST: node_steps(schema)}
        self.nodes[id(schema)] = out
        if id(schema) in self._meta:
            out[META_COST] = _META_STEPS
        keys = sorted(schema, key=lambda k: _RANK.get(k, len(_RANK))) if self._sort else schema
        for key in keys:
            value = schema[key]
            if key == "$schema" and not root:
                continue
            if key in _SCHEMA_MAP and isinstance(value, dict):
                value = {name: self._schema(sub) for name, sub in value.items()}
            elif key in _SCHEMA_LIST and isinstance(value, list):
                value = [self._schema(sub) for sub in value]
            elif key in _ONE_SCHEMA or (key == "extends" and isinstance(value, dict)):
                value = self._schema(value)
            elif key in _DRAFT3_LISTS and isinstance(value, list):
                value = [self._schema(sub) if isinstance(sub, dict) else sub for sub in value]
            elif key not in _DATA:
                value = self._other(value)
            out[key] = value
        return out

    def _other(self, value: Any) -> Any:
        """A value under a keyword jsonschema does not know: copied as it is, but for the
        objects a $ref points at, which are schemas."""
        if isinstance(value, dict):
            if id(value) in self._targets:
                return self._schema(value)
            return {key: self._other(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self._other(item) for item in value]
        return value


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
_FLAT_PROPERTY: Final = _ANNOTATIONS | {"type"}
_JSON_TYPES: Final = frozenset(_PI_TYPES)


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
        for name, tests in typed:  # noqa: SIM110  (the hot path: see _any_true)
            if name in args and not _any_true(tests, args[name]):
                return False
        return True

    return check


def _safe(is_valid: _Check) -> _Check:
    """A member's check, the member taken on its own as TypeBox compiles it: a ``$ref`` that
    resolves only in the whole schema does not match, nor does one that, so taken, refers to
    itself without end (``{"$ref": "#"}``)."""

    def check(value: Any) -> bool:
        try:
            return bool(is_valid(value))
        except (referencing.exceptions.Unresolvable, RecursionError):
            return False

    return check


# The references of a tool's schema resolve within it, or to the JSON Schema meta-schemas that
# jsonschema adds to every registry; never over the network (jsonschema's default would fetch an
# unknown http(s) URI, blocking the event loop, and TypeBox fetches nothing).
_NO_RETRIEVAL: Final[referencing.Registry[Any]] = referencing.Registry()


class ArgumentValidator:
    """Compiled once per tool (at tool construction)."""

    __slots__ = ("_drop", "_errors", "_fast", "_is_valid", "_nested_nulls", "_nulls", "_plan")

    def __init__(self, schema: dict[str, Any], cls: Any, counted: _Copy) -> None:
        checker = format_checker(cls)
        metered = metered_class(cls)

        def member_check(member: Any) -> _Check | None:
            if not isinstance(member, dict):  # pi: boolean members never match (WeakMap key)
                return None
            charge(_BUILD_STEPS)
            own = counted.nodes[id(member)]
            return _safe(metered(own, format_checker=checker, registry=_NO_RETRIEVAL).is_valid)

        def refuses_null(member: Any) -> bool:
            if set(member) <= _FLAT_PROPERTY:  # at most a type: no need to ask jsonschema
                raw = member.get("type")
                names = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else []
                if names and all(isinstance(n, str) and n in _JSON_TYPES for n in names):
                    return "null" not in names
            check = member_check(member)
            return check is not None and not check(None)

        self._nulls = _nulls(schema, refuses_null)
        # Its first level, applied to the arguments object while copying it (see validate).
        self._drop = frozenset(self._nulls.drop if self._nulls else ())
        self._nested_nulls = self._nulls.props if self._nulls else ()
        self._plan = _plan(schema, member_check)
        draft6_types = cls.TYPE_CHECKER is jsonschema.Draft202012Validator.TYPE_CHECKER
        self._fast = _flat_check(schema) if draft6_types else None
        self._is_valid: _Check = metered(
            counted.root, format_checker=checker, registry=_NO_RETRIEVAL
        ).is_valid
        self._errors: Callable[[Any], Iterator[Any]] = _error_class(metered)(
            counted.root, format_checker=checker, registry=_NO_RETRIEVAL
        ).iter_errors

    def validate(
        self, tool_name: str, arguments: Mapping[str, Any], steps: int | None = None
    ) -> dict[str, Any]:
        """Return a coerced deep copy of `arguments` (the caller's object is never mutated)
        or raise ToolArgumentsError with pi's message text, or saying that checking took more
        than ``steps`` steps (by default :func:`step_budget` of the arguments)."""
        args: Any
        try:
            if is_mapping := (type(arguments) is dict or isinstance(arguments, Mapping)):
                # _drop_nulls: this object's own nulls are left out while copying, nested ones
                # after. A loop, not a comprehension, which costs a call: this is the hot path.
                drop = self._drop
                args = {}
                for key, item in arguments.items():
                    if item is not None or key not in drop:
                        args[key] = _copy(item)
                if self._fast is not None:
                    # A flat schema: nothing nested, no union; its work is linear in the
                    # arguments, and not counted unless jsonschema has to say what is wrong.
                    if self._plan is not None:
                        args = _coerce_flat(args, self._plan)
                    if self._fast(args):
                        return args  # type: ignore[no-any-return]  # a dict, made above
            else:  # what prepare_arguments returned: pi reports it ("root: must be object")
                args = _copy(arguments)
            budget = Budget(step_budget(args) if steps is None else steps)
            try:
                with budget:
                    outcome = self._check(args, is_mapping, self._fast is not None)
            except OverBudget:
                raise ToolArgumentsError(
                    f'Validation failed for tool "{tool_name}": checking the arguments against'
                    f" the tool's schema took more than {budget.steps:,} steps"
                ) from None
            if not isinstance(outcome, str):
                return outcome
            lines = outcome
            received = _js_json(arguments)
        except RecursionError:
            # Arguments nested deeper than Python's stack allows (parsed by a JSON parser with a
            # higher limit, or built by prepare_arguments): a sentence, and no dump of them.
            lines = "  - root: must not be nested so deeply (past Python's recursion limit)"
            received = "(too deeply nested to show)"
        raise ToolArgumentsError(
            f'Validation failed for tool "{tool_name}":\n{lines or "Unknown validation error"}'
            f"\n\nReceived arguments:\n{received}"
        )

    def mismatch(self, value: Any) -> str | None:
        """``None`` when ``value`` (any JSON value, neither coerced nor copied) matches the
        schema; else pi's error lines (one ``  - path: text`` a problem), or a line saying that
        checking took more than its budget of steps (:func:`step_budget` of ``value``)."""
        try:
            budget = Budget(step_budget(value))
            with budget:
                if self._is_valid(value):
                    return None
                return "\n".join(map(_line, self._errors(value))) or "  - root: does not match"
        except OverBudget:
            return f"  - root: checking it took more than {budget.steps:,} steps"
        except RecursionError:
            return "  - root: must not be nested so deeply (past Python's recursion limit)"
        except referencing.exceptions.Unresolvable:
            return "  - root: a reference of the schema does not resolve"

    def _check(self, args: Any, is_mapping: bool, flat: bool) -> dict[str, Any] | str:
        """The counted part of :meth:`validate`: the valid arguments, or pi's error lines.
        ``flat``: an object that the flat path has null-dropped and coerced."""
        if not (is_mapping and flat):
            if not is_mapping:
                if self._nulls is not None:
                    _drop_nulls(args, self._nulls)
            elif self._nested_nulls:
                for key, sub in self._nested_nulls:
                    charge(1)
                    if key in args:
                        _drop_nulls(args[key], sub)
            if self._plan is not None:
                args = _coerce(args, self._plan)
        try:
            if self._is_valid(args):
                return args  # type: ignore[no-any-return]  # valid: an object
            return "\n".join(map(_line, self._errors(args)))
        except referencing.exceptions.Unresolvable:
            return ""


def _units(value: Any) -> int:
    """The size of JSON arguments: a unit per value (object, array, string, number, ...), and
    per :data:`UNIT_CHARS` characters of each string and key."""
    stack = [value]
    total = 0
    while stack:
        item = stack.pop()
        total += 1
        if isinstance(item, str):
            total += len(item) // UNIT_CHARS
        elif isinstance(item, dict):
            for key, sub in item.items():
                if isinstance(key, str):
                    total += len(key) // UNIT_CHARS
                stack.append(sub)
        elif isinstance(item, list):
            stack.extend(item)
    return total


def step_budget(arguments: Any) -> int:
    """How many steps validating ``arguments`` may take: :data:`BASE_STEPS`, and
    :data:`STEPS_PER_UNIT` more per unit of their size (see :func:`_units`)."""
    return BASE_STEPS + STEPS_PER_UNIT * _units(arguments)


# --------------------------------------------------------------------------- references

_PLAIN_KEY: Final = re.compile(r"[a-zA-Z][a-zA-Z0-9_]*")
# Keywords that apply a subschema to the same value (not to a property or an item of it).
_IN_PLACE_ONE: Final = ("not", "if", "then", "else")
_IN_PLACE_LIST: Final = ("allOf", "anyOf", "oneOf", "extends")  # draft 3's extends: one or a list
_IN_PLACE_MAP: Final = ("dependentSchemas", "dependencies")  # schemas for the same object
_REFS: Final = ("$ref", "$dynamicRef")


def _json_paths(node: Any, path: str, out: dict[int, str]) -> None:
    """Record the path of every object in ``node``, spelled as jsonschema's ``json_path``."""
    if isinstance(node, dict):
        out[id(node)] = path
        for key, value in node.items():
            if _PLAIN_KEY.fullmatch(key):
                step = f".{key}"
            else:
                step = "['" + key.replace("\\", "\\\\").replace("'", "\\'") + "']"
            _json_paths(value, path + step, out)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            _json_paths(value, f"{path}[{index}]", out)


def _unresolved_reason(err: referencing.exceptions.Unresolvable) -> str:
    if isinstance(err, referencing.exceptions.PointerToNowhere):
        return "the schema has nothing at that pointer"
    if isinstance(err, referencing.exceptions.NoSuchAnchor | referencing.exceptions.InvalidAnchor):
        return "the schema has no such anchor"
    return "it is not this schema nor a JSON Schema meta-schema, and nothing is fetched"


def _step(key: str) -> str:
    if _PLAIN_KEY.fullmatch(key):
        return f".{key}"
    return "['" + key.replace("\\", "\\\\").replace("'", "\\'") + "']"


def _check_patterns(node: dict[str, Any], where: str, tool_name: str) -> None:
    """Raise :class:`ToolDefinitionError` if RE2 cannot compile a pattern of ``node``."""
    found: list[tuple[str, str]] = []
    if isinstance(pattern := node.get("pattern"), str):
        found.append((pattern, f"{where}.pattern"))
    if isinstance(patterns := node.get("patternProperties"), dict):
        found.extend((key, f"{where}.patternProperties{_step(key)}") for key in patterns)
    for pattern, at in found:
        if (problem := regex_problem(pattern)) is not None:
            raise ToolDefinitionError(
                f"tool {tool_name!r}: parameters has a pattern RE2 cannot compile: {pattern!r}"
                f" (at {at}; {problem}). Patterns are matched with RE2, in time linear in the"
                " text: it has no backreferences nor lookaround (with which matching can take"
                " exponential time), and no repetition past 1,000"
            )


MAX_DROPPED_PATTERNS: Final = 16
"""The most ``pattern`` keywords RE2 cannot compile that :func:`without_unmatchable_patterns`
leaves out of one schema; a schema with more is refused."""


def without_unmatchable_patterns(
    schema: Mapping[str, Any], *, tool_name: str
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """A copy of ``schema`` without the ``pattern`` keywords RE2 cannot compile, and those
    patterns, for a schema whose author is not ours to tell (an MCP server's).

    Such a pattern (a lookahead: zod writes two into every e-mail address's) makes
    :func:`compile_validator` refuse the schema; without it the tool can be used, its
    arguments checked by the rest of its schema (and by the server, which has its own
    regular expressions). Only ``pattern`` keywords of subschemas are taken out, never data
    (an ``enum`` value, a property named "pattern"); a ``patternProperties`` key RE2 cannot
    compile stays, as its properties' schemas would be lost with it.

    Raises :class:`ToolDefinitionError` as :func:`compile_validator` does for a schema too
    large or too deep, for one with more than :data:`MAX_DROPPED_PATTERNS` such patterns,
    and when compiling its patterns takes more than :data:`COMPILE_STEPS` steps; returns a
    schema that is not valid JSON Schema as it is (:func:`compile_validator` says why).
    """
    plain = _plain(schema, tool_name)
    cls = jsonschema.validators.validator_for(plain, default=jsonschema.Draft202012Validator)
    specification = referencing.jsonschema.specification_with(
        cls.ID_OF(cls.META_SCHEMA) or "urn:unknown-dialect",
        default=referencing.Specification.OPAQUE,
    )
    dropped: list[str] = []
    resources = [specification.create_resource(plain)]
    seen: set[int] = set()
    try:
        with Budget(COMPILE_STEPS):
            while resources:
                resource = resources.pop()
                node = resource.contents
                if isinstance(node, dict) and id(node) not in seen:
                    seen.add(id(node))
                    pattern = node.get("pattern")
                    if isinstance(pattern, str) and regex_problem(pattern) is not None:
                        dropped.append(node.pop("pattern"))
                        if len(dropped) > MAX_DROPPED_PATTERNS:
                            raise ToolDefinitionError(
                                f"tool {tool_name!r}: parameters has more than"
                                f" {MAX_DROPPED_PATTERNS} patterns RE2 cannot compile"
                            )
                resources.extend(resource.subresources())
    except OverBudget:
        raise ToolDefinitionError(
            f"tool {tool_name!r}: parameters is too large to compile: its patterns took more"
            f" than {COMPILE_STEPS:,} steps"
        ) from None
    except ToolDefinitionError:
        raise
    except Exception:  # not a schema referencing can walk: compile_validator says why
        return dict(schema), ()
    return plain, tuple(dropped)


class _References:
    """What :func:`_check_references` found: the ids of the objects ``$ref``\\ s point at
    (``targets``), of the nodes with a ``$ref`` to a JSON Schema meta-schema (``meta``), and the
    path of every object (``paths``)."""

    __slots__ = ("meta", "paths", "targets")

    def __init__(
        self, targets: frozenset[int], meta: frozenset[int], paths: dict[int, str]
    ) -> None:
        self.targets = targets
        self.meta = meta
        self.paths = paths


def _check_references(schema: dict[str, Any], cls: Any, tool_name: str) -> _References:
    """Raise :class:`ToolDefinitionError` unless every ``$ref`` / ``$dynamicRef`` in ``schema``
    resolves to a schema, no cycle of references comes back to a subschema without moving
    into a property or an item of the value, and RE2 can compile every pattern that validation
    may use.

    Why at construction: jsonschema resolves a reference only when a call reaches it, so a
    broken one fails every such call ("Unknown validation error"), and a cycle that applies to
    the same value again and again never ends (RecursionError)."""
    specification = referencing.jsonschema.specification_with(
        cls.ID_OF(cls.META_SCHEMA) or "urn:unknown-dialect",
        default=referencing.Specification.OPAQUE,
    )
    root = specification.create_resource(schema)
    paths: dict[int, str] = {}
    _json_paths(schema, "$", paths)
    # Drafts 3 to 7 ignore the keywords beside a `$ref`.
    legacy = cls in _LEGACY
    in_place: dict[int, list[int]] = {}
    targets: set[int] = set()
    meta: set[int] = set()
    # Subschemas reached only by a $ref (under a keyword jsonschema does not know, say
    # "#/components/x"): looked at too, once the tree of subresources has been.
    pending: list[tuple[Any, Any]] = []

    def visit(resource: Any, resolver: Any) -> None:
        node = resource.contents
        if isinstance(node, dict):
            if id(node) in in_place:
                return
            where = paths.get(id(node), "$")
            following: list[int] = []
            for keyword in _REFS:
                ref = node.get(keyword)
                if not isinstance(ref, str):
                    continue
                try:
                    resolved = resolver.lookup(ref)
                except referencing.exceptions.Unresolvable as err:
                    raise ToolDefinitionError(
                        f"tool {tool_name!r}: parameters has a {keyword} that does not resolve:"
                        f" {ref!r} (at {where}; {_unresolved_reason(err)})"
                    ) from None
                target = resolved.contents
                if not isinstance(target, dict | bool):
                    raise ToolDefinitionError(
                        f"tool {tool_name!r}: parameters has a {keyword} {ref!r} (at {where})"
                        f" that points at a {type(target).__name__}, not a schema"
                    )
                if id(target) not in paths:  # a meta-schema, which has no such cycle
                    meta.add(id(node))
                    continue
                following.append(id(target))
                if isinstance(target, dict):
                    targets.add(id(target))
                    if id(target) not in in_place:
                        pending.append((specification.create_resource(target), resolved.resolver))
            if not (legacy and "$ref" in node):
                _check_patterns(node, where, tool_name)
                subs = [node.get(keyword) for keyword in _IN_PLACE_ONE]
                for keyword in _IN_PLACE_LIST:
                    members = node.get(keyword)
                    subs.extend(members if isinstance(members, list) else (members,))
                for keyword in _IN_PLACE_MAP:
                    members = node.get(keyword)
                    subs.extend(members.values() if isinstance(members, dict) else ())
                following.extend(id(sub) for sub in subs if isinstance(sub, dict))
            in_place[id(node)] = following
        for sub in resource.subresources():
            visit(sub, resolver.in_subresource(sub))

    visit(root, _SPECIFICATIONS.combine(_NO_RETRIEVAL).resolver_with_root(root))
    while pending:
        resource, resolver = pending.pop()
        if id(resource.contents) not in in_place:
            visit(resource, resolver)

    # Depth-first over the subschemas that apply to the same value, without recursion: a cycle
    # is refused, and so is a chain longer than MAX_SCHEMA_CHAIN (jsonschema recurses along it).
    chain: dict[int, int] = {}  # a node's longest chain (itself included), once done
    for start in in_place:
        if start in chain:
            continue
        on_path: list[int] = [start]
        stack = [iter(in_place[start])]
        while stack:
            following = next(stack[-1], None)
            if following is None:
                stack.pop()
                node = on_path.pop()
                chain[node] = 1 + max((chain[n] for n in in_place.get(node, ())), default=0)
                if chain[node] > MAX_SCHEMA_CHAIN:
                    raise ToolDefinitionError(
                        f"tool {tool_name!r}: parameters has a chain of more than"
                        f" {MAX_SCHEMA_CHAIN} subschemas that apply to the same value (through"
                        f" $ref, allOf, anyOf, ...), from {paths[node]}"
                    )
            elif following in on_path:
                cycle = [*on_path[on_path.index(following) :], following]
                raise ToolDefinitionError(
                    f"tool {tool_name!r}: parameters has a cycle of references that never moves"
                    " into a property or an item, so validating a value that reaches it would"
                    f" never end: {' -> '.join(paths[step] for step in cycle)}"
                )
            elif following not in chain:
                on_path.append(following)
                stack.append(iter(in_place.get(following, ())))
    return _References(frozenset(targets), frozenset(meta), paths)


_LEGACY: Final = (
    jsonschema.Draft3Validator,
    jsonschema.Draft4Validator,
    jsonschema.Draft6Validator,
    jsonschema.Draft7Validator,
)


def _plain(schema: Mapping[str, Any], tool_name: str) -> dict[str, Any]:
    """A copy of ``schema`` (a tree of plain dicts and lists), or :class:`ToolDefinitionError` if
    it has more than :data:`MAX_SCHEMA_VALUES` values or is nested more than
    :data:`MAX_SCHEMA_DEPTH` levels deep (a schema built in Python may share its parts: each
    counts every time it appears)."""
    count = 0

    def plain(value: Any, depth: int) -> Any:
        nonlocal count
        count += 1
        if count > MAX_SCHEMA_VALUES:
            raise ToolDefinitionError(
                f"tool {tool_name!r}: parameters is too large: more than"
                f" {MAX_SCHEMA_VALUES:,} values (objects, arrays, strings, numbers, ...)"
            )
        if isinstance(value, dict | list):
            if depth >= MAX_SCHEMA_DEPTH:
                raise ToolDefinitionError(
                    f"tool {tool_name!r}: parameters is nested more than"
                    f" {MAX_SCHEMA_DEPTH} levels deep"
                )
            if isinstance(value, dict):
                return {key: plain(item, depth + 1) for key, item in value.items()}
            return [plain(item, depth + 1) for item in value]
        return _copy(value)

    return {key: plain(value, 1) for key, value in schema.items()}


@functools.cache
def _meta_registry() -> referencing.Registry[Any]:
    """jsonschema's meta-schemas as :class:`_Copy` makes them (counted, and without ``$schema``,
    so that checking a schema stays with one counted validator class)."""
    resources = []
    for uri in _SPECIFICATIONS:
        contents = _SPECIFICATIONS.contents(uri)
        cls = jsonschema.validators.validator_for(contents, default=jsonschema.Draft202012Validator)
        counted = _Copy(
            contents,
            has_not="not" in cls.VALIDATORS,
            sort=False,  # the first error is the one jsonschema's check_schema reports
            root_dialect=False,
        )
        specification = referencing.jsonschema.specification_with(contents.get("$schema", ""))
        resources.append((uri, specification.create_resource(counted.root)))
    return referencing.Registry().with_resources(resources).crawl()


def _check_schema(schema: dict[str, Any], cls: Any) -> None:
    """jsonschema's ``cls.check_schema(schema)``, counted."""
    meta_cls = jsonschema.validators.validator_for(cls.META_SCHEMA, default=cls)
    registry = _meta_registry()
    meta = registry.contents(cls.ID_OF(cls.META_SCHEMA).rstrip("#"))
    validator = metered_class(meta_cls)(
        meta, format_checker=format_checker(meta_cls), registry=registry
    )
    error = next(validator.iter_errors(schema), None)
    if error is not None:
        raise jsonschema.SchemaError.create_from(error)


def compile_validator(schema: Mapping[str, Any], *, tool_name: str) -> ArgumentValidator:
    """Compile ``schema`` (a tool's ``parameters``) into an :class:`ArgumentValidator`.

    Raise :class:`ToolDefinitionError` naming the tool and the problem if ``schema`` is not a
    valid JSON Schema (checked by jsonschema's ``check_schema`` with the Draft 2020-12 validator
    class, or the one named by ``$schema``); if it is one that would fail every call that
    reaches some part of it: a ``$ref`` that does not resolve within it (nothing is fetched), one
    that points at something other than a schema, a cycle of references that never moves into
    the value, a pattern RE2 cannot compile; or if it is too large to compile within bounds:
    more than :data:`MAX_SCHEMA_VALUES` values, nesting more than :data:`MAX_SCHEMA_DEPTH`
    levels deep, more than :data:`COMPILE_STEPS` steps of work (or past Python's recursion
    limit)."""
    if not isinstance(schema, Mapping):
        raise ToolDefinitionError(
            f"tool {tool_name!r}: parameters must be a JSON Schema object,"
            f" not {type(schema).__name__}"
        )
    try:
        plain = _plain(schema, tool_name)
        cls = jsonschema.validators.validator_for(plain, default=jsonschema.Draft202012Validator)
        with Budget(COMPILE_STEPS):
            _check_schema(plain, cls)
            references = _check_references(plain, cls, tool_name)
            counted = _Copy(
                plain,
                has_not="not" in cls.VALIDATORS,
                targets=references.targets,
                meta=references.meta,
            )
            for target in references.targets:
                if target not in counted.nodes:
                    raise ToolDefinitionError(
                        f"tool {tool_name!r}: parameters has a $ref to {references.paths[target]},"
                        " which is data (an enum's, a const, a default, an example), not a schema"
                    )
            return ArgumentValidator(plain, cls, counted)
    except jsonschema.SchemaError as err:
        raise ToolDefinitionError(
            f"tool {tool_name!r}: parameters is not a valid JSON Schema: {err.message}"
            f" (at {err.json_path})"
        ) from None
    except OverBudget:
        raise ToolDefinitionError(
            f"tool {tool_name!r}: parameters is too large to compile: checking it took more"
            f" than {COMPILE_STEPS:,} steps"
        ) from None
    except RecursionError:
        raise ToolDefinitionError(
            f"tool {tool_name!r}: parameters is nested too deeply to compile"
            " (past Python's recursion limit)"
        ) from None
