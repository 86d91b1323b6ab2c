"""JSON Schema validation whose work is counted, for schemas and arguments nobody vetted.

A tool's schema may come from an MCP server, and its arguments come from a model: jsonschema on
its own would let either freeze the Trio run, which validates in the loop task. ``$ref``\\ s
shared by the members of ``anyOf`` make the work exponential in the schema's size (``d0`` →
``anyOf[d1, d1]``, ``d1`` → ``anyOf[d2, d2]``, ...), and a ``pattern`` such as ``^(a+)+$``
makes Python's ``re`` backtrack for hours on ``"aaaa...!"``. This module gives
:mod:`trio_agent._validation` what it needs to bound both:

- **Patterns in linear time.** ``pattern`` and ``patternProperties`` (which
  ``additionalProperties`` and ``unevaluatedProperties`` consult too) match with RE2, whose time
  is linear in the text whatever the pattern (with a factor of up to the pattern's program size
  when its DFA gives up, which is counted). :func:`regex_problem` says why RE2 refuses a pattern
  (a backreference, a lookaround, a repetition past 1,000, a program past 256 KiB), so that a
  schema with one is refused when the tool is made.
- **Steps.** :func:`metered_class` extends a jsonschema validator class so that its work is
  counted: a schema node visited costs :func:`node_steps` (the descent into it, each keyword's
  application and the size of its value), through the :data:`COST` keyword that
  :mod:`trio_agent._validation` puts first in every node of the schema it validates with; and
  every piece of work whose size the arguments choose costs too: each error made (its message's
  length, which holds a repr of the value) and each level it goes up, each character a pattern
  or a format reads, each node compared by ``enum``/``const``/``uniqueItems`` (``uniqueItems``
  in linear time: jsonschema compares every pair of objects), each subschema the
  ``unevaluated*`` keywords look through (jsonschema's search, ported with counting and sets),
  each entry of the dynamic scope a ``$dynamicRef`` walks, each node of a value checked against
  a JSON Schema meta-schema (:data:`META_COST`). The steps are taken from this thread's
  :class:`Budget`; past it :class:`OverBudget` is raised, from inside jsonschema, and the caller
  turns it into an error. Outside a budget nothing is limited.

A step is under a microsecond of work: see :mod:`trio_agent._validation` for the budgets and how
they were measured.
"""

from __future__ import annotations

import collections
import functools
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final

import jsonschema  # type: ignore[import-untyped]  # ships no type information
import re2  # type: ignore[import-untyped]  # google-re2 ships no type information
import referencing.jsonschema

__all__ = [
    "CHARS_PER_STEP",
    "COST",
    "META_COST",
    "Budget",
    "OverBudget",
    "charge",
    "format_checker",
    "metered_class",
    "node_steps",
    "regex_problem",
]

# Characters of a message, a pattern's text or a format's text that cost one step (a message's
# repr builds at up to ~20 ns a character, with what making and keeping it costs besides).
CHARS_PER_STEP: Final = 16
# What jsonschema's descent into a subschema costs (a new validator object, its resolver, its
# list of keywords), what making an error costs, what resolving a reference costs (a URI
# joined, a registry and a pointer walked), and what RE2's search costs beyond reading the text
# (google-re2's Python wrapper), in steps.
DESCEND_STEPS: Final = 10
ERROR_STEPS: Final = 10
LOOKUP_STEPS: Final = 5
SEARCH_STEPS: Final = 10
# Characters times program instructions that cost a step in a search (RE2 without its DFA
# reads a character in 6-7 ns per instruction).
_CHARS_TIMES_PROGRAM: Final = 128
_UNMETERED: Final = 1 << 62


class OverBudget(Exception):
    """The steps of this thread's :class:`Budget` are spent."""


class _Meter(threading.local):
    left: int = _UNMETERED


_METER: Final = _Meter()


def charge(steps: int) -> None:
    """Take ``steps`` from this thread's budget; :class:`OverBudget` once it is spent."""
    meter = _METER
    meter.left -= steps
    if meter.left < 0:
        raise OverBudget


class Budget:
    """``with Budget(n):`` the charges within it may spend ``n`` steps (this thread's: several
    Trio runs may validate in several threads at once; a budget entered inside another replaces
    it until it exits)."""

    __slots__ = ("_outer", "steps")

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self._outer = _UNMETERED

    def __enter__(self) -> Budget:
        self._outer = _METER.left
        _METER.left = self.steps
        return self

    def __exit__(self, *exc_info: object) -> None:
        _METER.left = self._outer


# --------------------------------------------------------------------------- RE2

_RE2_OPTIONS: Final = re2.Options()
_RE2_OPTIONS.log_errors = False  # the reason is in the exception: nothing on stderr
# A compiled pattern holds its program and a DFA cache of at most this much; past it a pattern is
# refused ("pattern too large") and a search goes on without the DFA (slower, still linear).
_RE2_OPTIONS.max_mem = 1 << 18
# JavaScript's \uXXXX and \u{X...} (which RE2 spells \x{...}), after an even run of backslashes.
_JS_ESCAPE: Final = re.compile(r"(?<!\\)((?:\\\\)*)\\u(?:\{([0-9a-fA-F]{1,6})\}|([0-9a-fA-F]{4}))")


def _re2_syntax(pattern: str) -> bytes:
    text = _JS_ESCAPE.sub(lambda m: f"{m[1]}\\x{{{m[2] or m[3]}}}", pattern)
    return text.encode("utf-8", "surrogatepass")


_PATTERN_STEPS: Final = 50
"""What compiling a pattern costs besides its size (about 30 µs for a small one)."""
_INSTRUCTIONS_PER_STEP: Final = 4
"""Instructions of a compiled pattern that cost a step to compile (up to ~140 ns each)."""
_REFUSED_PATTERN_STEPS: Final = 2_000
"""What a pattern RE2 refuses costs: one that is too large fails only once its program has
outgrown ``max_mem`` (about 1.4 ms)."""
_CACHED_PATTERNS: Final = 128
"""Compiled patterns kept for the next use (each holds at most ``max_mem``)."""
_compiled: collections.OrderedDict[str, Any] = collections.OrderedDict()
_compiled_lock = threading.Lock()  # several Trio runs may validate in several threads


def regex(pattern: str) -> Any:
    """``pattern`` compiled by RE2 (``re2.error`` if RE2 refuses it: see :func:`regex_problem`).

    It matches UTF-8 bytes: search ``text.encode("utf-8", "surrogatepass")``, which takes a
    lone surrogate (JSON's ``"\\ud800"``) too.

    The last :data:`_CACHED_PATTERNS` patterns used are kept compiled. Compiling one is
    charged (a schema of many patterns would otherwise make every call compile them all,
    uncounted): :data:`_PATTERN_STEPS`, a step per :data:`CHARS_PER_STEP` characters of it
    and per :data:`_INSTRUCTIONS_PER_STEP` instructions of its program, or
    :data:`_REFUSED_PATTERN_STEPS` when RE2 refuses it.
    """
    with _compiled_lock:
        compiled = _compiled.get(pattern)
        if compiled is not None:
            _compiled.move_to_end(pattern)
            return compiled
    charge(_PATTERN_STEPS + len(pattern) // CHARS_PER_STEP)
    try:
        compiled = re2.compile(_re2_syntax(pattern), _RE2_OPTIONS)
    except re2.error:
        charge(_REFUSED_PATTERN_STEPS)
        raise
    charge(compiled.programsize // _INSTRUCTIONS_PER_STEP)
    with _compiled_lock:
        _compiled[pattern] = compiled
        if len(_compiled) > _CACHED_PATTERNS:
            _compiled.popitem(last=False)
    return compiled


def regex_problem(pattern: str) -> str | None:
    """Why RE2 cannot compile ``pattern`` (RE2's own words), or None if it can."""
    try:
        regex(pattern)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "refused"
        return reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
    return None


def _utf8(text: str) -> bytes:
    charge(len(text) // CHARS_PER_STEP)
    return text.encode("utf-8", "surrogatepass")


# --------------------------------------------------------------------------- keywords

_Keyword = Callable[[Any, Any, Any, Any], Iterator[Any] | None]
_error = jsonschema.ValidationError


class _Key:
    """A dict key no JSON document can hold (it is not a string)."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return f"<{self._name}>"


# The keyword that charges a schema node's own size when jsonschema visits it: the first key of
# every node of the schema that trio_agent._validation validates with. Its value is the steps.
COST: Final = _Key("cost")
# The key, beside a `$ref` to a JSON Schema meta-schema, whose value is what the reference
# charges per node of the instance for jsonschema's own (uncounted) validation against the
# meta-schema. Meta-schemas are fixed and small: that validation is linear in the instance.
META_COST: Final = _Key("meta-cost")


def _cost(validator: Any, steps: int, instance: Any, schema: Any) -> None:
    charge(steps)


def _reference(fn: _Keyword) -> _Keyword:
    def keyword(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any] | None:
        if (per_node := schema.get(META_COST)) is not None:
            charge(per_node * _nodes(instance))
        return fn(validator, value, instance, schema)

    return keyword


def _nodes(value: Any) -> int:
    """The size of a JSON value (nodes, and characters of strings and keys), charged once
    counted (the walk is linear in the value, which the model's arguments bound)."""
    stack = [value]
    total = 0
    while stack:
        item = stack.pop()
        total += 1
        if isinstance(item, str):
            total += len(item) // CHARS_PER_STEP
        elif isinstance(item, dict):
            total += sum(len(key) // CHARS_PER_STEP for key in item if isinstance(key, str))
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    charge(total)
    return total


def node_steps(schema: dict[Any, Any]) -> int:
    """What visiting a schema node costs, besides what its keywords do with the instance: the
    descent into it, and for each keyword its application and a step per item of its value
    (for a reference, its lookup). The value of the node's :data:`COST`."""
    steps = DESCEND_STEPS
    for key, value in schema.items():
        steps += 1
        if isinstance(value, list | dict):
            steps += len(value)
        elif key in _REFERENCES and isinstance(value, str):
            steps += LOOKUP_STEPS + len(value) // CHARS_PER_STEP
    return steps


_REFERENCES: Final = frozenset({"$ref", "$dynamicRef", "$recursiveRef"})


def _counted(fn: _Keyword, fixed: Callable[[Any], int] | None) -> _Keyword:
    """``fn``, costing ``fixed(value)`` per application if given (else its node's :data:`COST`
    has paid for it), and two steps per error that comes through it (jsonschema touches an
    error at every level it goes up), and for each error it makes :data:`ERROR_STEPS`, a step
    per :data:`CHARS_PER_STEP` characters of the error's message (which holds a repr of the
    instance) and a step per error of its context."""

    def keyword(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if fixed is not None:
            charge(fixed(value))
        errors = fn(validator, value, instance, schema)
        if errors is None:
            return
        for error in errors:
            attributes = error.__dict__
            if "_metered" in attributes:  # made below, paid for there
                charge(2)
            else:
                attributes["_metered"] = True
                charge(ERROR_STEPS + len(error.message) // CHARS_PER_STEP + len(error.context))
            yield error

    return keyword


def _ref_length(ref: Any) -> int:
    return len(ref) // CHARS_PER_STEP if isinstance(ref, str) else 0


def _scope_walk(fn: _Keyword) -> _Keyword:
    """A dynamic reference (``$dynamicRef``, ``$recursiveRef``) may walk the whole dynamic
    scope: a step per entry, counted before it does."""

    def keyword(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any] | None:
        charge(sum(1 for _ in validator._resolver.dynamic_scope()))
        return fn(validator, value, instance, schema)

    return keyword


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not _matches((pattern,), instance):
        yield _error(f"{instance!r} does not match {pattern!r}")


def _matches(patterns: Iterator[Any] | Sequence[Any], key: str) -> bool:
    """Whether one of ``patterns`` matches somewhere in ``key``.

    RE2 is linear in the text, but with a factor of up to the program's size when its DFA gives
    up (``((a|b){1,30}){1,30}c`` reads a character in ~25 µs: 6-7 ns per instruction of its
    3,664): a search costs :data:`SEARCH_STEPS` and a step per :data:`_CHARS_TIMES_PROGRAM`
    characters times instructions."""
    text = _utf8(key)
    for pattern in patterns:
        compiled = regex(pattern)
        charge(SEARCH_STEPS + len(text) * compiled.programsize // _CHARS_TIMES_PROGRAM)
        if compiled.search(text):
            return True
    return False


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _matches((pattern,), key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional(instance: Any, schema: Any) -> Iterator[str]:
    """jsonschema's ``find_additional_properties``, with RE2."""
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    for key in instance:
        charge(1)
        if key not in properties and not (patterns and _matches(patterns, key)):
            yield key


def _extras(extras: Sequence[Any]) -> tuple[str, str]:
    return ", ".join(repr(extra) for extra in extras), "was" if len(extras) == 1 else "were"


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    extras = set(_additional(instance, schema))
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(each) for each in sorted(extras))
            patterns = ", ".join(repr(each) for each in sorted(schema["patternProperties"]))
            yield _error(f"{joined} {verb} not match any of the regexes: {patterns}")
        else:
            shown, verb = _extras(sorted(extras, key=str))
            yield _error(f"Additional properties are not allowed ({shown} {verb} unexpected)")


_SCALARS: Final = frozenset({int, float, bool, type(None)})
_TRUE: Final = object()
_FALSE: Final = object()


def _unbool(value: Any) -> Any:
    return _TRUE if value is True else _FALSE if value is False else value


def _equal(one: Any, two: Any) -> bool:
    """jsonschema's ``equal`` (``True`` is not 1; sequences and mappings compared item by
    item), two steps per node compared."""
    charge(2)
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        if isinstance(one, str) and isinstance(two, str):
            charge(min(len(one), len(two)) // CHARS_PER_STEP)
        return bool(one == two)
    if type(one) in _SCALARS and type(two) in _SCALARS:  # the common case, without ABCs
        return bool(_unbool(one) == _unbool(two))
    if isinstance(one, Sequence) and isinstance(two, Sequence):
        return len(one) == len(two) and all(_equal(a, b) for a, b in zip(one, two, strict=True))
    if isinstance(one, Mapping) and isinstance(two, Mapping):
        return len(one) == len(two) and all(
            key in two and _equal(value, two[key]) for key, value in one.items()
        )
    return bool(_unbool(one) == _unbool(two))


def _enum(validator: Any, enums: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if all(not _equal(each, instance) for each in enums):
        yield _error(f"{instance!r} is not one of {enums!r}")


def _const(validator: Any, const: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not _equal(instance, const):
        yield _error(f"{const!r} was expected")


def _identity(value: Any) -> Any:
    """A hashable stand-in for a JSON value, equal for values jsonschema's ``equal`` finds
    equal (dict order ignored, ``True`` not 1, ``1`` and ``1.0`` alike); a step per node."""
    charge(1)
    kind = type(value)
    if kind is bool:
        return (bool, value)
    if kind is str:
        charge(len(value) // CHARS_PER_STEP)
        return (str, value)
    if kind in _SCALARS:
        return (float, value)
    if kind is dict:
        return (dict, frozenset([(key, _identity(item)) for key, item in value.items()]))
    if kind is list:
        return (list, tuple([_identity(item) for item in value]))
    if isinstance(value, str):
        charge(len(value) // CHARS_PER_STEP)
        return (str, value)
    if isinstance(value, Mapping):
        return (dict, frozenset((key, _identity(item)) for key, item in value.items()))
    if isinstance(value, Sequence):
        return (list, tuple(_identity(item) for item in value))
    return (float, value)  # a number (or None): hashed as Python compares it


def _unique(items: Sequence[Any]) -> bool:
    seen: set[Any] = set()
    for item in items:
        identity = _identity(item)
        if identity in seen:
            return False
        seen.add(identity)
    return True


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
    # jsonschema sorts the items, or compares every pair when they do not sort (objects):
    # quadratic. This is linear, with the same answers (an unhashable non-JSON item, which only
    # prepare_arguments can make, falls back to jsonschema's own check).
    if not (unique and validator.is_type(instance, "array")):
        return
    try:
        duplicates = not _unique(instance)
    except TypeError:
        original = jsonschema.Draft202012Validator.VALIDATORS["uniqueItems"]
        duplicates = next(original(validator, unique, instance, schema), None) is not None
    if duplicates:
        yield _error(f"{instance!r} has non-unique elements")


def _format_of(original: _Keyword) -> _Keyword:
    def format_(validator: Any, format: Any, instance: Any, schema: Any) -> Iterator[Any] | None:
        if isinstance(instance, str):
            charge(len(instance) // CHARS_PER_STEP)
        return original(validator, format, instance, schema)

    return format_


def _is_regex(instance: object) -> bool:
    # What Python's re or RE2 compiles (a schema's patterns are matched with RE2, and may use
    # JavaScript's \u{...}, which Python's re does not know). re.compile reads a character in a
    # few microseconds at worst (and does not cache a failure): 4 steps each. A pattern nested
    # past Python's recursion limit is not one for re.
    if isinstance(instance, str):
        charge(4 * len(instance))
        try:
            re.compile(instance)
        except (re.error, RecursionError):
            re2.compile(_re2_syntax(instance), _RE2_OPTIONS)  # not cached: the model's text
    return True


@functools.cache
def format_checker(base: Any) -> Any:
    """``base``'s format checker, with the ``regex`` format counted, and a text Python's ``re``
    refuses but RE2 compiles taken too."""
    checker = jsonschema.FormatChecker(())
    checker.checkers = dict(base.FORMAT_CHECKER.checkers)
    if "regex" in checker.checkers:
        checker.checkers["regex"] = (_is_regex, (re2.error,))
    return checker


# ------------------------------------------------------------------ unevaluated* (jsonschema's)


def _lookup(validator: Any, ref: str) -> tuple[Any, Any]:
    charge(LOOKUP_STEPS + _ref_length(ref))
    resolved = validator._resolver.lookup(ref)
    return validator.evolve(schema=resolved.contents, _resolver=resolved.resolver), resolved


def _valid(validator: Any, instance: Any, schema: Any) -> bool:
    return next(validator.descend(instance, schema), None) is None


def _evaluated_items(validator: Any, instance: Any, schema: Any, legacy: bool) -> set[int]:
    """jsonschema's ``find_evaluated_item_indexes_by_schema`` (2020-12, or 2019-09 when
    ``legacy``), a step per subschema it looks through, a set rather than a list."""
    charge(1 + (len(schema) if isinstance(schema, dict) else 0))
    if validator.is_type(schema, "boolean"):
        return set()
    everything = set(range(len(instance)))
    evaluated: set[int] = set()
    if not legacy and "items" in schema:
        return everything
    for inner, subschema in _referenced(validator, schema, legacy):
        evaluated |= _evaluated_items(inner, instance, subschema, legacy)
    if legacy and "items" in schema:
        if "additionalItems" in schema or validator.is_type(schema["items"], "object"):
            return everything
        evaluated |= set(range(len(schema["items"])))
    if not legacy and "prefixItems" in schema:
        evaluated |= set(range(len(schema["prefixItems"])))
    if "if" in schema:
        if validator.evolve(schema=schema["if"]).is_valid(instance):
            evaluated |= _evaluated_items(validator, instance, schema["if"], legacy)
            if "then" in schema:
                evaluated |= _evaluated_items(validator, instance, schema["then"], legacy)
        elif "else" in schema:
            evaluated |= _evaluated_items(validator, instance, schema["else"], legacy)
    for keyword in ("contains", "unevaluatedItems"):
        if keyword in schema:
            check = validator.evolve(schema=schema[keyword])
            evaluated |= {index for index, item in enumerate(instance) if check.is_valid(item)}
    for keyword in ("allOf", "oneOf", "anyOf"):
        for subschema in schema.get(keyword, ()):
            if _valid(validator, instance, subschema):
                evaluated |= _evaluated_items(validator, instance, subschema, legacy)
    return evaluated


def _referenced(validator: Any, schema: Any, legacy: bool) -> list[tuple[Any, Any]]:
    """The validators and subschemas that a node's ``$ref`` and its dynamic reference
    (``$dynamicRef``, or ``$recursiveRef`` when ``legacy``) lead to; the walk of the dynamic
    scope charged, a step per entry."""
    found: list[tuple[Any, Any]] = []
    ref = schema.get("$ref")
    if ref is not None:
        inner, resolved = _lookup(validator, ref)
        found.append((inner, resolved.contents))
    dynamic = "$recursiveRef" if legacy else "$dynamicRef"
    if dynamic in schema:
        charge(sum(1 for _ in validator._resolver.dynamic_scope()))
        if legacy:
            resolved = referencing.jsonschema.lookup_recursive_ref(validator._resolver)
            inner = validator.evolve(schema=resolved.contents, _resolver=resolved.resolver)
        else:
            inner, resolved = _lookup(validator, schema[dynamic])
        found.append((inner, resolved.contents))
    return found


def _evaluated_keys(validator: Any, instance: Any, schema: Any, legacy: bool) -> set[str]:
    """jsonschema's ``find_evaluated_property_keys_by_schema`` (2020-12, or 2019-09 when
    ``legacy``), a step per subschema it looks through, a set rather than a list, RE2."""
    charge(1 + (len(schema) if isinstance(schema, dict) else 0))
    if validator.is_type(schema, "boolean"):
        return set()
    evaluated: set[str] = set()
    for inner, subschema in _referenced(validator, schema, legacy):
        evaluated |= _evaluated_keys(inner, instance, subschema, legacy)
    if legacy:
        for keyword in ("properties", "additionalProperties", "unevaluatedProperties"):
            if keyword in schema:
                value = schema[keyword]
                charge(len(instance) + (len(value) if isinstance(value, dict) else 0))
                if validator.is_type(value, "boolean") and value:
                    evaluated |= set(instance)
                elif validator.is_type(value, "object"):
                    evaluated |= {key for key in value if key in instance}
    else:
        properties = schema.get("properties")
        if validator.is_type(properties, "object"):
            charge(min(len(properties), len(instance)))
            evaluated |= properties.keys() & instance.keys()
        for keyword in ("additionalProperties", "unevaluatedProperties"):
            if (subschema := schema.get(keyword)) is None:
                continue
            evaluated |= {
                key for key, value in instance.items() if _valid(validator, value, subschema)
            }
    if "patternProperties" in schema:
        patterns = list(schema["patternProperties"])
        evaluated |= {key for key in instance if _matches(patterns, key)}
    if "dependentSchemas" in schema:
        for key, subschema in schema["dependentSchemas"].items():
            charge(1)
            if key in instance:
                evaluated |= _evaluated_keys(validator, instance, subschema, legacy)
    for keyword in ("allOf", "oneOf", "anyOf"):
        for subschema in schema.get(keyword, ()):
            if _valid(validator, instance, subschema):
                evaluated |= _evaluated_keys(validator, instance, subschema, legacy)
    if "if" in schema:
        if validator.evolve(schema=schema["if"]).is_valid(instance):
            evaluated |= _evaluated_keys(validator, instance, schema["if"], legacy)
            if "then" in schema:
                evaluated |= _evaluated_keys(validator, instance, schema["then"], legacy)
        elif "else" in schema:
            evaluated |= _evaluated_keys(validator, instance, schema["else"], legacy)
    return evaluated


def _unevaluated_items_of(legacy: bool) -> _Keyword:
    def unevaluated_items(
        validator: Any, unevaluated: Any, instance: Any, schema: Any
    ) -> Iterator[Any]:
        if not validator.is_type(instance, "array"):
            return
        evaluated = _evaluated_items(validator, instance, schema, legacy)
        extras = [item for index, item in enumerate(instance) if index not in evaluated]
        if extras:
            shown, verb = _extras(extras)
            yield _error(f"Unevaluated items are not allowed ({shown} {verb} unexpected)")

    return unevaluated_items


def _unevaluated_properties_of(legacy: bool) -> _Keyword:
    def unevaluated_properties(
        validator: Any, unevaluated: Any, instance: Any, schema: Any
    ) -> Iterator[Any]:
        if not validator.is_type(instance, "object"):
            return
        evaluated = _evaluated_keys(validator, instance, schema, legacy)
        extras = [
            key
            for key in instance
            if key not in evaluated and not _valid(validator, instance[key], unevaluated)
        ]
        if extras and unevaluated is False:
            shown, verb = _extras(sorted(extras, key=str))
            yield _error(f"Unevaluated properties are not allowed ({shown} {verb} unexpected)")
        elif extras:
            shown, verb = _extras(extras)
            yield _error(
                "Unevaluated properties are not valid under the given schema"
                f" ({shown} {verb} unevaluated and invalid)"
            )

    return unevaluated_properties


# --------------------------------------------------------------------------- the classes


@functools.cache
def metered_class(base: Any) -> Any:
    """``base`` (a jsonschema validator class) with every keyword counted as the module
    docstring says, RE2 for patterns, the :data:`COST` keyword, and :data:`META_COST` heeded."""
    legacy = "$recursiveRef" in base.VALIDATORS
    # Drafts 3 to 7 apply only the $ref of a node that has one, not its COST.
    ref_only = "$dynamicRef" not in base.VALIDATORS and not legacy

    def ref_steps(ref: Any) -> int:  # that node's visit and the lookup
        return DESCEND_STEPS + 1 + LOOKUP_STEPS + _ref_length(ref)

    replacements: dict[str, _Keyword] = {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
        "enum": _enum,
        "const": _const,
        "uniqueItems": _unique_items,
        "unevaluatedItems": _unevaluated_items_of(legacy),
        "unevaluatedProperties": _unevaluated_properties_of(legacy),
    }
    keywords: dict[Any, _Keyword] = {}
    for keyword, original in base.VALIDATORS.items():
        fn = replacements.get(keyword, original)
        if keyword == "format":
            fn = _format_of(original)
        elif keyword in ("$dynamicRef", "$recursiveRef"):
            fn = _reference(_scope_walk(original))
        elif keyword == "$ref":
            fn = _reference(original)
        keywords[keyword] = _counted(fn, ref_steps if keyword == "$ref" and ref_only else None)
    keywords[COST] = _cost
    return jsonschema.validators.extend(base, keywords)
