"""Hypothesis strategies for trio_agent: messages, tool behaviours, scripted replies, scenarios.

This is the only module of trio_agent that imports :mod:`hypothesis`;
``import trio_agent.testing`` does not import it. Every strategy is a
function returning a :class:`~hypothesis.strategies.SearchStrategy`.

* Content and messages: :func:`text_content`, :func:`thinking_content`,
  :func:`image_content`, :func:`tool_calls`, :func:`user_messages`,
  :func:`assistant_messages`, :func:`tool_result_messages`, :func:`messages`,
  and :func:`transcripts` (valid ones: every tool call answered, so they pass
  :func:`~trio_agent.testing.check_transcript` and round-trip through
  :func:`trio_agent.dumps` / :func:`trio_agent.loads`).
* Tools: a :class:`ToolBehaviour` says what one call does on Trio's clock
  (how long it works, how it ends, its progress updates, how long it ignores
  or cleans up after a cancellation); :func:`tool_behaviours` draws them and
  :func:`behaviour_tool` makes an :class:`~trio_agent.AgentTool` that acts
  them out.
* Replies for the scripted model: :func:`replies`.
* Whole scenarios: a :class:`Scenario` is a script of replies, the
  behaviour of every tool call, and things done to the run while it goes
  (:class:`Injection`: steer, follow up, abort, cancel from outside, fail a
  listener — at a virtual time or at the n-th event of a type).
  :func:`scenarios` draws them; :func:`run_scenario` plays one with
  :func:`~trio_agent.run_agent_loop` or an :class:`~trio_agent.Agent` and
  returns a :class:`ScenarioResult`: the events, the transcript, what was
  raised, and a :class:`Mark` timeline of everything that happened, in order,
  with its virtual time; :func:`play` does the same in a fresh ``trio.run``
  on virtual time with Trio's scheduler seeded, so that a failing example
  replays exactly::

    @given(strategies.scenarios(), st.integers(0, 2**32 - 1))
    def test_my_invariant(scenario, seed):
        result = strategies.play(scenario, seed=seed)
        check_event_grammar(result.events, complete=result.returned)

The scenario types (:class:`Scenario`, :class:`Injection`,
:class:`ToolBehaviour`, :class:`Mark`, ...) and the player
(:func:`run_scenario`, :func:`play`, :func:`trace`) are defined in
:mod:`trio_agent.testing._scenarios`, which does not import hypothesis, and
re-exported here; this module holds the strategies that draw them.
"""

from __future__ import annotations

import base64
import typing
from collections.abc import Sequence
from typing import Any, Literal

import attrs
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from .. import _public
from .._config import TurnDecision
from .._messages import (
    AgentMessage,
    AssistantContent,
    AssistantMessage,
    Cost,
    ErrorKind,
    ImageContent,
    Message,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultContent,
    ToolResultMessage,
    Usage,
    UserContent,
    UserMessage,
)
from ..providers import faux
from ._scenarios import (
    EVENT_TYPES,
    SCENARIO_TOOLS,
    BehaviourError,
    InjectedFailure,
    Injection,
    Mark,
    Outcome,
    Scenario,
    ScenarioResult,
    ToolBehaviour,
    behaviour_tool,
    play,
    run_scenario,
    scenario_tools,
    trace,
)
from ._scenarios import InjectionKind as InjectionKind
from ._scenarios import Timeline as Timeline

__all__ = [
    "EVENT_TYPES",
    "SCENARIO_TOOLS",
    "BehaviourError",
    "InjectedFailure",
    "Injection",
    "Mark",
    "Outcome",
    "Scenario",
    "ScenarioResult",
    "ToolBehaviour",
    "assistant_messages",
    "behaviour_tool",
    "image_content",
    "injections",
    "json_objects",
    "messages",
    "play",
    "replies",
    "run_scenario",
    "scenario_tools",
    "scenarios",
    "text_content",
    "thinking_content",
    "tool_behaviours",
    "tool_calls",
    "tool_result_messages",
    "trace",
    "transcripts",
    "usages",
    "user_messages",
]

# --- content blocks and messages -----------------------------------------------------------------

_SHORT_TEXT = st.text(max_size=12)
_SIGNATURES = st.none() | st.text(alphabet="abcdefXYZ0123456789+/=", min_size=1, max_size=12)
_NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=10)
_TIMESTAMPS = st.integers(0, 2**48)
_MIME_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


def text_content(text: SearchStrategy[str] | None = None) -> SearchStrategy[TextContent]:
    """Text blocks: any text (or drawn from ``text``), sometimes with a signature."""
    return st.builds(TextContent, _SHORT_TEXT if text is None else text, text_signature=_SIGNATURES)


def thinking_content(text: SearchStrategy[str] | None = None) -> SearchStrategy[ThinkingContent]:
    """Thinking blocks: any text, sometimes signed, sometimes redacted."""
    return st.builds(
        ThinkingContent,
        _SHORT_TEXT if text is None else text,
        thinking_signature=_SIGNATURES,
        redacted=st.booleans(),
    )


def image_content() -> SearchStrategy[ImageContent]:
    """Image blocks: a few random bytes, base64-encoded, with an image MIME type."""
    return st.builds(
        ImageContent,
        st.binary(max_size=24).map(lambda data: base64.b64encode(data).decode("ascii")),
        st.sampled_from(_MIME_TYPES),
    )


def json_objects(max_leaves: int = 8) -> SearchStrategy[dict[str, Any]]:
    """JSON objects (tool-call arguments, details): nested dicts and lists of JSON scalars.

    Floats are finite, so every value survives a trip through JSON.
    """
    scalars = (
        st.none()
        | st.booleans()
        | st.integers(-(2**53), 2**53)
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=8)
    )
    values = st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
        max_leaves=max_leaves,
    )
    return st.dictionaries(st.text(max_size=8), values, max_size=4)


def tool_calls(
    names: Sequence[str] | None = None,
    *,
    ids: SearchStrategy[str] | None = None,
    arguments: SearchStrategy[dict[str, Any]] | None = None,
) -> SearchStrategy[ToolCall]:
    """Tool calls: a name (one of ``names``, or any identifier), an id, JSON arguments,
    sometimes a thought signature. Ids are drawn independently: use :func:`transcripts`
    (or your own ``ids``) when they must be unique."""
    return st.builds(
        ToolCall,
        st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_", min_size=1, max_size=12)
        if ids is None
        else ids,
        _NAMES if names is None else st.sampled_from(list(names)),
        json_objects() if arguments is None else arguments,
        thought_signature=_SIGNATURES,
    )


_any_tool_calls = tool_calls


def usages() -> SearchStrategy[Usage]:
    """Token counts and costs (finite, non-negative)."""
    counts = st.integers(0, 10**7)
    money = st.floats(0, 100, allow_nan=False)
    return st.builds(
        Usage,
        input=counts,
        output=counts,
        cache_read=counts,
        cache_write=counts,
        cache_write_long=counts,
        total_tokens=counts,
        cost=st.builds(
            Cost, input=money, output=money, cache_read=money, cache_write=money, total=money
        ),
    )


def user_messages() -> SearchStrategy[UserMessage]:
    """User messages: a plain string, or a tuple of text and image blocks."""
    blocks: SearchStrategy[tuple[UserContent, ...]] = st.lists(
        text_content() | image_content(), max_size=3
    ).map(tuple)
    return st.builds(UserMessage, st.text(max_size=20) | blocks, timestamp=_TIMESTAMPS)


_ALL_STOP_REASONS: tuple[StopReason, ...] = ("stop", "length", "toolUse", "error", "aborted")
_ERROR_KINDS: tuple[ErrorKind, ...] = typing.get_args(ErrorKind)


def _assistant(
    content: Sequence[AssistantContent], stop_reason: StopReason, draw: st.DrawFn
) -> AssistantMessage:
    failed = stop_reason in ("error", "aborted")
    return AssistantMessage(
        content=tuple(content),
        api=draw(st.sampled_from(["faux", "openai-chat", "anthropic-messages"])),
        provider=draw(st.sampled_from(["faux", "openai", "anthropic"])),
        model=draw(st.sampled_from(["faux", "gpt-x", "claude-y"])),
        usage=draw(usages()),
        stop_reason=stop_reason,
        error_message=draw(st.text(min_size=1, max_size=20)) if failed else None,
        error_kind=draw(st.none() | st.sampled_from(_ERROR_KINDS)) if failed else None,
        http_status=draw(st.none() | st.integers(100, 599)) if failed else None,
        retry_after=draw(st.none() | st.floats(0, 3600)) if failed else None,
        response_id=draw(st.none() | st.text(max_size=10)),
        timestamp=draw(_TIMESTAMPS),
    )


@st.composite
def _assistant_messages(
    draw: st.DrawFn,
    stop_reasons: Sequence[StopReason],
    calls: SearchStrategy[ToolCall],
    max_tool_calls: int,
) -> AssistantMessage:
    stop_reason = draw(st.sampled_from(list(stop_reasons)))
    content: list[AssistantContent] = draw(
        st.lists(text_content() | thinking_content(), max_size=2)
    )
    content += draw(st.lists(calls, max_size=max_tool_calls))
    return _assistant(content, stop_reason, draw)


def assistant_messages(
    *,
    stop_reasons: Sequence[StopReason] = _ALL_STOP_REASONS,
    tool_calls: SearchStrategy[ToolCall] | None = None,
    max_tool_calls: int = 3,
) -> SearchStrategy[AssistantMessage]:
    """Assistant messages: text and thinking blocks, then up to ``max_tool_calls`` calls;
    an error message (and maybe a kind, an HTTP status, a retry delay) when the stop
    reason is ``error`` or ``aborted``."""
    calls = _any_tool_calls() if tool_calls is None else tool_calls
    return _assistant_messages(stop_reasons, calls, max_tool_calls)


def tool_result_messages(
    tool_call_ids: SearchStrategy[str] | None = None,
) -> SearchStrategy[ToolResultMessage]:
    """Tool-result messages: text and image content, JSON details, sometimes an error, and a
    ``duration`` (whole milliseconds, as the loop measures it) or none."""
    content: SearchStrategy[tuple[ToolResultContent, ...]] = st.lists(
        text_content() | image_content(), max_size=3
    ).map(tuple)
    return st.builds(
        ToolResultMessage,
        tool_call_id=st.text(min_size=1, max_size=12) if tool_call_ids is None else tool_call_ids,
        tool_name=_NAMES,
        content=content,
        details=st.none() | json_objects(max_leaves=4),
        is_error=st.booleans(),
        usage=st.none() | usages(),
        timestamp=_TIMESTAMPS,
        duration=st.none() | st.integers(0, 10**9).map(lambda ms: ms / 1000),
    )


def messages() -> SearchStrategy[Message]:
    """Any one message: user, assistant or tool result (not a transcript: see
    :func:`transcripts`)."""
    return user_messages() | assistant_messages() | tool_result_messages()


@st.composite
def _transcripts(draw: st.DrawFn, max_exchanges: int, max_tool_calls: int) -> list[AgentMessage]:
    out: list[AgentMessage] = []
    counter = 0
    for _ in range(draw(st.integers(0, max_exchanges))):
        out.append(draw(user_messages()))
        for _ in range(draw(st.integers(1, 3))):
            stop_reason = draw(st.sampled_from(_ALL_STOP_REASONS))
            content: list[AssistantContent] = draw(
                st.lists(text_content() | thinking_content(), max_size=2)
            )
            calls = []
            for _ in range(draw(st.integers(0, max_tool_calls))):
                counter += 1
                call = draw(tool_calls(ids=st.just(f"call_{counter}")))
                calls.append(call)
            message = _assistant([*content, *calls], stop_reason, draw)
            out.append(message)
            if stop_reason in ("error", "aborted"):
                break
            for call in calls:
                result = draw(tool_result_messages(st.just(call.id)))
                out.append(attrs.evolve(result, tool_name=call.name))
            if not calls:
                break
    return out


def transcripts(
    *, max_exchanges: int = 4, max_tool_calls: int = 3
) -> SearchStrategy[list[AgentMessage]]:
    """Valid transcripts: user messages each followed by assistant replies; every tool call
    of a reply that is not ``error`` / ``aborted`` is answered right after it, in order, and
    tool-call ids are unique. They pass :func:`~trio_agent.testing.check_transcript` and
    round-trip through :func:`trio_agent.dumps` / :func:`trio_agent.loads`."""
    return _transcripts(max_exchanges, max_tool_calls)


# --- tool behaviours -----------------------------------------------------------------------------

_DEFAULT_OUTCOMES: tuple[Outcome, ...] = (
    "return",
    "return",
    "return",
    "return",
    "raise",
    "raise_group",
    "hang",
    "terminate",
    "error",
)


def tool_behaviours(
    *,
    outcomes: Sequence[Outcome] = _DEFAULT_OUTCOMES,
    durations: Sequence[float] = (0.0, 0.0, 0.005, 0.01, 0.02),
    max_updates: int = 2,
    shields: Sequence[float] = (0.0, 0.0, 0.0, 0.007),
    cleanups: Sequence[float] = (0.0, 0.0, 0.0, 0.003),
) -> SearchStrategy[ToolBehaviour]:
    """Tool behaviours; each field is drawn from its parameter (repeat a value to weight it).

    ``interrupt`` is not among the default outcomes: pass it in ``outcomes``
    when the code under test is meant to let ``KeyboardInterrupt`` through.
    """
    return st.builds(
        ToolBehaviour,
        duration=st.sampled_from(list(durations)),
        outcome=st.sampled_from(list(outcomes)),
        updates=st.integers(0, max_updates),
        shield=st.sampled_from(list(shields)),
        cleanup=st.sampled_from(list(cleanups)),
        structured=st.booleans(),
    )


# --- scripted replies ----------------------------------------------------------------------------


@st.composite
def _replies(
    draw: st.DrawFn,
    tool_names: Sequence[str],
    min_tool_calls: int,
    max_tool_calls: int,
    id_prefix: str | None,
    stop_reasons: Sequence[StopReason | None],
    text: SearchStrategy[str],
    chunk_sizes: SearchStrategy[int],
    chunk_delays: SearchStrategy[float],
    start_delays: SearchStrategy[float],
) -> faux.Reply:
    content: list[AssistantContent] = []
    if draw(st.integers(0, 3)) == 0:
        content.append(
            faux.thinking(
                draw(text),
                signature=draw(st.none() | st.just("sig")),
                redacted=draw(st.booleans()),
            )
        )
    if draw(st.booleans()):
        content.append(faux.text(draw(text)))
    count = draw(st.integers(min_tool_calls, max_tool_calls)) if tool_names else 0
    for index in range(count):
        call_id = "" if id_prefix is None else f"{id_prefix}{index}"
        content.append(
            faux.tool_call(draw(st.sampled_from(list(tool_names))), {"n": index}, id=call_id)
        )
    if count and draw(st.integers(0, 3)) == 0:
        content.append(faux.text(draw(text)))
    stop_reason = draw(st.sampled_from(list(stop_reasons)))
    error_message = None
    if stop_reason in ("error", "aborted"):
        error_message = draw(st.sampled_from([None, "the provider failed"]))
    return faux.Reply(
        content=content,
        stop_reason=stop_reason,
        error_message=error_message,
        chunk_size=draw(chunk_sizes),
        chunk_delay=draw(chunk_delays),
        start_delay=draw(start_delays),
    )


def replies(
    tool_names: Sequence[str] = (),
    *,
    min_tool_calls: int = 0,
    max_tool_calls: int = 3,
    id_prefix: str | None = None,
    stop_reasons: Sequence[StopReason | None] = (None, None, None, "length", "error", "aborted"),
    text: SearchStrategy[str] | None = None,
    chunk_sizes: SearchStrategy[int] | None = None,
    chunk_delays: SearchStrategy[float] | None = None,
    start_delays: SearchStrategy[float] | None = None,
) -> SearchStrategy[faux.Reply]:
    """Replies for the scripted model (:func:`trio_agent.testing.scripted_model`).

    Each is an optional thinking block, an optional text block, then between
    ``min_tool_calls`` and ``max_tool_calls`` calls to ``tool_names`` (none
    without names; arguments ``{"n": index}``; ids ``f"{id_prefix}{index}"``,
    or the scripted model's own when ``id_prefix`` is None), sometimes a text
    after them; a stop reason from ``stop_reasons`` (``None``: ``toolUse``
    with calls, else ``stop``), streamed in chunks of ``chunk_sizes``
    characters (0: whole blocks), ``chunk_delays`` seconds apart, after
    ``start_delays`` seconds.
    """
    return _replies(
        tuple(tool_names),
        min_tool_calls,
        max_tool_calls,
        id_prefix,
        tuple(stop_reasons),
        st.text("abcxyz ", max_size=8) if text is None else text,
        st.integers(0, 3) if chunk_sizes is None else chunk_sizes,
        st.sampled_from([0.0, 0.0, 0.002]) if chunk_delays is None else chunk_delays,
        st.sampled_from([0.0, 0.0, 0.0, 0.001]) if start_delays is None else start_delays,
    )


# --- scenarios -----------------------------------------------------------------------------------

# Where most of a run happens gets most of the injections (and comes first: hypothesis
# leans towards the first choices).
_EVENT_TRIGGERS = st.tuples(
    st.sampled_from(
        [
            "message_update",
            "tool_execution_start",
            "tool_execution_update",
            "tool_execution_end",
            "turn_end",
            "message_update",
            "message_end",
            "message_start",
            "turn_start",
            "agent_start",
        ]
    ),
    st.integers(1, 3),
)
_TIMES = st.integers(0, 60).map(lambda ms: ms / 1000)
_DECISION_CHOICES: list[TurnDecision | None] = [None, "continue", "end"]
_DECISIONS = st.lists(st.sampled_from(_DECISION_CHOICES), max_size=3).map(tuple)
_MESSAGE_COUNTS = st.lists(st.integers(0, 2), max_size=3).map(tuple)


def _injection(kind: InjectionKind, at_event_only: bool = False) -> SearchStrategy[Injection]:
    by_event = st.builds(Injection, st.just(kind), at_event=_EVENT_TRIGGERS)
    if at_event_only:
        return by_event
    return by_event | st.builds(Injection, st.just(kind), at=_TIMES)


@st.composite
def _injections(
    draw: st.DrawFn, kinds: Sequence[InjectionKind], max_messages: int
) -> tuple[Injection, ...]:
    out: list[Injection] = []
    for kind in ("steer", "follow_up"):
        if kind in kinds:
            out += draw(st.lists(_injection(kind), max_size=max_messages))
    if "abort" in kinds and draw(st.integers(0, 2)) > 0:
        out.append(draw(_injection("abort")))
    if "outer_cancel" in kinds and draw(st.integers(0, 6)) == 0:
        out.append(draw(_injection("outer_cancel")))
    if "listener_failure" in kinds and draw(st.integers(0, 7)) == 0:
        out.append(draw(_injection("listener_failure", at_event_only=True)))
    return tuple(draw(st.permutations(out)))


_ALL_KINDS: tuple[InjectionKind, ...] = (
    "steer",
    "follow_up",
    "abort",
    "outer_cancel",
    "listener_failure",
)


def injections(
    kinds: Sequence[InjectionKind] = _ALL_KINDS, *, max_messages: int = 3
) -> SearchStrategy[tuple[Injection, ...]]:
    """Injections for a scenario, of the given kinds: up to ``max_messages`` steering and
    follow-up messages each; an abort two times in three; rarely an outer cancellation or a
    listener failure. Times are 0-60 ms; events are the 1st-3rd of a type (message
    updates and tool events more often than the rest)."""
    return _injections(tuple(kinds), max_messages)


_any_injections = injections


@st.composite
def _scenarios(
    draw: st.DrawFn,
    max_turns: int,
    max_tool_calls: int,
    behaviours: SearchStrategy[ToolBehaviour],
    chosen_injections: SearchStrategy[tuple[Injection, ...]],
    tool_names: Sequence[str],
    final_stop_reasons: Sequence[StopReason | None],
    broken_streams: bool,
    failing_hooks: bool,
    turn_hooks: bool,
) -> Scenario:
    script: list[faux.Reply] = []
    table: dict[str, ToolBehaviour] = {}
    hooks: dict[str, Literal["before", "after"]] = {}
    for turn in range(draw(st.integers(0, max_turns))):
        reply = draw(
            replies(
                tool_names,
                min_tool_calls=1,
                max_tool_calls=max_tool_calls,
                id_prefix=f"t{turn}_",
                stop_reasons=(None, None, None, None, "length"),
            )
        )
        for block in reply.content:
            if isinstance(block, ToolCall):
                table[block.id] = draw(behaviours)
                if failing_hooks and draw(st.integers(0, 7)) == 0:
                    hooks[block.id] = draw(st.sampled_from(["before", "after"]))
        script.append(reply)
    if broken_streams and draw(st.integers(0, 15)) == 0:
        script.append(faux.Reply(raises=InjectedFailure("the stream function broke")))
    else:
        script.append(draw(replies(stop_reasons=final_stop_reasons)))
    chosen = draw(chosen_injections)
    timed_end = any(i.kind in ("abort", "outer_cancel") and i.at is not None for i in chosen)
    scenario = Scenario(
        replies=tuple(script),
        behaviours=table,
        failing_hooks=hooks,
        injections=chosen,
        tool_execution=draw(st.sampled_from(["parallel", "parallel", "sequential"])),
        steering_mode=draw(st.sampled_from(["one-at-a-time", "all"])),
        follow_up_mode=draw(st.sampled_from(["one-at-a-time", "all"])),
        listener_delay=draw(st.sampled_from([0.0, 0.0, 0.0, 0.001])),
        tool_time_limit=draw(st.sampled_from([None, None, None, 0.008, 0.015])),
        max_parallel_tools=draw(st.sampled_from([None, None, None, 1, 2])),
    )
    if turn_hooks:
        scenario = attrs.evolve(
            scenario,
            finish_turn=draw(st.none() | st.none() | _DECISIONS),
            prepare_request=draw(st.sampled_from([False, False, False, True])),
            next_turn_messages=draw(st.none() | st.none() | _MESSAGE_COUNTS),
        )
    if scenario.hangs and not timed_end:
        # Something must end a hanging tool: an abort at a time after everything else.
        scenario = attrs.evolve(scenario, injections=(*chosen, Injection("abort", at=0.1)))
    return scenario


def scenarios(
    *,
    max_turns: int = 3,
    max_tool_calls: int = 4,
    behaviours: SearchStrategy[ToolBehaviour] | None = None,
    injections: SearchStrategy[tuple[Injection, ...]] | None = None,
    tool_names: Sequence[str] = ("work", "work", "work", "work", "solo", "strict", "missing"),
    final_stop_reasons: Sequence[StopReason | None] = (None, None, None, None, "error", "aborted"),
    broken_streams: bool = True,
    failing_hooks: bool = True,
    turn_hooks: bool = True,
) -> SearchStrategy[Scenario]:
    """Whole scenarios: up to ``max_turns`` replies with 1-``max_tool_calls`` tool calls
    each (to ``tool_names``, repeat a name to weight it; a tool-call reply may stop for
    ``length``), then a last reply without calls (its stop reason from
    ``final_stop_reasons``; rarely, with ``broken_streams``, a stream function that
    raises :class:`InjectedFailure`), a behaviour per call, sometimes a failing
    hook, and injections; with ``turn_hooks``, some scenarios have a ``finish_turn``
    (returning ``None``, ``"continue"`` or ``"end"``), a ``prepare_request`` or a
    ``prepare_next_turn`` that adds messages; some scenarios set a ``tool_time_limit`` or
    ``max_parallel_tools``. A scenario whose tool may hang gets an abort at 100 ms
    unless an abort or outer cancellation at a time is already injected.
    """
    return _scenarios(
        max_turns,
        max_tool_calls,
        tool_behaviours() if behaviours is None else behaviours,
        _any_injections() if injections is None else injections,
        tuple(tool_names),
        tuple(final_stop_reasons),
        broken_streams,
        failing_hooks,
        turn_hooks,
    )


_public.fixup_module_metadata(__name__, globals())
