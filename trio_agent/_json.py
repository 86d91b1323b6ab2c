"""JSON in pi's camelCase shape, both ways: :func:`dumps` and :func:`loads`.

One private cattrs converter knows every message, content block, usage and
result class, and every event (events are written, not read). Field names
become camelCase (``tool_call_id`` → ``toolCallId``), each content block
carries its ``type`` and each message its ``role``, and a field that is
``None`` (``errorMessage``, a signature, a tool result's ``details``) is left
out, as pi leaves out ``undefined``. So a transcript saved here can be read by
pi-based tools and the other way round.

Reading is strict: unknown keys, unknown roles or block types, and values of
the wrong type are a :class:`~trio_agent.TranscriptError` listing every
problem with its path (``$[3].content[0].text``). Missing optional keys take
their defaults (a missing timestamp is now). A transcript is untrusted input
(a file, a peer's message), so whatever the text, :func:`loads` returns or
raises ``TranscriptError``: text that is not JSON (``NaN`` and ``Infinity``
included, which pi's ``JSON.parse`` refuses too), nesting deeper than Python's
parser can follow, numbers no float can hold, and wrong types at any depth.
"""

from __future__ import annotations

import json
import math
import reprlib
import typing
from collections.abc import Callable
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
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    Usage,
    UserContent,
    UserMessage,
)

__all__ = ["dumps", "from_json", "loads", "register_message_kind", "to_json"]

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
    """A structure hook for ``float`` fields: a finite JSON number.

    ``NaN`` and the infinities (``1e999`` parses as one) would be written back as
    ``NaN`` / ``Infinity``, which is not JSON; an integer past a float's range has no
    float to become.
    """
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
    "responseId": None,
    "providerThinkingLevel": None,
    "details": None,
    "usage": None,
    "terminate": None,
}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _register_data_class(cls: type[Any], tag_name: str | None) -> None:
    """Hooks for one attrs class: camelCase keys, its tag, optional keys left out."""
    fields = attrs.fields(cls)
    renames = {field.name: override(rename=_camel(field.alias)) for field in fields if field.init}
    # cattrs types the keyword overrides as one fixed keyword, not as **kwargs of overrides.
    unstructure = make_dict_unstructure_fn(cls, _converter, **renames)  # type: ignore[arg-type]  # see above
    structure = make_dict_structure_fn(cls, _converter, _cattrs_forbid_extra_keys=True, **renames)  # type: ignore[arg-type]  # see above
    tag = getattr(cls, tag_name) if tag_name else None

    def to_json(value: Any) -> dict[str, Any]:
        data = unstructure(value)
        for key, omitted in _OMITTED_WHEN.items():
            if key in data and data[key] is omitted:
                del data[key]
        return data if tag_name is None else {tag_name: tag, **data}

    def from_json(data: Any, _: Any) -> Any:
        if not isinstance(data, dict):
            raise TypeError(f"expected a JSON object for {cls.__name__}, got {type(data).__name__}")
        if tag_name is not None and tag_name in data:
            if data[tag_name] != tag:
                raise ValueError(f"{tag_name} {data[tag_name]!r} is not {tag!r}")
            data = {key: value for key, value in data.items() if key != tag_name}
        return structure(data, cls)

    _converter.register_unstructure_hook(cls, to_json)
    _converter.register_structure_hook(cls, from_json)


_DATA_CLASSES: tuple[tuple[type[Any], str | None], ...] = (
    (Cost, None),
    (Usage, None),
    (ToolResult, None),
    (TextContent, "type"),
    (ThinkingContent, "type"),
    (ImageContent, "type"),
    (ToolCall, "type"),
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

# After the union hooks above: make_dict_structure_fn picks each field's hook
# when it generates the class's function, so a hook registered later is not used.
for _data_class, _tag in _DATA_CLASSES:
    _register_data_class(_data_class, _tag)


def register_message_kind(cls: type[Any]) -> type[Any]:
    """Make an application's own message class readable and writable as JSON.

    ``cls`` must be an attrs class with a ``role`` class attribute that no
    other kind uses; its fields are written in camelCase. Usable as a class
    decorator. Custom messages stay in the transcript; the default
    ``convert_to_llm`` does not show them to the model.
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
    names = [field.alias for field in attrs.fields(cls)]

    def to_json(event: Any) -> dict[str, Any]:
        data: dict[str, Any] = {"type": event.type}
        for name in names:
            data[_camel(name)] = _converter.unstructure(getattr(event, name))
        if isinstance(event, MessageUpdate):
            data["message"] = _converter.unstructure(event.message)
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
    """``value`` (a message, block, event, or a list / dict of them) as plain JSON data."""
    return _converter.unstructure(value)


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
            step = f"{path}.{_camel(note.name.lstrip('_'))}"
        if isinstance(inner, cattrs.ClassValidationError | cattrs.IterableValidationError):
            problems.extend(_problems(inner, step))
        else:
            problems.append(f"{_describe(inner, note.type)} @ {step}")
    problems.extend(f"{_describe(inner, None)} @ {path}" for inner in without)
    return problems


def from_json(data: Any, into: Any = list[AgentMessage]) -> Any:
    """Plain JSON data read as ``into`` (default: a transcript, a list of messages of any kind).

    Raises :class:`~trio_agent.TranscriptError` listing every problem with its path.
    """
    try:
        try:
            return _converter.structure(data, into)
        except (cattrs.BaseValidationError, ValueError, TypeError, KeyError) as exc:
            problems = _problems(exc, "$")
            raise TranscriptError(f"invalid {_what(into)}:\n  " + "\n  ".join(problems)) from exc
    except RecursionError:  # from structuring, or from listing the problems of a deep value
        raise TranscriptError(f"invalid {_what(into)}: {_TOO_DEEP}") from None


def dumps(value: Any, *, indent: int | None = None) -> str:
    """``value`` (messages, a transcript, events, ...) as JSON text in pi's camelCase shape."""
    return json.dumps(to_json(value), ensure_ascii=False, indent=indent)


def _refuse_constant(name: str) -> Any:
    # json.loads' default reads these JavaScript literals as floats.
    raise ValueError(f"{name} is not a JSON value")


def loads(data: str | bytes, into: Any = list[AgentMessage]) -> Any:
    """Read JSON text as ``into`` (default: a transcript, a list of messages).

    ``into`` may be a message, content or usage class, a union alias such as
    ``trio_agent.AgentMessage``, or ``list[...]`` of one. Unknown keys, roles
    and block types are rejected: :class:`~trio_agent.TranscriptError` names
    every problem and its path. Whatever ``data`` holds, the result is a value
    of ``into`` or a ``TranscriptError``.
    """
    try:
        parsed = json.loads(data, parse_constant=_refuse_constant)
    except RecursionError:
        # The C parser recurses once per level of nesting, as deep as the stack allows.
        raise TranscriptError(
            "not readable JSON: arrays and objects nested too deeply (past Python's recursion"
            " limit)"
        ) from None
    except ValueError as exc:
        raise TranscriptError(f"not valid JSON: {exc}") from exc
    return from_json(parsed, into)
