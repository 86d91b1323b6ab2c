"""The ``@tool`` decorator: an :class:`AgentTool` from a typed function (design.md#tool-execution).

The rules (the schema of each annotation, the parameters injected, the return values,
cancellation) are :func:`tool`'s docstring.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import inspect
import json
import math
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal, NotRequired, Required, Union, overload

import trio

from ._errors import ToolDefinitionError
from ._messages import ToolResult
from ._tools import AgentTool, ExecutionMode, ReplayPolicy, ToolUpdate

__all__ = ["tool"]

_Convert = Callable[[Any], Any]
_SIMPLE: dict[object, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    type(None): "null",
}
_QUALIFIERS: set[object] = {Required, NotRequired, getattr(typing, "ReadOnly", Required)}
_INJECTED = ("tool_call_id", "on_update")


class _Unmappable(Exception):
    """A (possibly nested) annotation has no JSON Schema form; ``str()`` says why."""


class _Mismatch(Exception):
    """A converter was given a value whose JSON type does not fit its annotation."""


# --- public -------------------------------------------------------------------


@overload
def tool(
    fn: Callable[..., Any],
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    label: str = "",
    execution_mode: ExecutionMode | None = None,
    prepare_arguments: Callable[[Any], Any] | None = None,
    abandon_on_cancel: bool = False,
    time_limit: float | None = None,
    limiter: trio.CapacityLimiter | None = None,
    output_schema: Mapping[str, Any] | None = None,
    replay: ReplayPolicy | None = None,
) -> AgentTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    label: str = "",
    execution_mode: ExecutionMode | None = None,
    prepare_arguments: Callable[[Any], Any] | None = None,
    abandon_on_cancel: bool = False,
    time_limit: float | None = None,
    limiter: trio.CapacityLimiter | None = None,
    output_schema: Mapping[str, Any] | None = None,
    replay: ReplayPolicy | None = None,
) -> Callable[[Callable[..., Any]], AgentTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    label: str = "",
    execution_mode: ExecutionMode | None = None,
    prepare_arguments: Callable[[Any], Any] | None = None,
    abandon_on_cancel: bool = False,
    time_limit: float | None = None,
    limiter: trio.CapacityLimiter | None = None,
    output_schema: Mapping[str, Any] | None = None,
    replay: ReplayPolicy | None = None,
) -> AgentTool | Callable[[Callable[..., Any]], AgentTool]:
    """Make an :class:`AgentTool` of a typed function (``@tool`` or ``@tool(...)``).

    The tool's ``name`` is the function's name, its ``description`` the docstring's text before
    the first section, and its ``parameters`` a JSON Schema object built from the parameters'
    annotations, each property described by the docstring (a Google ``Args:`` section, or reST
    ``:param name: text``)::

        @tool
        async def read_file(path: str, max_bytes: int = 10_000) -> str:
            \"\"\"Read a text file.

            Args:
                path: The file to read, relative to the root.
                max_bytes: Read at most this many bytes.
            \"\"\"

    The decorated name is bound to the ``AgentTool``; the function itself stays reachable as
    ``read_file.execute.__wrapped__`` (``inspect.unwrap(read_file.execute)``).

    Annotations and their JSON Schema (the parameters' object is ``{"type": "object",
    "properties": ..., "required": [...], "additionalProperties": false}``)::

        str, int, float, bool, None     {"type": "string"|"integer"|"number"|"boolean"|"null"}
        list[T], Sequence[T],           {"type": "array", "items": T}  (a tuple is passed a
          tuple[T, ...]                   tuple)
        dict[str, T], Mapping[str, T]   {"type": "object", "additionalProperties": T}
        Literal["a", "b"]               {"enum": ["a", "b"], "type": "string"}  (type if
                                          uniform)
        E, a subclass of enum.Enum      {"enum": [E's values]} (type if uniform); passed E
                                          members
        T | None, Optional[T], T | U    {"anyOf": [T, {"type": "null"}]}  (never a type list)
        Annotated[T, "text"]            T + "description": "text"  (the metadata's last str)
        a TypedDict                     {"type": "object", "properties": ..., "required": [...],
                                         "additionalProperties": false}  (required per totality)
        Any                             {}
        NewType("N", T)                 T

    A bare ``list``/``Sequence``/``tuple`` is ``{"type": "array"}``, a bare ``dict``/``Mapping``
    ``{"type": "object"}``. A float parameter accepts an int (JSON Schema's ``number``) and gets
    it unchanged. A parameter with a default is not required, and carries ``"default"`` when the
    default is representable in JSON. ``Annotated`` descriptions win over the docstring's.

    Models often send ``null`` for an argument they mean to leave out. Validation (pi's rule,
    see :mod:`trio_agent._validation`) drops a ``null`` for a parameter with a default whose
    annotation does not allow ``None``, so the function's default applies (``height: int = 100``
    gets 100, not 0); a ``null`` for ``T | None`` stays ``None``. Likewise a ``TypedDict`` key
    that is not required is left out when its value is a ``null`` its type does not allow.

    Two parameters are injected rather than described: ``tool_call_id`` (``str``) gets the
    call's id, and ``on_update`` (``ToolUpdate``, or unannotated) the progress callback.
    Anything else the decorator cannot describe (positional-only parameters, ``*args``,
    ``**kwargs``, a missing or unmappable annotation) is a :class:`ToolDefinitionError` naming
    the function, the parameter and the annotation. String annotations (``from __future__ import
    annotations``) are resolved by ``typing.get_type_hints`` in the function's module, so the
    types they name must live there, not in an enclosing function; an injected parameter's or
    the return's annotation may stay unresolved (a name imported under ``TYPE_CHECKING``).

    An async function is awaited. A sync function runs in a worker thread
    (``trio.to_thread.run_sync``), and its ``on_update`` may be called from that thread: it runs
    the loop's callback in the Trio thread (``trio.from_thread.run_sync``) and returns when it
    has.

    The return value becomes the result: a :class:`ToolResult` as is; a ``str`` one text block;
    anything else serializable as JSON (``None`` included, which gives ``"null"`` -- never an
    empty text block, which some providers reject) a text block of its JSON, with the value as
    ``details``. Exceptions propagate (the loop turns them into error results).

    Cancellation: an async tool is cancelled at its next checkpoint, as any Trio code. A thread
    cannot be interrupted: by default a cancelled sync tool's call waits for the thread to
    finish (the function may poll ``trio.from_thread.check_cancelled()`` to stop early); with
    ``abandon_on_cancel=True`` the call raises ``Cancelled`` at once and the thread is left
    running in the background, its result discarded -- only for work that is safe to abandon. An
    abandoned thread's ``on_update`` calls still reach the loop's callback (which drops updates
    of a finished call) until the run ends, and then raise ``trio.RunFinishedError`` in the
    thread.

    ``name`` and ``description`` replace the function's name and docstring summary; ``label``,
    ``execution_mode``, ``prepare_arguments``, ``time_limit``, ``limiter``, ``output_schema``
    and ``replay`` go to the ``AgentTool`` as they are (a sync function past its ``time_limit``
    is answered when its thread returns, unless ``abandon_on_cancel=True``). With an
    ``output_schema``, a JSON object the function returns is also the result's
    ``structured_content``, checked against the schema (a mismatch is an error result).

    Raises :class:`ToolDefinitionError` when ``fn`` is not a function, has no usable name, or
    has a parameter that cannot be described.
    """

    def decorate(fn: Callable[..., Any]) -> AgentTool:
        return _make_tool(
            fn,
            name=name,
            description=description,
            label=label,
            execution_mode=execution_mode,
            prepare_arguments=prepare_arguments,
            abandon_on_cancel=abandon_on_cancel,
            time_limit=time_limit,
            limiter=limiter,
            output_schema=output_schema,
            replay=replay,
        )

    return decorate if fn is None else decorate(fn)


# --- building the tool ----------------------------------------------------------


def _make_tool(
    fn: Callable[..., Any],
    *,
    name: str | None,
    description: str | None,
    label: str,
    execution_mode: ExecutionMode | None,
    prepare_arguments: Callable[[Any], Any] | None,
    abandon_on_cancel: bool,
    time_limit: float | None = None,
    limiter: trio.CapacityLimiter | None = None,
    output_schema: Mapping[str, Any] | None = None,
    replay: ReplayPolicy | None = None,
) -> AgentTool:
    if not (inspect.isfunction(fn) or inspect.ismethod(fn)):
        raise ToolDefinitionError(f"@tool needs a function (def or async def), not {fn!r}")
    where = f"{fn.__qualname__}()"
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        raise ToolDefinitionError(f"@tool cannot use {where}: a generator cannot return a result")
    if name is None:
        name = fn.__name__
        if not name.isidentifier():
            raise ToolDefinitionError(
                f"@tool: {where} has no usable name ({name!r}); give one with @tool(name=...)"
            )
    summary, param_docs = _parse_docstring(inspect.getdoc(fn))
    parameters, converters, injected = _describe_signature(fn, where, param_docs)
    is_async = inspect.iscoroutinefunction(fn)

    async def execute(tool_call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        kwargs: dict[str, Any] = {}
        for key, value in args.items():
            convert = converters.get(key)
            if convert is not None:
                # A mismatch is not what validation lets through: leave it to the function.
                with contextlib.suppress(_Mismatch):
                    value = convert(value)
            kwargs[key] = value
        if "tool_call_id" in injected:
            kwargs["tool_call_id"] = tool_call_id
        if is_async:
            if "on_update" in injected:
                kwargs["on_update"] = on_update
            result = await fn(**kwargs)
        else:
            if "on_update" in injected:

                def on_update_from_thread(partial: ToolResult) -> None:
                    trio.from_thread.run_sync(on_update, partial)

                kwargs["on_update"] = on_update_from_thread
            result = await trio.to_thread.run_sync(
                functools.partial(fn, **kwargs), abandon_on_cancel=abandon_on_cancel
            )
        return _to_result(name, result, structured=output_schema is not None)

    # Not functools.wraps: execute's own annotations and signature stay those of execute.
    functools.update_wrapper(
        execute, fn, assigned=("__module__", "__name__", "__qualname__", "__doc__")
    )
    return AgentTool(
        name=name,
        description=summary if description is None else description,
        parameters=parameters,
        execute=execute,
        label=label,
        prepare_arguments=prepare_arguments,
        execution_mode=execution_mode,
        time_limit=time_limit,
        limiter=limiter,
        output_schema=output_schema,
        replay=replay,
    )


def _to_result(tool_name: str, value: object, structured: bool = False) -> ToolResult:
    """What a decorated function returned, as a result; with ``structured`` (the tool has an
    ``output_schema``), a JSON object it returned is also the structured content, which
    the loop checks against the schema."""
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, str):
        return ToolResult.text(value)
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"tool {tool_name!r} returned a {type(value).__qualname__}, which is not a "
            f"ToolResult, a str or a JSON-serializable value"
        ) from exc
    if structured and isinstance(value, dict):
        return ToolResult.text(text, details=value, structured_content=value)
    return ToolResult.text(text, details=value)


def _describe_signature(
    fn: Callable[..., Any], where: str, param_docs: Mapping[str, str]
) -> tuple[dict[str, Any], dict[str, _Convert], set[str]]:
    """The parameters' schema, their converters (JSON value → argument), the injected names."""
    hints = _resolve_hints(fn, where)
    properties: dict[str, Any] = {}
    required: list[str] = []
    converters: dict[str, _Convert] = {}
    injected: set[str] = set()
    for param in inspect.signature(fn).parameters.values():
        label = f"@tool {where}: parameter {param.name!r}"
        if param.kind is param.POSITIONAL_ONLY:
            raise ToolDefinitionError(f"{label} is positional-only; tools take keyword arguments")
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(f"{label} ({param}) has no JSON Schema form")
        hint = hints.get(param.name, inspect.Parameter.empty)
        if param.name in _INJECTED:
            _check_injected(param.name, hint, label)
            injected.add(param.name)
            continue
        if hint is inspect.Parameter.empty:
            raise ToolDefinitionError(f"{label} has no annotation")
        try:
            schema, convert = _describe(hint, frozenset())
        except _Unmappable as exc:
            raise ToolDefinitionError(
                f"{label} is annotated {_show(hint)}, which @tool cannot describe: {exc}"
            ) from None
        if "description" not in schema and param.name in param_docs:
            schema["description"] = param_docs[param.name]
        if param.default is param.empty:
            required.append(param.name)
        else:
            # A default JSON cannot represent is left out; the function's default still applies.
            with contextlib.suppress(_Unmappable):
                schema["default"] = _to_json(param.default)
        properties[param.name] = schema
        if convert is not None:
            converters[param.name] = convert
    parameters = {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    return parameters, converters, injected


def _resolve_hints(fn: Callable[..., Any], where: str) -> dict[str, Any]:
    """``get_type_hints(fn)``, or, when some annotation does not resolve, each one on its own.

    One at a time, an unresolvable return or injected annotation (``on_update: ToolUpdate``
    imported under ``TYPE_CHECKING``) is skipped, and one of a described parameter is
    reported by name.
    """
    with contextlib.suppress(Exception):
        return typing.get_type_hints(fn, include_extras=True)
    hints: dict[str, Any] = {}
    for key, annotation in fn.__annotations__.items():
        shim = types.FunctionType(_shim.__code__, getattr(fn, "__globals__", {}))
        shim.__annotations__ = {key: annotation}
        try:
            hints[key] = typing.get_type_hints(shim, include_extras=True)[key]
        except Exception as exc:
            if key != "return" and key not in _INJECTED:
                raise ToolDefinitionError(
                    f"@tool {where}: parameter {key!r}: cannot resolve annotation "
                    f"{annotation!r} ({type(exc).__name__}: {exc})"
                ) from None
    return hints


def _shim() -> None:
    """Lends its code to the one-annotation functions of :func:`_resolve_hints`."""


def _check_injected(name: str, hint: Any, label: str) -> None:
    if hint is inspect.Parameter.empty or hint is Any:
        return
    if name == "tool_call_id" and hint is str:
        return
    if name == "on_update" and (_origin(hint) is Callable):
        return
    expected = "str" if name == "tool_call_id" else "ToolUpdate"
    raise ToolDefinitionError(
        f"{label} is injected and must be annotated {expected} (or not at all), not {_show(hint)}"
    )


def _origin(tp: Any) -> Any:
    """``list`` for ``list[int]``, ``int`` for ``int``."""
    return typing.get_origin(tp) or tp


# --- annotations → JSON Schema ----------------------------------------------------


def _describe(tp: Any, seen: frozenset[type]) -> tuple[dict[str, Any], _Convert | None]:
    """The JSON Schema of ``tp``, and the converter from its JSON value (None: the value as is).

    ``seen`` holds the TypedDicts being described, to refuse recursive ones.
    """
    if tp is None:
        tp = type(None)
    if tp is Any:
        return {}, None
    if isinstance(tp, typing.NewType):
        return _describe(tp.__supertype__, seen)
    origin = _origin(tp)
    args = typing.get_args(tp)
    if origin is Annotated:
        schema, convert = _describe(args[0], seen)
        texts = [item for item in tp.__metadata__ if isinstance(item, str)]
        return ({**schema, "description": texts[-1]} if texts else schema), convert
    if origin in _QUALIFIERS:
        return _describe(args[0], seen)
    if isinstance(tp, type) and tp in _SIMPLE:
        return {"type": _SIMPLE[tp]}, None
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _describe_enum(tp)
    if origin is Literal:
        for value in args:
            if value is not None and type(value) not in (str, int, bool):
                raise _Unmappable(f"Literal value {value!r} is not a str, int, bool or None")
        return _enum_schema(args), None
    if origin in (Union, types.UnionType):
        return _describe_union(args, seen)
    if origin in (list, tuple, Sequence):
        return _describe_array(tp, origin, args, seen)
    if origin in (dict, Mapping):
        return _describe_mapping(tp, args, seen)
    if typing.is_typeddict(tp):
        return _describe_typeddict(tp, seen)
    raise _Unmappable(f"{_show(tp)} has no JSON Schema form")


def _enum_schema(values: Sequence[Any]) -> dict[str, Any]:
    schema: dict[str, Any] = {"enum": list(values)}
    kinds = {_json_type(value) for value in values}
    if len(kinds) == 1:
        schema["type"] = kinds.pop()
    return schema


def _describe_enum(tp: type[enum.Enum]) -> tuple[dict[str, Any], _Convert]:
    members = list(tp)
    for member in members:
        if not isinstance(member.value, str | int | float | None):
            raise _Unmappable(f"{_show(tp)}.{member.name}'s value {member.value!r} is not JSON")

    def convert(value: Any) -> Any:
        for member in members:
            if _json_type(member.value) == _json_type(value) and member.value == value:
                return member
        raise _Mismatch

    return _enum_schema([member.value for member in members]), convert


def _describe_union(
    args: tuple[Any, ...], seen: frozenset[type]
) -> tuple[dict[str, Any], _Convert | None]:
    arms = [_describe(arm, seen) for arm in args]
    converters = [convert for _, convert in arms if convert is not None]

    def convert(value: Any) -> Any:
        # The first arm that converts the value wins; a value no arm converts stays as it is
        # (it matched an arm that needs no conversion).
        for arm_convert in converters:
            try:
                return arm_convert(value)
            except _Mismatch:
                continue
        return value

    return {"anyOf": [schema for schema, _ in arms]}, (convert if converters else None)


def _describe_array(
    tp: Any, origin: Any, args: tuple[Any, ...], seen: frozenset[type]
) -> tuple[dict[str, Any], _Convert | None]:
    is_tuple = origin is tuple
    if not args:
        return {"type": "array"}, (_to_tuple if is_tuple else None)
    if is_tuple and (len(args) != 2 or args[1] is not Ellipsis):
        raise _Unmappable(f"{_show(tp)} is a fixed-length tuple; only tuple[T, ...] is supported")
    items, convert_item = _describe(args[0], seen)
    if convert_item is None and not is_tuple:
        return {"type": "array", "items": items}, None

    def convert(value: Any) -> Any:
        if not isinstance(value, list | tuple):
            raise _Mismatch
        converted = value if convert_item is None else [convert_item(item) for item in value]
        return tuple(converted) if is_tuple else converted

    return {"type": "array", "items": items}, convert


def _to_tuple(value: Any) -> Any:
    if not isinstance(value, list | tuple):
        raise _Mismatch
    return tuple(value)


def _describe_mapping(
    tp: Any, args: tuple[Any, ...], seen: frozenset[type]
) -> tuple[dict[str, Any], _Convert | None]:
    if not args:
        return {"type": "object"}, None
    if args[0] is not str:
        raise _Unmappable(f"{_show(tp)} has {_show(args[0])} keys; JSON object keys are str")
    values, convert_value = _describe(args[1], seen)
    schema = {"type": "object", "additionalProperties": values}
    return schema, (None if convert_value is None else _dict_converter(lambda _: convert_value))


def _describe_typeddict(tp: Any, seen: frozenset[type]) -> tuple[dict[str, Any], _Convert | None]:
    if tp in seen:
        raise _Unmappable(f"{_show(tp)} is recursive")
    try:
        hints = typing.get_type_hints(tp, include_extras=True)
    except Exception as exc:
        raise _Unmappable(f"cannot resolve the annotations of {_show(tp)} ({exc})") from None
    properties: dict[str, Any] = {}
    converters: dict[str, _Convert] = {}
    required: list[str] = []
    for key, hint in hints.items():
        properties[key], convert = _describe(hint, seen | {tp})
        if convert is not None:
            converters[key] = convert
        # Python 3.11 misses Required / NotRequired in string annotations when it computes
        # __required_keys__ (it sees the totality only), so the resolved hint decides first.
        qualifier = _origin(hint)
        while qualifier is Annotated:
            hint = typing.get_args(hint)[0]
            qualifier = _origin(hint)
        if qualifier is Required or (qualifier is not NotRequired and key in tp.__required_keys__):
            required.append(key)
    schema = {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    return schema, (_dict_converter(converters.get) if converters else None)


def _dict_converter(converter_for: Callable[[str], _Convert | None]) -> _Convert:
    def convert(value: Any) -> Any:
        if not isinstance(value, dict):
            raise _Mismatch
        converted = {}
        for key, item in value.items():
            convert_item = converter_for(key)
            converted[key] = item if convert_item is None else convert_item(item)
        return converted

    return convert


# --- helpers --------------------------------------------------------------------


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    for kind, name in (
        (bool, "boolean"),
        (int, "integer"),
        (float, "number"),
        (str, "string"),
    ):
        if isinstance(value, kind):
            return name
    return type(value).__qualname__


def _to_json(value: object) -> Any:
    """``value`` as plain JSON data (enum members by value), or :class:`_Unmappable`."""
    if isinstance(value, enum.Enum):
        return _to_json(value.value)
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    if isinstance(value, list | tuple):
        return [_to_json(item) for item in value]
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return {key: _to_json(item) for key, item in value.items()}
    raise _Unmappable(f"{value!r} is not JSON")


def _show(tp: Any) -> str:
    if isinstance(tp, type) and typing.get_origin(tp) is None:
        return tp.__qualname__
    return repr(tp).replace("typing.", "")


# --- docstrings -----------------------------------------------------------------

_SECTION = re.compile(
    r"(args|arguments|parameters|params|keyword args|keyword arguments|other parameters"
    r"|returns?|yields?|raises|examples?|notes?|warnings?|see also|references|attributes"
    r"|todo)\s*:",
    re.IGNORECASE,
)
_PARAM_SECTIONS = {
    "args",
    "arguments",
    "parameters",
    "params",
    "keyword args",
    "keyword arguments",
    "other parameters",
}
_REST_FIELD = re.compile(r":(\w+)((?:\s+[^:]+)?):\s*(.*)")
_REST_PARAM_FIELDS = {"param", "parameter", "arg", "argument", "key", "keyword"}
_GOOGLE_ITEM = re.compile(r"\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)")
_UNDERLINE = re.compile(r"-{3,}|={3,}")


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """The summary (the text before the first section) and the parameters' descriptions.

    Sections: Google (``Args:``, ``Returns:``, ...), reST fields (``:param x: text``) and,
    only to end the summary, NumPy's underlined headers.
    """
    lines = (doc or "").splitlines()
    summary: list[str] = []
    params: dict[str, list[str]] = {}
    in_summary = True
    section: str | None = None  # "args" (a Google parameter section), "rest", or None
    item_indent: int | None = None
    current: list[str] | None = None
    for number, line in enumerate(lines):
        text = line.strip()
        indent = len(line) - len(line.lstrip())
        if in_summary:
            following = lines[number + 1].strip() if number + 1 < len(lines) else ""
            starts_section = indent == 0 and (
                _SECTION.fullmatch(text) or text.startswith(":") or _UNDERLINE.fullmatch(following)
            )
            if not starts_section:
                summary.append(line)
                continue
            in_summary = False
        if not text:
            continue
        if indent == 0:
            current, section, item_indent = None, None, None
            if header := _SECTION.fullmatch(text):
                section = "args" if header[1].lower() in _PARAM_SECTIONS else None
            elif (field := _REST_FIELD.fullmatch(text)) and field[1] in _REST_PARAM_FIELDS:
                words = field[2].split()
                if words:
                    section, current = "rest", [field[3]]
                    params[words[-1]] = current
            continue
        if section == "args":
            if item_indent is None:
                item_indent = indent
            if indent <= item_indent:
                if item := _GOOGLE_ITEM.fullmatch(text):
                    current = [item[2]]
                    params[item[1]] = current
                else:
                    current = None
                continue
        if current is not None:
            current.append(text)
    descriptions = {key: " ".join(p for p in parts if p) for key, parts in params.items()}
    return "\n".join(summary).strip(), {key: text for key, text in descriptions.items() if text}
