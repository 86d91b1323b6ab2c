"""JSON in pi's camelCase shape, both ways: :func:`dumps` and :func:`loads`.

One private cattrs converter knows every message, content block, usage and
result class, and every event (events are written, not read). Field names
become camelCase (``tool_call_id`` → ``toolCallId``), each content block
carries its ``type`` and each message its ``role``, and a field that is
``None`` (``errorMessage``, a signature, a tool result's ``details``) is left
out, as pi leaves out ``undefined``. So a transcript saved here can be read by
pi-based tools and the other way round.

What :func:`dumps` writes, :func:`loads` reads back, whatever the values: JSON
has no place for some of them, and they are written as JSON can carry them
(numbers as pi's ``JSON.stringify`` writes them), or refused. A number that is
not finite (NaN, an infinity) is written as ``null``, and so is an integer too
long for Python to write as text (more than ``sys.get_int_max_str_digits()``
digits, 4,300 by default; no float holds one). A lone surrogate (half of a
UTF-16 pair, which no UTF-8 text can hold: a server's ``"\\ud800"``, a file
name that is not UTF-8 read by Python) is written as U+FFFD (the replacement
character), and two halves of a pair as the character they make. A free-form
value (a tool call's arguments, a result's ``details``, an event's ``args``)
may nest :data:`MAX_NESTING` arrays and objects deep; deeper, :func:`dumps`
raises ``ValueError`` naming it.

Reading is strict: unknown keys, unknown roles or block types, and values of
the wrong type are a :class:`~trio_agent.TranscriptError` listing every
problem with its path (``$[3].content[0].text``). Missing optional keys take
their defaults (a missing timestamp is now). A transcript is untrusted input
(a file, a peer's message), so whatever the text, :func:`loads` returns or
raises ``TranscriptError``: text that is not JSON (``NaN`` and ``Infinity``
included, which pi's ``JSON.parse`` refuses too), nesting deeper than Python's
parser can follow, numbers no float can hold, and wrong types at any depth.
It repairs what :func:`dumps` would have: a lone surrogate in a string (a
``\\udXXX`` escape, as ``JSON.stringify`` writes one) is read as U+FFFD, and a
``null`` in a number field (a cost: where ``JSON.stringify`` wrote a NaN) as NaN.

What a pi 1.6.0 transcript says of a reply or a tool call that trio_agent does not
read (a reply's ``responseModel``, ``rawStopReason``, ``diagnostics`` and
``durationMs``; a call's ``namespace`` and ``argumentsError``) is kept in its
``extra``, checked for its JSON type, and written back as it was read.
"""

from __future__ import annotations

import json
import math
import re
import reprlib
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

import attrs
import cattrs
from cattrs.cols import homogenous_tuple_structure_factory, list_structure_factory
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override
from cattrs.v import format_exception

from ._errors import TranscriptError
from ._events import (
    AgentEnd,
    AgentStart,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    StreamDone,
    StreamError,
    StreamStart,
    TextDelta,
    TextEnd,
    TextStart,
    ThinkingDelta,
    ThinkingEnd,
    ThinkingStart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    TurnEnd,
    TurnStart,
)
from ._messages import (
    AgentMessage,
    AssistantContent,
    AssistantMessage,
    Cost,
    ErrorKind,
    ImageContent,
    Message,
    ReplyThinkingLevel,
    SystemContent,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolDeclaration,
    ToolReference,
    ToolResult,
    ToolResultMessage,
    Usage,
    UserContent,
    UserMessage,
)

__all__ = ["dumps", "from_json", "loads", "register_message_kind", "to_json"]

MAX_NESTING = 256
"""How many arrays and objects deep a free-form value (a tool call's arguments, a result's
``details``, an event's ``args``) may nest for :func:`dumps` to write it. Deeper than any a
server can send (the providers' parser stops at about 200 levels), and shallow enough for
:func:`loads` to read back from any sensible depth of the stack."""

T = TypeVar("T")

_converter = cattrs.Converter(forbid_extra_keys=True)


_PREVIEW = reprlib.Repr()
_PREVIEW.maxlevel = 2
_PREVIEW.maxstring = _PREVIEW.maxother = _PREVIEW.maxlong = 60


def _shown(value: Any) -> str:
    """``int 5``, ``str 'hi'``, ``list [[...]]``: a value's type and a short ``repr`` of it, for
    error messages. Bounded in depth and length, so a huge or deeply nested value costs little
    and cannot exhaust the stack."""
    try:
        text = _PREVIEW.repr(value)
    except ValueError:  # an int longer than Python converts to text
        text = "..."
    return f"{type(value).__name__} {text}"


def _strict(kind: type[Any], what: str, *accepted: type[Any]) -> Callable[[Any, Any], Any]:
    """A structure hook taking only JSON values of ``kind``.

    cattrs' default is ``kind(value)``, which would read ``5`` as ``"5"`` and
    ``"false"`` as ``True``: a wrong type must be an error, not a guess.
    """

    def structure(value: Any, _: Any) -> Any:
        if not isinstance(value, accepted) or (isinstance(value, bool) and kind is not bool):
            raise TypeError(f"expected {what}, got {_shown(value)}")
        return kind(value)

    return structure


def _number(value: Any, _: Any) -> float:
    """A structure hook for ``float`` fields: a finite JSON number, or ``null`` for NaN.

    ``null`` is what :func:`dumps` (and ``JSON.stringify``) write for a number that is
    not finite: it reads back as NaN. A number that is not finite in the text
    (``1e999`` parses as an infinity) is refused; so is an integer past a float's
    range, which has no float to become.
    """
    if value is None:
        return math.nan
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise TypeError(f"expected a number, got {_shown(value)}")
    try:
        number = float(value)
    except OverflowError:
        raise ValueError(f"expected a number that fits a float, got {_shown(value)}") from None
    if not math.isfinite(number):
        raise ValueError(f"expected a finite number, got {_shown(value)}")
    return number


def _json_array(factory: Callable[[Any, Any], Any]) -> Callable[[Any], Any]:
    """Wrap a cattrs sequence hook factory so that only a JSON array is accepted.

    cattrs structures any iterable: an object would be read as its keys (and
    ``{}`` as an empty transcript), a string as its characters.
    """

    def make(into: Any) -> Callable[[Any, Any], Any]:
        inner = factory(into, _converter)

        def structure(value: Any, cls: Any) -> Any:
            if not isinstance(value, list | tuple):
                raise TypeError(f"expected a JSON array, got {_shown(value)}")
            return inner(value, cls)

        return structure

    return make


# Registered before any class hook is generated (they capture their fields' hooks).
_converter.register_structure_hook(str, _strict(str, "a string", str))
_converter.register_structure_hook(int, _strict(int, "an integer", int))
_converter.register_structure_hook(float, _number)
_converter.register_structure_hook(bool, _strict(bool, "true or false", bool))


def _is_list(into: object) -> bool:
    return typing.get_origin(into) is list


def _is_homogenous_tuple(into: object) -> bool:
    return typing.get_origin(into) is tuple and typing.get_args(into)[1:] == (...,)


_converter.register_structure_hook_factory(_is_list, _json_array(list_structure_factory))
_converter.register_structure_hook_factory(
    _is_homogenous_tuple, _json_array(homogenous_tuple_structure_factory)
)

# Keys left out of the JSON when they hold this value (pi's optional fields).
_OMITTED_WHEN: dict[str, object] = {
    "textSignature": None,
    "thinkingSignature": None,
    "thoughtSignature": None,
    "redacted": False,
    "errorMessage": None,
    "errorKind": None,
    "httpStatus": None,
    "retryAfter": None,
    "responseId": None,
    "providerThinkingLevel": None,
    "details": None,
    "usage": None,
    "terminate": None,
    "cacheWrite1h": 0,
    "thinkingLevel": None,
    "reasoning": None,
    "totalFromProvider": False,
    "sections": None,
    "constrainedSampling": None,
    "structuredContent": None,
    "durationMs": None,
}
# Keys left out of the JSON when they hold an empty list (pi leaves out an empty tool change).
_OMITTED_WHEN_EMPTY = ("toolsAdded", "toolsRemoved")
_OMITTED_IN: dict[type[Any], dict[str, object]] = {}
"""Keys left out of one class's JSON when they hold this value (filled in below)."""


_LONG_INT_BITS = 14_000  # fewer bits: fewer than 4,300 digits, Python's default limit


def _integer(value: int) -> int | None:
    """``value``, or ``None`` when it is too long for Python to write as text."""
    if value.bit_length() <= _LONG_INT_BITS:
        return value
    try:
        str(value)
    except ValueError:  # more digits than sys.get_int_max_str_digits()
        return None
    return value


def _too_deep(what: str, value: Any, limit: int) -> ValueError:
    return ValueError(
        f"cannot write {what} as JSON: it is nested deeper than {limit} arrays and objects"
        f" ({_shown(value)})"
    )


def _plain(value: Any, what: str, limit: int = MAX_NESTING) -> Any:
    """``value`` (any JSON-like value) as plain JSON data that :func:`loads` reads back.

    A copy, made without recursion: a number that is not finite, and an integer too long
    to write, become ``None``; a mapping becomes a dict, a list, tuple or other sequence
    a list; anything else (a message, a block) what the converter makes of it. Nested
    deeper than ``limit`` arrays and objects, ``ValueError`` naming ``what``.
    """
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return value
    holder: list[Any] = [None]
    stack: list[tuple[Any, Any, Any, int]] = [(value, holder, 0, 0)]
    while stack:
        item, into, key, depth = stack.pop()
        kind = type(item)
        if kind is str or kind is bool or item is None:
            into[key] = item
        elif kind is int:
            into[key] = _integer(item)
        elif kind is float:
            into[key] = item if math.isfinite(item) else None
        elif isinstance(item, Mapping):
            if depth == limit:
                raise _too_deep(what, value, limit)
            mapping = dict.fromkeys(item)
            into[key] = mapping
            stack.extend((inner, mapping, name, depth + 1) for name, inner in item.items())
        elif isinstance(item, list | tuple) or (
            isinstance(item, Sequence) and not isinstance(item, str | bytes | bytearray)
        ):
            if depth == limit:
                raise _too_deep(what, value, limit)
            items = [None] * len(item)
            into[key] = items
            stack.extend((inner, items, index, depth + 1) for index, inner in enumerate(item))
        elif isinstance(item, str | int):  # a str or int enum: written as its value
            into[key] = item
        elif isinstance(item, float):
            into[key] = item if math.isfinite(item) else None
        else:
            into[key] = _converter.unstructure(item)
    return holder[0]


def _free_form(what: str) -> Callable[[Any], Any]:
    """The unstructure hook of a free-form field (``details``, ``arguments``, ``args``)."""

    def unstructure(value: Any) -> Any:
        return _plain(value, what)

    return unstructure


def _is_free_form(into: Any) -> bool:
    return (
        into is Any
        or (typing.get_origin(into) is dict and typing.get_args(into)[1:] == (Any,))
        or into == tuple[Any, ...] | None
    )


_KEYS: dict[tuple[type[Any], str], str] = {
    (Usage, "cache_write_long"): "cacheWrite1h",
    (ToolResultMessage, "duration"): "durationMs",
}
"""Fields whose JSON key is pi's own name, not their name in camelCase."""
_KEY_NAMES = {name: key for (_, name), key in _KEYS.items()}
"""The same keys by field name, for the paths of error messages."""


_EXTRA_KEYS: dict[type[Any], dict[str, type | tuple[type, ...]]] = {
    AssistantMessage: {
        "responseModel": str,
        "rawStopReason": str,
        "diagnostics": list,
        "durationMs": (int, float),
    },
    ToolCall: {"namespace": str, "argumentsError": str},
}
"""The keys a pi 1.6.0 transcript may have on a class that trio_agent does not read, with
the JSON type of each: kept in the object's ``extra`` as read, and written back."""
_KINDS: dict[type | tuple[type, ...], str] = {
    str: "a string",
    list: "a JSON array",
    (int, float): "a finite number",
}


def _milliseconds(seconds: float | None) -> int | None:
    """A duration in seconds as pi's ``durationMs``: whole milliseconds (``None`` stays)."""
    if seconds is None or not math.isfinite(seconds):
        return None
    return round(seconds * 1000)


def _seconds(data: Any, _: Any) -> float | None:
    """pi's ``durationMs`` (a number of milliseconds, not negative) as seconds."""
    if data is None:
        return None
    if (
        isinstance(data, int | float)
        and not isinstance(data, bool)
        and math.isfinite(data)
        and data >= 0
    ):
        return data / 1000
    raise ValueError(f"expected a number of milliseconds, not negative, got {_shown(data)}")


_FIELD_HOOKS: dict[tuple[type[Any], str], tuple[Callable[..., Any], Callable[[Any, Any], Any]]] = {
    (ToolResultMessage, "duration"): (_milliseconds, _seconds),
}
"""Fields whose JSON is not their value: (how it is written, how it is read)."""


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _register_data_class(cls: type[Any], tag_name: str | None) -> None:
    """Hooks for one attrs class: camelCase keys, its tag, optional keys left out."""
    fields = attrs.fields(cls)
    try:
        types = typing.get_type_hints(cls)
    except Exception:  # a name an annotation uses is not where Python can find it
        types = {field.name: field.type for field in fields}
    extras = _EXTRA_KEYS.get(cls, {})
    renames = {
        field.name: (
            override(omit=True)  # its keys are the object's own (see from_json / to_json)
            if field.name == "extra" and extras
            else override(
                rename=_KEYS.get((cls, field.name)) or _camel(field.alias),
                unstruct_hook=(
                    _FIELD_HOOKS[cls, field.name][0]
                    if (cls, field.name) in _FIELD_HOOKS
                    else _free_form(f"{cls.__name__}.{field.name}")
                    if _is_free_form(types.get(field.name))
                    else None
                ),
                struct_hook=(
                    _FIELD_HOOKS[cls, field.name][1] if (cls, field.name) in _FIELD_HOOKS else None
                ),
            )
        )
        for field in fields
        if field.init
    }
    omitted_when = {**_OMITTED_WHEN, **_OMITTED_IN.get(cls, {})}
    # cattrs types the keyword overrides as one fixed keyword, not as **kwargs of overrides.
    unstructure = make_dict_unstructure_fn(cls, _converter, **renames)  # type: ignore[arg-type]  # see above
    structure = make_dict_structure_fn(cls, _converter, _cattrs_forbid_extra_keys=True, **renames)  # type: ignore[arg-type]  # see above
    tag = getattr(cls, tag_name) if tag_name else None

    def to_json(instance: Any) -> dict[str, Any]:
        data = unstructure(instance)
        for key, omitted in omitted_when.items():
            if key in data:
                value = data[key]
                # Of the same type too: ``False == 0``, and a flag is not a count.
                if value is omitted or (type(value) is type(omitted) and value == omitted):
                    del data[key]
        for key in _OMITTED_WHEN_EMPTY:
            if key in data and not data[key]:
                del data[key]
        if extras and instance.extra:
            data.update(_plain(instance.extra, f"{cls.__name__}.extra"))
        return data if tag_name is None else {tag_name: tag, **data}

    def from_json(data: Any, _: Any) -> Any:
        if not isinstance(data, dict):
            raise TypeError(f"expected a JSON object for {cls.__name__}, got {type(data).__name__}")
        if tag_name is not None and tag_name in data:
            if data[tag_name] != tag:
                raise ValueError(f"{tag_name} {data[tag_name]!r} is not {tag!r}")
            data = {key: value for key, value in data.items() if key != tag_name}
        if extras and not extras.keys().isdisjoint(data):
            extra = {key: data[key] for key in data if key in extras}
            for key, value in extra.items():
                if value is not None and (
                    type(value) is bool
                    or not isinstance(value, extras[key])
                    or (type(value) is float and not math.isfinite(value))  # 1e400 reads as inf
                ):
                    problem = TypeError(f"expected {_KINDS[extras[key]]}, got {_shown(value)}")
                    note = f"Structuring class {cls.__name__} @ attribute {key}"
                    problem.__notes__ = [cattrs.AttributeValidationNote(note, key, Any)]
                    raise cattrs.ClassValidationError(
                        f"While structuring {cls.__name__}", [problem], cls
                    )
            data = {key: value for key, value in data.items() if key not in extras}
            return attrs.evolve(structure(data, cls), extra=extra)
        return structure(data, cls)

    _converter.register_unstructure_hook(cls, to_json)
    _converter.register_structure_hook(cls, from_json)


_OMITTED_IN[ToolResult] = {"isError": False}  # a message always says (pi writes it)

_DATA_CLASSES: tuple[tuple[type[Any], str | None], ...] = (
    (Cost, None),
    (Usage, None),
    (ToolResult, None),
    (TextContent, "type"),
    (ThinkingContent, "type"),
    (ImageContent, "type"),
    (ToolCall, "type"),
    (ToolDeclaration, None),
    (ToolReference, None),
    (SystemMessage, "role"),
    (UserMessage, "role"),
    (AssistantMessage, "role"),
    (ToolResultMessage, "role"),
)


def _dispatch(tag_name: str, known: dict[str, type[Any]], what: str) -> Callable[[Any, Any], Any]:
    """A structure hook choosing the class by the value of ``tag_name``."""

    def structure(data: Any, _: Any) -> Any:
        if not isinstance(data, dict):
            raise TypeError(f"expected a JSON object ({what}), got {type(data).__name__}")
        tag = data.get(tag_name)
        cls = known.get(tag) if isinstance(tag, str) else None
        if cls is None:
            raise ValueError(
                f"unknown {what} {tag_name} {tag!r} (known: {', '.join(sorted(known))})"
            )
        return _converter.structure(data, cls)

    return structure


_USER_BLOCKS: dict[str, type[Any]] = {"text": TextContent, "image": ImageContent}
_ASSISTANT_BLOCKS: dict[str, type[Any]] = {
    "text": TextContent,
    "thinking": ThinkingContent,
    "toolCall": ToolCall,
}
_MESSAGES: dict[str, type[Any]] = {
    "system": SystemMessage,
    "user": UserMessage,
    "assistant": AssistantMessage,
    "toolResult": ToolResultMessage,
}
_ALL_MESSAGES: dict[str, type[Any]] = dict(_MESSAGES)

_converter.register_structure_hook(UserContent, _dispatch("type", _USER_BLOCKS, "content block"))
_converter.register_structure_hook(
    AssistantContent, _dispatch("type", _ASSISTANT_BLOCKS, "content block")
)
_converter.register_structure_hook(Message, _dispatch("role", _MESSAGES, "message"))
_converter.register_structure_hook(AgentMessage, _dispatch("role", _ALL_MESSAGES, "message"))


def _user_content(data: Any, _: Any) -> str | tuple[UserContent, ...]:
    if isinstance(data, str):
        return data
    if not isinstance(data, list | tuple):
        raise TypeError(f"expected a string or a JSON array of content blocks, got {_shown(data)}")
    content: tuple[UserContent, ...] = _converter.structure(data, tuple[UserContent, ...])
    return content


_converter.register_structure_hook(str | tuple[UserContent, ...], _user_content)


def _system_content(data: Any, _: Any) -> str | tuple[SystemContent, ...]:
    if isinstance(data, str):
        return data
    if not isinstance(data, list | tuple):
        raise TypeError(f"expected a string or a JSON array of text blocks, got {_shown(data)}")
    content: tuple[SystemContent, ...] = _converter.structure(data, tuple[TextContent, ...])
    return content


_converter.register_structure_hook(str | tuple[SystemContent, ...], _system_content)


def _sections(data: Any, _: Any) -> dict[str, str | None] | None:
    """A system message's ``sections``: a JSON object of strings and nulls, or null."""
    if data is None:
        return None
    if not isinstance(data, dict):
        raise TypeError(f"expected a JSON object of sections, got {_shown(data)}")
    for name, value in data.items():
        if value is not None and not isinstance(value, str):
            raise TypeError(f"expected a string or null for section {name!r}, got {_shown(value)}")
    return dict(data)


_converter.register_structure_hook(dict[str, str | None] | None, _sections)


def _one_of(kind: Any) -> Callable[[Any, Any], Any]:
    """The structure hook of an optional ``Literal`` field: one of its values, or null."""
    choices = typing.get_args(kind)
    shown = ", ".join(repr(choice) for choice in choices)

    def structure(data: Any, _: Any) -> Any:
        if data is None or data in choices:
            return data
        raise ValueError(f"expected one of {shown} or null, got {_shown(data)}")

    return structure


_converter.register_structure_hook(ReplyThinkingLevel | None, _one_of(ReplyThinkingLevel))
_converter.register_structure_hook(ErrorKind | None, _one_of(ErrorKind))

# After the union hooks above: make_dict_structure_fn picks each field's hook
# when it generates the class's function, so a hook registered later is not used.
for _data_class, _tag in _DATA_CLASSES:
    _register_data_class(_data_class, _tag)


def register_message_kind(cls: type[Any]) -> type[Any]:
    """Make an application's own message class readable and writable as JSON.

    ``cls`` must be an attrs class with a ``role`` class attribute that no
    other kind uses (a ``TypeError``, or a ``ValueError`` for a role taken, otherwise);
    its fields are written in camelCase. Usable as a class decorator. Custom messages stay
    in the transcript; the default ``convert_to_llm`` does not show them to the model.
    """
    if not attrs.has(cls):
        raise TypeError(f"{cls!r} is not an attrs class")
    role = getattr(cls, "role", None)
    if not isinstance(role, str) or not role:
        raise TypeError(
            f"{cls.__name__} needs a 'role' class attribute naming its kind, not {role!r}"
        )
    if role in _MESSAGES or (role in _ALL_MESSAGES and _ALL_MESSAGES[role] is not cls):
        raise ValueError(f"role {role!r} is already used by {_ALL_MESSAGES[role].__name__}")
    _register_data_class(cls, "role")
    _ALL_MESSAGES[role] = cls
    return cls


# --- events (written only) -------------------------------------------------------------


def _register_event(cls: type[Any]) -> None:
    names = [(field.alias, f"{cls.__name__}.{field.alias}") for field in attrs.fields(cls)]

    def to_json(event: Any) -> dict[str, Any]:
        data: dict[str, Any] = {"type": event.type}
        for name, what in names:
            data[_camel(name)] = _plain(getattr(event, name), what)
        if isinstance(event, MessageUpdate):
            data["message"] = _converter.unstructure(event.message)
        elif isinstance(event, AgentEnd) and event.stop is None:
            del data["stop"]  # written only when a budget ended the run
        elif isinstance(event, ToolExecutionEnd):
            del data["duration"]  # pi's durationMs, written only when the tool ran
            if event.duration is not None:
                data["durationMs"] = _milliseconds(event.duration)
        return data

    _converter.register_unstructure_hook(cls, to_json)


_EVENT_CLASSES: tuple[type[Any], ...] = (
    AgentStart,
    AgentEnd,
    TurnStart,
    TurnEnd,
    MessageStart,
    MessageUpdate,
    MessageEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    ToolExecutionEnd,
    StreamStart,
    TextStart,
    TextDelta,
    TextEnd,
    ThinkingStart,
    ThinkingDelta,
    ThinkingEnd,
    ToolCallStart,
    ToolCallDelta,
    ToolCallEnd,
    StreamDone,
    StreamError,
)
for _event_class in _EVENT_CLASSES:
    _register_event(_event_class)


# --- the public functions -------------------------------------------------------------------


def to_json(value: Any) -> Any:
    """``value`` (a message, block, event, or a sequence / mapping of them) as plain JSON
    data, as :func:`dumps` writes it (see the module's docs)."""
    if attrs.has(type(value)):
        return _converter.unstructure(value)
    return _plain(value, "the value")


_TOO_DEEP = "nested too deeply to read (past Python's recursion limit)"


def _describe(exc: BaseException, into: Any) -> str:
    # cattrs' own text drops the message of a ValueError / TypeError, which is
    # what names the bad value ("unknown message role 'bob'").
    if isinstance(exc, ValueError | TypeError) and exc.args:
        return str(exc)
    if isinstance(exc, RecursionError):  # caught by cattrs in a field's hook
        return _TOO_DEEP
    if typing.get_origin(into) is Literal and exc.args:  # cattrs: "x not in literal ..."
        value = str(exc.args[0]).partition(" not in literal ")[0]
        choices = ", ".join(repr(choice) for choice in typing.get_args(into))
        return f"expected one of {choices}, got {_PREVIEW.repr(value)}"
    return format_exception(exc, into)


def _what(into: Any) -> str:
    """How an error names what was read: "transcript", "AssistantMessage", "list[UserMessage]"."""
    if into == list[AgentMessage]:
        return "transcript"
    if typing.get_origin(into) is list:
        return f"list[{', '.join(_what(arg) for arg in typing.get_args(into))}]"
    if into == AgentMessage:
        return "message"
    return getattr(into, "__name__", None) or repr(into)


def _problems(exc: BaseException, path: str) -> list[str]:
    """``cattrs.transform_error``, with the JSON keys (camelCase) in paths and our messages."""
    if not isinstance(exc, cattrs.ClassValidationError | cattrs.IterableValidationError):
        return [f"{_describe(exc, None)} @ {path}"]
    problems: list[str] = []
    with_notes, without = exc.group_exceptions()
    for inner, note in with_notes:
        if isinstance(note, cattrs.IterableValidationNote):
            step = f"{path}[{note.index!r}]"
        else:
            name = note.name.lstrip("_")
            step = f"{path}.{_KEY_NAMES.get(name) or _camel(name)}"
        if isinstance(inner, cattrs.ClassValidationError | cattrs.IterableValidationError):
            problems.extend(_problems(inner, step))
        else:
            problems.append(f"{_describe(inner, note.type)} @ {step}")
    problems.extend(f"{_describe(inner, None)} @ {path}" for inner in without)
    return problems


def from_json(data: Any, into: Any = list[AgentMessage]) -> Any:
    """Plain JSON data read as ``into`` (default: a transcript, a list of messages of any kind).

    Raises :class:`~trio_agent.TranscriptError` listing every problem with its path. Its
    strings are taken as they are: the repair of lone surrogates is :func:`loads`'s, as it
    reads text.
    """
    try:
        try:
            return _converter.structure(data, into)
        except (cattrs.BaseValidationError, ValueError, TypeError, KeyError) as exc:
            problems = _problems(exc, "$")
            raise TranscriptError(f"invalid {_what(into)}:\n  " + "\n  ".join(problems)) from exc
    except RecursionError:  # from structuring, or from listing the problems of a deep value
        raise TranscriptError(f"invalid {_what(into)}: {_TOO_DEEP}") from None


# Enough for the fixed levels of a message or event around a free-form value.
_ALL_NESTING = 4 * MAX_NESTING


def _valid_text(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD, and each pair of halves
    written as two code points joined into the character they make."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def dumps(value: Any, *, indent: int | None = None) -> str:
    """``value`` (messages, a transcript or any sequence of messages, events, ...) as JSON
    text in pi's camelCase shape, which :func:`loads` reads back.

    Numbers that are not finite, integers too long to write and lone surrogates are
    written as the module's docs say.

    Args:
        value: what to write: a message, a block, an event, or a sequence or mapping of them.
        indent: as ``json.dumps``'s (``None``: one line).

    Returns:
        The JSON text.

    Raises:
        ValueError: a free-form value (arguments, ``details``) nests deeper than
            :data:`MAX_NESTING` (256) arrays and objects (servers' JSON stops at about
            200); the message names the field.
        TypeError: a value that is not JSON data (a ``set``, a ``datetime`` in
            ``details``).
    """
    try:
        data = to_json(value)
        try:
            text = json.dumps(data, ensure_ascii=False, indent=indent, allow_nan=False)
        except ValueError:  # a typed number field that is not finite (a cost), a huge int
            data = _plain(data, "the value", _ALL_NESTING)
            text = json.dumps(data, ensure_ascii=False, indent=indent, allow_nan=False)
    except RecursionError:  # a message kind of the application's that nests without bound
        raise ValueError(
            f"cannot write {_shown(value)} as JSON: nested too deeply (past Python's"
            " recursion limit)"
        ) from None
    return _valid_text(text)


def _refuse_constant(name: str) -> Any:
    # json.loads' default reads these JavaScript literals as floats.
    raise ValueError(f"{name} is not a JSON value")


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _repair_surrogates(value: Any) -> Any:
    """``value`` (parsed JSON) with every string, keys included, made valid text
    (:func:`_valid_text`); without recursion, in place but for the top."""
    if isinstance(value, str):
        return _valid_text(value)
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if not all(key.isascii() for key in item):
                repaired = {_valid_text(key): inner for key, inner in item.items()}
                item.clear()
                item.update(repaired)
            for key, inner in item.items():
                if isinstance(inner, str):
                    item[key] = _valid_text(inner)
                elif isinstance(inner, dict | list):
                    stack.append(inner)
        elif isinstance(item, list):
            for index, inner in enumerate(item):
                if isinstance(inner, str):
                    item[index] = _valid_text(inner)
                elif isinstance(inner, dict | list):
                    stack.append(inner)
    return value


def _may_hold_surrogates(text: str) -> bool:
    """Whether JSON ``text`` may hold a string with a lone surrogate (cheap to ask)."""
    if "\\u" in text and _SURROGATE_ESCAPE.search(text):
        return True
    return _valid_text(text) is not text


def loads(data: str | bytes, into: Any = list[AgentMessage]) -> Any:
    """Read JSON text as ``into`` (default: a transcript, a list of messages).

    A lone surrogate in a string is read as U+FFFD, and ``null`` in a number field as NaN
    (see the module's docs). Missing optional keys take their defaults.

    Args:
        data: the JSON text (``bytes`` are decoded as ``json.loads`` decodes them).
        into: what to read: a message, content or usage class, a union alias such as
            ``trio_agent.AgentMessage``, or ``list[...]`` of one.

    Returns:
        A value of ``into``, whatever ``data`` holds.

    Raises:
        TranscriptError: the text is not JSON (``NaN`` and ``Infinity`` included), nests
            deeper than Python's parser can follow, holds a number no float can hold, or
            does not have the shape of ``into`` (unknown keys, roles and block types, wrong
            types at any depth); the message names every problem and its path
            (``$[3].content[0].text``).
    """
    try:
        if isinstance(data, bytes | bytearray):  # as json.loads decodes it
            data = data.decode(json.detect_encoding(data), "surrogatepass")
        parsed = json.loads(data, parse_constant=_refuse_constant)
    except RecursionError:
        # The C parser recurses once per level of nesting, as deep as the stack allows.
        raise TranscriptError(
            "not readable JSON: arrays and objects nested too deeply (past Python's recursion"
            " limit)"
        ) from None
    except ValueError as exc:
        raise TranscriptError(f"not valid JSON: {exc}") from exc
    if isinstance(data, str) and _may_hold_surrogates(data):
        parsed = _repair_surrogates(parsed)
    return from_json(parsed, into)
