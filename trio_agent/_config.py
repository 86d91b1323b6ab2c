"""What a run is given: its context, its configuration and the hooks' arguments
(design.md#the-order-of-events, design.md#tool-execution)."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, TypeAlias

import attrs

from ._budget import Budget
from ._messages import (
    AgentMessage,
    AssistantMessage,
    LlmMessage,
    ToolCall,
    ToolResult,
    ToolResultContent,
    ToolResultMessage,
    Usage,
)
from ._model import Model
from ._stream import (
    CacheRetention,
    ReasoningLevel,
    StreamOptions,
    Timeouts,
    check_cache_retention,
    check_session_id,
)
from ._tools import AgentTool, check_time_limit, shown_number

__all__ = [
    "AfterToolCallContext",
    "AfterToolCallResult",
    "AgentContext",
    "AgentLoopConfig",
    "BeforeToolCallContext",
    "BeforeToolCallResult",
    "NextTurn",
    "RequestContext",
    "RequestUpdate",
    "ThinkingLevel",
    "ToolExecution",
    "TurnContext",
    "TurnDecision",
]

ThinkingLevel: TypeAlias = Literal["off", "minimal", "low", "medium", "high", "xhigh"]
"""How hard a reasoning model thinks, as an Agent's ``thinking_level`` says it (``"off"``: not at
all, or as little as the model allows)."""
ToolExecution: TypeAlias = Literal["parallel", "sequential"]
"""The config's ``tool_execution``: run the tool calls of one reply at once (``"parallel"``) or
one after another in source order (``"sequential"``)."""
TurnDecision: TypeAlias = Literal["continue", "end"]
"""What ``finish_turn`` decides for the run: ``"continue"`` (one more request, at least) or
``"end"`` (no more requests); ``None`` leaves the run to its usual course."""

_THINKING_LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh")


@attrs.frozen
class AgentContext:
    """The system prompt, the transcript and the tools of a run.

    The loop never changes the sequences it is given: it works on a copy.
    The contexts it hands to hooks hold read-only views of its transcript,
    valid until the run's next change; copy them to keep them.
    """

    system_prompt: str = ""
    messages: Sequence[AgentMessage] = ()
    tools: Sequence[AgentTool] = ()


@attrs.frozen(kw_only=True)
class BeforeToolCallContext:
    """What ``before_tool_call`` sees: the call, its validated ``args`` (a dict it may change in
    place: ``execute`` gets the changed dict) and the run's context."""

    assistant_message: AssistantMessage
    tool_call: ToolCall
    args: dict[str, Any]
    context: AgentContext


@attrs.frozen(kw_only=True)
class BeforeToolCallResult:
    """``block=True`` stops the call: its result is the error ``reason`` (default
    "Tool execution was blocked"), with ``terminate`` if set."""

    block: bool = False
    reason: str | None = None
    terminate: bool | None = None


@attrs.frozen(kw_only=True)
class AfterToolCallContext:
    """What ``after_tool_call`` sees: the call, its arguments, its result and whether it failed."""

    assistant_message: AssistantMessage
    tool_call: ToolCall
    args: Any
    result: ToolResult
    is_error: bool
    context: AgentContext


@attrs.frozen(kw_only=True)
class AfterToolCallResult:
    """Overrides for a call's result, field by field; a field left ``None`` keeps its value.

    One exception, pi's rule: new ``content`` without ``structured_content`` drops the
    result's structured content, which may no longer match it (return both to keep it).
    The structured content a hook returns is not checked against the tool's
    ``output_schema``.
    """

    content: Sequence[ToolResultContent] | None = None
    details: Any = None
    usage: Usage | None = None
    terminate: bool | None = None
    is_error: bool | None = None
    structured_content: Any = None


@attrs.frozen(kw_only=True)
class TurnContext:
    """A finished turn, for ``finish_turn``, ``should_stop_after_turn`` and
    ``prepare_next_turn``: the reply, its tool results (source order; none after an ``error``
    or ``aborted`` reply), the run's context (the reply and the results in it) and the
    messages the run has added so far."""

    message: AssistantMessage
    tool_results: tuple[ToolResultMessage, ...]
    context: AgentContext
    new_messages: Sequence[AgentMessage]


def _check_context(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not isinstance(value, AgentContext):
        raise TypeError(
            f"{type(instance).__name__}.context must be an AgentContext or None, not {value!r:.80}"
        )


def _check_model(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not isinstance(value, Model):
        raise TypeError(
            f"{type(instance).__name__}.model must be a trio_agent.Model or None, not {value!r:.80}"
        )


def _check_thinking_level(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and value not in _THINKING_LEVELS:
        raise ValueError(
            f"{type(instance).__name__}.thinking_level must be off, minimal, low, medium, "
            f"high, xhigh or None, not {value!r:.80}"
        )


def _next_messages(value: Any) -> tuple[AgentMessage, ...]:
    check_messages("NextTurn.messages", value)
    return tuple(value)


@attrs.frozen(kw_only=True)
class NextTurn:
    """What ``prepare_next_turn`` may change for the rest of the run (``None``: keep), and
    ``messages`` to append before the next request (a sequence of messages, kept as a tuple;
    each announced with ``message_start`` and ``message_end`` after ``turn_start``, before any
    steering message).

    A ``context`` that is not an ``AgentContext``, a ``model`` that is not a ``Model``, a
    ``thinking_level`` that is not one of ``ThinkingLevel``'s, or ``messages`` that are not a
    sequence of messages, is a ``TypeError`` or ``ValueError`` that shows the value.
    """

    context: AgentContext | None = attrs.field(default=None, validator=_check_context)
    model: Model | None = attrs.field(default=None, validator=_check_model)
    thinking_level: ThinkingLevel | None = attrs.field(
        default=None, validator=_check_thinking_level
    )
    messages: Sequence[AgentMessage] = attrs.field(default=(), converter=_next_messages)


@attrs.frozen(kw_only=True)
class RequestContext:
    """What ``prepare_request`` sees just before a request: the run's context (the messages
    of this turn already in it; read-only views, valid until the run's next change), the model
    and the ``ThinkingLevel`` the request would use (``"off"`` for no reasoning)."""

    context: AgentContext
    model: Model
    thinking_level: ThinkingLevel


@attrs.frozen(kw_only=True)
class RequestUpdate:
    """What ``prepare_request`` may change for this request and the rest of the run
    (``None``: keep). Its fields are checked as :class:`NextTurn`'s are."""

    context: AgentContext | None = attrs.field(default=None, validator=_check_context)
    model: Model | None = attrs.field(default=None, validator=_check_model)
    thinking_level: ThinkingLevel | None = attrs.field(
        default=None, validator=_check_thinking_level
    )


def _async_hook(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None:
        return
    if not callable(value):
        raise TypeError(f"{attribute.name} must be an async callable, not {value!r}")
    if inspect.isfunction(value) and not inspect.iscoroutinefunction(value):
        raise TypeError(
            f"{attribute.name} must be an async function (async def), "
            f"not the plain function {value.__qualname__}"
        )


def _hidden(key: str | None) -> str:
    return "None" if key is None else "'***'"


# The one declaration of the run options. Agent takes each field it does not fill in
# itself as a keyword of the same name, type and default, and copies it into every run's
# config; its docstring describes each field. tests/test_options.py checks all three.
@attrs.frozen(kw_only=True)
class AgentLoopConfig:
    """How a run talks to its model and which hooks it calls. Only ``model`` is required.

    The request options ``api_key``, ``temperature``, ``max_tokens``, ``reasoning`` (a
    ``ReasoningLevel`` or ``None``), ``session_id``, ``cache_retention``, ``headers``,
    ``max_retries``, ``max_retry_delay`` and ``timeouts`` become the ``StreamOptions`` of each
    request. ``session_id`` is a ``str`` or ``None`` (``TypeError`` otherwise),
    ``cache_retention`` is ``"short"``, ``"long"`` or ``"none"`` (``ValueError`` otherwise),
    ``max_retries`` an int of 0 or more, ``max_retry_delay`` a number of seconds of 0 or more
    (``math.inf``: wait as long as a server asks, though never forever), ``timeouts`` a
    ``Timeouts`` (a ``ValueError``, or a ``TypeError`` for ``timeouts``, otherwise).

    The run options: ``tool_execution`` is ``"parallel"`` or ``"sequential"`` (``ValueError``
    otherwise). ``tool_time_limit`` (seconds, a positive finite number or ``None``) bounds each
    tool call whose tool sets no ``time_limit``: past it the call is cancelled and its result
    is the error ``Tool 'name' did not finish within N s``. ``max_parallel_tools`` (a positive
    int or ``None``) caps how many calls of a parallel batch run at once; the others have
    started and wait for a slot, given in source order. Either one out of range is a
    ``ValueError``. ``budget`` is a ``Budget`` or ``None`` (a ``TypeError`` otherwise).

    Hooks are async callables (a plain function is a ``TypeError``); each is optional:

    - ``convert_to_llm(messages) -> messages``: what the model sees of the
      transcript (default: user, assistant and tool-result messages; the
      default is kept incrementally, so its cost does not grow with the
      transcript).
    - ``transform_context(messages) -> messages``: applied before
      ``convert_to_llm`` (pruning, summaries).
    - ``get_api_key(provider) -> key | None``: asked before every model call
      (keys that expire); falls back to ``api_key``.
    - ``get_steering_messages()`` / ``get_follow_up_messages()``: the queues, each
      returning a list of messages. Steering is polled before the first turn, after each
      turn (unless ``finish_turn`` said ``"end"``), and after ``prepare_next_turn`` when
      nothing is pending; follow-ups only when the run would otherwise end. Neither is
      polled after an abort.
    - ``before_tool_call(BeforeToolCallContext) -> BeforeToolCallResult | None`` /
      ``after_tool_call(AfterToolCallContext) -> AfterToolCallResult | None``: see their
      context classes.
    - ``prepare_request(RequestContext) -> RequestUpdate | None``: just before every
      request (the first too), once this turn's messages (prompts, steering, follow-ups,
      ``NextTurn.messages``) are appended and announced, and before ``transform_context``,
      ``convert_to_llm`` and ``get_api_key``: change the context, model or thinking level
      for this request and the later ones. It polls no queue.
    - ``finish_turn(TurnContext) -> "continue" | "end" | None``: after a reply and
      its tool results are announced, before ``turn_end`` (after an error or aborted reply
      too, whose run ends whatever it says; like every hook, not after the run's abort was
      cancelled): ``"end"`` ends the run after ``turn_end`` with no queue polled and no other
      hook called; ``"continue"`` makes sure the model is asked once more (by the turn the
      tool results, a steering or a follow-up message would start anyway, else with the
      context as it is, after the follow-up queue was found empty); ``None``: the run goes
      on as it would. A run's ``budget`` still ends it; ``"continue"`` every time never does.
    - ``should_stop_after_turn(TurnContext) -> bool``: end the run after this turn (a reply
      that did not end in ``error`` or ``aborted``); asked after ``turn_end`` and the budget,
      not when ``finish_turn`` said ``"end"``, and ``True`` wins over its ``"continue"``.
    - ``prepare_next_turn(TurnContext) -> NextTurn | None``: change the context,
      model or thinking level before another turn, and add messages to it; called before
      the next turn's steering poll and ``turn_start``, only when the run goes on.

    A hook that returns what it may not (``finish_turn`` something other than ``"continue"``,
    ``"end"`` or ``None``; ``prepare_request`` something other than a ``RequestUpdate`` or
    ``None``; ``prepare_next_turn`` something other than a ``NextTurn`` or ``None``) ends the
    run with a ``ValueError`` or ``TypeError`` that shows the value.

    ``session_id`` names the conversation (the prompt cache key and session
    headers the services route by) and ``cache_retention`` says how long its
    prompt cache should live (``"short"``, ``"long"`` or ``"none"``; see
    :data:`trio_agent.CacheRetention`).

    ``tool_time_limit`` (seconds) bounds each tool call whose tool sets no
    ``time_limit`` of its own; ``max_parallel_tools`` caps how many calls of a
    parallel batch run at once (the others wait for a slot).

    An exception from any hook but the two tool hooks ends the run and
    propagates (design.md#errors-that-end-a-run); the tool hooks' exceptions become error results.
    ``budget`` caps what the run may use (tokens, dollars, turns, tool
    calls); the run that reaches it ends, and its ``agent_end`` names it
    (:class:`~trio_agent.Budget`).

    ``api_key`` never appears in ``repr``.
    """

    model: Model
    api_key: str | None = attrs.field(default=None, repr=_hidden)
    temperature: float | None = None
    max_tokens: int | None = None
    reasoning: ReasoningLevel | None = None
    session_id: str | None = attrs.field(default=None, validator=check_session_id)
    cache_retention: CacheRetention = attrs.field(default="short", validator=check_cache_retention)
    headers: Mapping[str, str] = attrs.field(factory=dict)
    max_retries: int = attrs.field(default=2)
    max_retry_delay: float = attrs.field(default=60.0)
    timeouts: Timeouts = attrs.field(default=Timeouts())
    tool_execution: ToolExecution = attrs.field(default="parallel")
    tool_time_limit: float | None = attrs.field(default=None)
    max_parallel_tools: int | None = attrs.field(default=None)
    budget: Budget | None = attrs.field(default=None)
    convert_to_llm: Callable[[Sequence[AgentMessage]], Awaitable[Sequence[LlmMessage]]] | None = (
        attrs.field(default=None, validator=_async_hook)
    )
    transform_context: (
        Callable[[Sequence[AgentMessage]], Awaitable[Sequence[AgentMessage]]] | None
    ) = attrs.field(default=None, validator=_async_hook)
    get_api_key: Callable[[str], Awaitable[str | None]] | None = attrs.field(
        default=None, validator=_async_hook
    )
    get_steering_messages: Callable[[], Awaitable[Sequence[AgentMessage]]] | None = attrs.field(
        default=None, validator=_async_hook
    )
    get_follow_up_messages: Callable[[], Awaitable[Sequence[AgentMessage]]] | None = attrs.field(
        default=None, validator=_async_hook
    )
    before_tool_call: (
        Callable[[BeforeToolCallContext], Awaitable[BeforeToolCallResult | None]] | None
    ) = attrs.field(default=None, validator=_async_hook)
    after_tool_call: (
        Callable[[AfterToolCallContext], Awaitable[AfterToolCallResult | None]] | None
    ) = attrs.field(default=None, validator=_async_hook)
    should_stop_after_turn: Callable[[TurnContext], Awaitable[bool]] | None = attrs.field(
        default=None, validator=_async_hook
    )
    prepare_next_turn: Callable[[TurnContext], Awaitable[NextTurn | None]] | None = attrs.field(
        default=None, validator=_async_hook
    )
    prepare_request: Callable[[RequestContext], Awaitable[RequestUpdate | None]] | None = (
        attrs.field(default=None, validator=_async_hook)
    )
    finish_turn: Callable[[TurnContext], Awaitable[TurnDecision | None]] | None = attrs.field(
        default=None, validator=_async_hook
    )

    @tool_execution.validator
    def _check_tool_execution(self, attribute: attrs.Attribute[str], value: str) -> None:
        if value not in ("parallel", "sequential"):
            raise ValueError(f"tool_execution must be 'parallel' or 'sequential', not {value!r}")

    @max_retries.validator
    def _check_max_retries(self, attribute: attrs.Attribute[Any], value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"max_retries must be an int of 0 or more, not {value!r:.80}")

    @max_retry_delay.validator
    def _check_max_retry_delay(self, attribute: attrs.Attribute[Any], value: Any) -> None:
        # math.inf is allowed: wait as long as the server asks (but never forever).
        if isinstance(value, int | float) and not isinstance(value, bool):
            with contextlib.suppress(OverflowError):  # an int no float holds: refused below
                if float(value) >= 0:  # False for NaN
                    return
        raise ValueError(
            f"max_retry_delay must be a number of seconds of 0 or more, not {shown_number(value)}"
        )

    @timeouts.validator
    def _check_timeouts(self, attribute: attrs.Attribute[Any], value: Any) -> None:
        if not isinstance(value, Timeouts):
            raise TypeError(f"timeouts must be a Timeouts, not {value!r:.80}")

    @tool_time_limit.validator
    def _check_tool_time_limit(self, attribute: attrs.Attribute[Any], value: Any) -> None:
        check_time_limit(value, "tool_time_limit")

    @max_parallel_tools.validator
    def _check_max_parallel_tools(self, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 1
        ):
            raise ValueError(f"max_parallel_tools must be a positive int or None, not {value!r}")

    @budget.validator
    def _check_budget(self, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value is not None and not isinstance(value, Budget):
            raise TypeError(f"budget must be a trio_agent.Budget or None, not {value!r:.80}")


REQUEST_OPTIONS = (
    "temperature",
    "max_tokens",
    "session_id",
    "cache_retention",
    "headers",
    "max_retries",
    "max_retry_delay",
    "timeouts",
)
"""The config's fields that each request carries unchanged, as the fields of its
:class:`~trio_agent.StreamOptions` of the same names, types and defaults (a test checks
that every field of either is here or named as the other's own). The other fields of
``StreamOptions`` are made per request by :func:`stream_options`."""


def stream_options(
    config: AgentLoopConfig, api_key: str | None, reasoning: ReasoningLevel | None
) -> StreamOptions:
    """The options of a request of a run with ``config``: its :data:`REQUEST_OPTIONS`, with
    ``api_key`` (``get_api_key``'s, else the config's) and the thinking level the run asks
    for now (``reasoning``, which hooks may have changed; ``thinking_level`` records it on
    the reply, ``"off"`` included)."""
    return StreamOptions(
        api_key=api_key,
        reasoning=reasoning,
        thinking_level=reasoning or "off",
        **{name: getattr(config, name) for name in REQUEST_OPTIONS},
    )


def check_messages(name: str, messages: Any) -> None:
    """``TypeError`` unless ``messages`` is a sequence of messages (objects with a role)."""
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise TypeError(
            f"{name} must be a sequence of messages, not {type(messages).__name__} "
            f"{messages!r:.80}; for text, pass [UserMessage.text(...)]"
        )
    for index, message in enumerate(messages):
        if not isinstance(getattr(message, "role", None), str):
            raise TypeError(
                f"{name}[{index}] is {message!r:.80}, not a message (an object with a role)"
            )


def check_run_arguments(context: Any, config: Any, emit: Any) -> None:
    """``TypeError`` unless the arguments of a run are of the types it takes."""
    if not isinstance(context, AgentContext):
        raise TypeError(f"context must be an AgentContext, not {type(context).__name__}")
    if not isinstance(config, AgentLoopConfig):
        raise TypeError(f"config must be an AgentLoopConfig, not {type(config).__name__}")
    if not callable(emit):
        raise TypeError(f"emit must be an async callable taking an event, not {emit!r}")
    if inspect.isfunction(emit) and not inspect.iscoroutinefunction(emit):
        raise TypeError(
            "emit must be an async function (async def), "
            f"not the plain function {emit.__qualname__}"
        )
    check_messages("context.messages", context.messages)
