"""Tools: what the model may call (design.md#tool-execution).

An :class:`AgentTool` couples a JSON Schema for its arguments with an async
``execute(tool_call_id, args, on_update) -> ToolResult``. The loop validates
the model's arguments against the schema (with pi's coercions: ``"7"`` → 7 for
an integer, ``5`` → ``"5"`` for a string, ``"true"`` → true; and pi's rule for
``null``: one given for an optional property whose schema refuses it is
dropped, so the tool's default applies) before ``execute`` sees them, so a
tool can trust the shape of ``args``.

Cancellation: a tool has no abort signal. When the run is aborted, Trio
cancels the tool at its next checkpoint; a tool that must finish something
first does it in a shielded cancel scope (with a timeout of its own). The
:func:`trio_agent.tool` decorator builds an ``AgentTool`` from a typed
function and runs a sync function in a worker thread.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import math
import reprlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, TypeAlias

import attrs
import trio

from ._errors import ToolDefinitionError
from ._messages import ToolResult
from ._validation import ArgumentValidator, compile_validator

__all__ = ["AgentTool", "ExecutionMode", "ReplayPolicy", "ToolExecute", "ToolUpdate"]

ExecutionMode: TypeAlias = Literal["sequential", "parallel"]
"""A tool's ``execution_mode``: ``"sequential"`` makes a whole batch that calls this tool run
one call at a time; ``"parallel"`` leaves it to the run's ``tool_execution``."""

ReplayPolicy: TypeAlias = Literal["never", "safe"]
"""What a recovery layer may do with a call whose intent was recorded but whose outcome is
unknown (the process died while it ran): ``"never"`` run it again, or run it again because
that is ``"safe"``. A policy for such a layer to read; the loop itself never replays a call."""

ToolUpdate: TypeAlias = Callable[[ToolResult], None]
"""``on_update(partial)``: report progress. Sync; the loop emits a ``tool_execution_update``
for it before the call's ``tool_execution_end``. Updates after ``execute`` returned are dropped."""

ToolExecute: TypeAlias = Callable[[str, dict[str, Any], ToolUpdate], Awaitable[ToolResult]]
"""``await execute(tool_call_id, args, on_update) -> ToolResult``."""


def _check_name(instance: AgentTool, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not value:
        raise ToolDefinitionError(f"a tool's name must be a non-empty string, not {value!r}")


def _check_parameters(instance: AgentTool, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, Mapping):
        raise ToolDefinitionError(
            f"tool {instance.name!r}: parameters must be a JSON Schema object (a mapping), "
            f"not {type(value).__name__}"
        )


def _check_execute(instance: AgentTool, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not callable(value):
        raise ToolDefinitionError(
            f"tool {instance.name!r}: execute must be callable, not {value!r}"
        )
    if inspect.isfunction(value) and not inspect.iscoroutinefunction(value):
        raise ToolDefinitionError(
            f"tool {instance.name!r}: execute must be an async function, not the plain "
            f"function {value.__qualname__}; wrap a sync function with @trio_agent.tool, "
            "which runs it in a worker thread"
        )


def _check_mode(instance: AgentTool, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value not in (None, "sequential", "parallel"):
        raise ToolDefinitionError(
            f"tool {instance.name!r}: execution_mode must be 'sequential', 'parallel' or None, "
            f"not {value!r}"
        )


def check_time_limit(value: Any, what: str) -> None:
    """``ValueError`` (naming ``what``) unless ``value`` is None or a positive finite number.

    An int too large for a float (``10**400``) is not a number of seconds Trio
    can wait for: it is refused like ``inf``.
    """
    if value is None:
        return
    if isinstance(value, int | float) and not isinstance(value, bool):
        with contextlib.suppress(OverflowError):  # an int no float holds: refused below
            seconds = float(value)
            if math.isfinite(seconds) and seconds > 0:
                return
    raise ValueError(
        f"{what} must be a positive finite number of seconds or None, not {shown_number(value)}"
    )


def shown_number(value: Any) -> str:
    """``value`` for an error message: an int too long to show as digits (its repr may
    be refused, or run to thousands of characters) by its size, anything else by its
    repr cut to 80 characters."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        bits = value.bit_length()
        return f"an int of {bits} bits" + (" (too large for a float)" if bits > 1024 else "")
    return f"{value!r:.80}"


def _check_time_limit(instance: AgentTool, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None:
        return
    try:
        check_time_limit(value, f"tool {instance.name!r}: time_limit")
    except ValueError as exc:
        raise ToolDefinitionError(str(exc)) from None


def _check_replay(instance: AgentTool, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value not in (None, "never", "safe"):
        raise ToolDefinitionError(
            f"tool {instance.name!r}: replay must be 'never', 'safe' or None, not {value!r}"
        )


def _check_output_schema(instance: AgentTool, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not isinstance(value, Mapping):
        raise ToolDefinitionError(
            f"tool {instance.name!r}: output_schema must be a JSON Schema object (a mapping) "
            f"or None, not {type(value).__name__}"
        )


def _output_validator(schema: Mapping[str, Any], tool_name: str) -> ArgumentValidator:
    """``schema`` compiled as :func:`compile_validator` compiles ``parameters``; its errors
    name ``output_schema``."""
    try:
        return compile_validator(schema, tool_name=tool_name)
    except ToolDefinitionError as exc:
        text = str(exc).replace(
            f"tool {tool_name!r}: parameters", f"tool {tool_name!r}: output_schema", 1
        )
        raise ToolDefinitionError(text) from None


def _shown_value(value: Any, limit: int = 1_000) -> str:
    """``value`` as JSON for an error message, cut to ``limit`` characters."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError, RecursionError):
        text = reprlib.repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def _check_limiter(instance: AgentTool, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not isinstance(value, trio.CapacityLimiter):
        raise ToolDefinitionError(
            f"tool {instance.name!r}: limiter must be a trio.CapacityLimiter or None, not {value!r}"
        )


@attrs.frozen(kw_only=True)
class AgentTool:
    """A tool the model may call.

    - ``name``, ``description``, ``parameters`` (a JSON Schema object) are what
      the model sees.
    - ``execute(tool_call_id, args, on_update)``, async, runs the call with the
      validated (and coerced) arguments and returns a :class:`ToolResult`; an
      exception it raises becomes an error result with its message.
    - ``prepare_arguments(arguments)`` (optional) rewrites the raw arguments
      before validation, a shim for argument shapes an older tool accepted.
    - ``execution_mode="sequential"`` makes a whole batch that calls this tool
      run one call at a time.
    - ``time_limit`` (seconds, optional) bounds each call: past it the call is
      cancelled and answered with the error ``Tool 'name' did not finish within N s``
      (the run goes on); it wins over the run's ``tool_time_limit``, and counts from when
      the call gets its slots.
    - ``limiter`` (a ``trio.CapacityLimiter``, optional) bounds how many calls of
      this tool run at once; share one between tools, runs and agents to cap the
      calls to one API across all of them: ``limiter=trio.CapacityLimiter(8)`` on one tool
      object used by 1,000 agents means at most 8 calls to that API at once.
    - ``output_schema`` (a JSON Schema, optional) describes the ``structured_content``
      of a successful result; a tool that declares it should set it on every
      successful result. It is compiled and bounded like ``parameters`` (its errors name
      ``output_schema``). A successful result whose structured content does not match it is
      the call's failure: the model reads the error ``Tool 'NAME' returned
      structured_content that does not match its output_schema:`` with pi's lines and the
      value's JSON (cut at 1,000 characters); the tool still ran, so its ``duration`` is
      kept. Results with ``is_error``, and results without
      structured content (an MCP server's that was too large to keep), are not checked.
    - ``replay`` (``"never"`` / ``"safe"``, optional) is carried for a recovery layer
      that finds a call recorded as started but never finished: whether it may run it
      again. Nothing in trio_agent acts on it.

    A ``time_limit`` that is not a positive finite number, a ``limiter`` that is not a
    ``CapacityLimiter``, a ``replay`` other than those two, an empty name or a plain-function
    ``execute`` is a :class:`ToolDefinitionError` naming the tool.

    The schema is compiled when the tool is made, so a malformed schema (one
    jsonschema refuses, a ``$ref`` that does not resolve within it, references
    that loop back on themselves, a pattern RE2 cannot compile) is a
    :class:`ToolDefinitionError` here rather than a failure of every call; so
    is one too large or too deep to compile within bounds.

    In full: a ``$ref`` that does not resolve within the schema or points at something other
    than a schema, references that loop back on themselves, a ``pattern`` or a
    ``patternProperties`` name that RE2 cannot compile (a backreference, a lookaround, a
    repetition past 1,000), more than 100,000 values, nesting deeper than 50 levels, a chain
    of more than 100 subschemas applying to the same value, or more than 1,000,000 steps to
    check.
    """

    name: str = attrs.field(validator=_check_name)
    description: str
    parameters: Mapping[str, Any] = attrs.field(validator=_check_parameters)
    execute: ToolExecute = attrs.field(validator=_check_execute)
    label: str = ""
    prepare_arguments: Callable[[Any], Any] | None = None
    execution_mode: ExecutionMode | None = attrs.field(default=None, validator=_check_mode)
    time_limit: float | None = attrs.field(default=None, validator=_check_time_limit)
    limiter: trio.CapacityLimiter | None = attrs.field(
        default=None, validator=_check_limiter, eq=False
    )
    output_schema: Mapping[str, Any] | None = attrs.field(
        default=None, validator=_check_output_schema
    )
    replay: ReplayPolicy | None = attrs.field(default=None, validator=_check_replay)
    _validator: ArgumentValidator = attrs.field(init=False, eq=False, repr=False)
    _output: ArgumentValidator | None = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(
            self, "_validator", compile_validator(self.parameters, tool_name=self.name)
        )
        schema = self.output_schema
        output = None if schema is None else _output_validator(schema, self.name)
        object.__setattr__(self, "_output", output)

    def check_structured_content(self, result: ToolResult) -> None:
        """Raise ``ValueError`` naming the tool and the value when the tool has an
        ``output_schema`` and ``result`` is a success whose ``structured_content`` does not
        match it (checked within a budget of steps, like arguments, and never coerced)."""
        output = self._output
        structured = result.structured_content
        if output is None or result.is_error or structured is None:
            return
        problems = output.mismatch(structured)
        if problems is not None:
            raise ValueError(
                f"Tool {self.name!r} returned structured_content that does not match its "
                f"output_schema:\n{problems}\n\nReceived structured_content:\n"
                f"{_shown_value(structured)}"
            )

    def validate_arguments(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments, coerced and checked against ``parameters`` (a copy: the input is kept).

        As pi does, a ``null`` for an optional property whose schema refuses ``null`` is dropped
        first (in nested ``properties`` and ``items`` too), so the tool's default applies; a
        ``null`` the schema accepts is kept, and one for a required property is coerced like
        any other value. Values are coerced as pi does (``"7"`` → 7 for an integer, ``5`` →
        ``"5"`` for a string, ``"true"`` → ``true``). Patterns match with RE2, in time linear in
        the text.

        Raises :class:`trio_agent.ToolArgumentsError` with pi's message text, or one saying that
        checking took more than its budget of steps (``Validation failed for tool "NAME":
        checking the arguments against the tool's schema took more than N steps``): 50,000,
        and 200 more per value of the arguments (a string or a key counts one more per 64
        characters), which bounds the time a schema and arguments can make it take.
        """
        return self._validator.validate(self.name, arguments)


def tools_by_name(tools: Sequence[AgentTool]) -> dict[str, AgentTool]:
    """Tools by name; of two with one name the first wins, as in pi."""
    return {tool.name: tool for tool in reversed(tools)}
