"""The run options are declared once, as the fields of AgentLoopConfig: the Agent's keywords,
its copy into each run's config, each request's StreamOptions and the API reference follow
them."""

from __future__ import annotations

import inspect
import math
import re
import typing
from typing import Any

import attrs
import pytest

from trio_agent import (
    Agent,
    AgentContext,
    AgentLoopConfig,
    Budget,
    RequestUpdate,
    StreamOptions,
    TextContent,
    Timeouts,
    UserMessage,
    default_convert_to_llm,
    run_agent_loop,
)
from trio_agent._config import REQUEST_OPTIONS
from trio_agent.providers import faux

# The config fields an Agent fills in for each run, from its state and its queues.
PER_RUN = frozenset({"model", "reasoning", "get_steering_messages", "get_follow_up_messages"})
# The Agent's keywords that are not config fields: its state, its queue modes and the
# stream function it runs with.
AGENT_ONLY = frozenset(
    {
        "system_prompt",
        "tools",
        "messages",
        "thinking_level",
        "stream_fn",
        "steering_mode",
        "follow_up_mode",
    }
)
# The config fields a request does not carry: what the loop itself does with them.
LOOP_ONLY = frozenset(
    {
        "model",
        "tool_execution",
        "tool_time_limit",
        "max_parallel_tools",
        "budget",
        "convert_to_llm",
        "transform_context",
        "get_api_key",
        "get_steering_messages",
        "get_follow_up_messages",
        "before_tool_call",
        "after_tool_call",
        "should_stop_after_turn",
        "prepare_next_turn",
        "prepare_request",
        "finish_turn",
    }
)
# The fields of StreamOptions made for each request: the key (get_api_key's, else the
# config's), the thinking level the run asks for now, and the level the reply records.
PER_REQUEST = frozenset({"api_key", "reasoning", "thinking_level"})
FIELDS = {field.name: field for field in attrs.fields(AgentLoopConfig)}
STREAM_FIELDS = {field.name: field for field in attrs.fields(StreamOptions)}
OPTIONS = sorted(FIELDS.keys() - PER_RUN)


def _hook() -> Any:
    async def hook(*args: object) -> None:
        return None

    return hook


# A value other than the default for every option.
SAMPLES: dict[str, Any] = {
    "after_tool_call": _hook(),
    "api_key": "sk-sample",
    "before_tool_call": _hook(),
    "budget": Budget(turns=3, cost=0.5),
    "convert_to_llm": _hook(),
    "finish_turn": _hook(),
    "get_api_key": _hook(),
    "headers": {"x-sample": "1"},
    "max_parallel_tools": 4,
    "max_retries": 5,
    "max_retry_delay": 1.5,
    "max_tokens": 123,
    "prepare_next_turn": _hook(),
    "prepare_request": _hook(),
    "session_id": "session-1",
    "cache_retention": "long",
    "should_stop_after_turn": _hook(),
    "temperature": 0.25,
    "timeouts": Timeouts(connect=1.0, first_byte=2.0, idle=3.0),
    "tool_execution": "sequential",
    "tool_time_limit": 30.0,
    "transform_context": _hook(),
}


def _keywords() -> dict[str, inspect.Parameter]:
    parameters = dict(inspect.signature(Agent).parameters)
    assert parameters.pop("model").kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    return parameters


def _mentions(text: str, name: str) -> bool:
    return re.search(rf"`{re.escape(name)}\b", text) is not None


def test_the_agent_takes_each_option_as_a_keyword() -> None:
    keywords = _keywords()
    assert sorted(keywords) == sorted({*OPTIONS, *AGENT_ONLY})
    assert {parameter.kind for parameter in keywords.values()} == {inspect.Parameter.KEYWORD_ONLY}


def test_each_option_keyword_has_the_type_and_default_of_its_field() -> None:
    keywords = _keywords()
    agent_types = typing.get_type_hints(Agent.__init__)
    field_types = typing.get_type_hints(AgentLoopConfig)
    for name in OPTIONS:
        field, default = FIELDS[name], keywords[name].default
        if name == "headers":  # None also means no headers
            assert (agent_types[name], default) == (field_types[name] | None, None)
            assert field.default == attrs.Factory(dict)
        else:
            assert (name, agent_types[name], default) == (name, field_types[name], field.default)


def test_the_samples_cover_every_option() -> None:
    assert sorted(SAMPLES) == OPTIONS
    for name, value in SAMPLES.items():
        assert value != FIELDS[name].default, name


@pytest.mark.parametrize("name", OPTIONS)
def test_each_option_is_copied_into_each_runs_config(name: str) -> None:
    agent = Agent(faux.model([]), **{name: SAMPLES[name]})
    for _ in range(2):
        config = agent._loop_config(skip_first_steering_poll=False)
        assert getattr(config, name) == SAMPLES[name]
        others = [other for other in OPTIONS if other not in (name, "convert_to_llm")]
        defaults = AgentLoopConfig(model=config.model)
        assert [getattr(config, o) for o in others] == [getattr(defaults, o) for o in others]


def test_the_agent_copies_the_headers_it_is_given() -> None:
    headers = {"x-sample": "1"}
    agent = Agent(faux.model([]), headers=headers)
    headers["x-sample"] = "2"
    assert agent._loop_config(skip_first_steering_poll=False).headers == {"x-sample": "1"}


async def test_the_agent_fills_in_the_per_run_fields() -> None:
    first, second = faux.model([], id="first"), faux.model([], id="second")
    agent = Agent(first, thinking_level="high")
    config = agent._loop_config(skip_first_steering_poll=False)
    assert (config.model, config.reasoning, config.convert_to_llm) == (
        first,
        "high",
        default_convert_to_llm,
    )
    agent.set_model(second)
    agent.set_thinking_level("off")
    agent.steer("now")
    agent.follow_up("later")
    config = agent._loop_config(skip_first_steering_poll=False)
    assert (config.model, config.reasoning) == (second, None)
    assert config.get_steering_messages is not None
    assert config.get_follow_up_messages is not None
    queued = [*await config.get_steering_messages(), *await config.get_follow_up_messages()]
    assert [(m.role, m.content) for m in queued if isinstance(m, UserMessage)] == [
        ("user", (TextContent("now"),)),
        ("user", (TextContent("later"),)),
    ]


def test_the_configs_docstring_describes_each_field() -> None:
    text = inspect.getdoc(AgentLoopConfig) or ""
    assert [name for name in FIELDS if not _mentions(text, name)] == []


def test_the_agents_docstring_says_what_it_does_with_the_other_keywords_and_fields() -> None:
    text = inspect.getdoc(Agent) or ""
    assert _mentions(text, "AgentLoopConfig")
    assert [name for name in sorted(AGENT_ONLY | PER_RUN) if not _mentions(text, name)] == []


# -- each request's options ------------------------------------------------------------------------


def test_each_config_field_is_a_request_option_or_the_loops_own() -> None:
    request = {*REQUEST_OPTIONS, "api_key", "reasoning"}
    assert len(REQUEST_OPTIONS) == len(set(REQUEST_OPTIONS))
    assert request.isdisjoint(LOOP_ONLY)
    assert sorted(FIELDS) == sorted(request | LOOP_ONLY)


def test_stream_options_are_the_request_options_and_those_made_per_request() -> None:
    assert set(REQUEST_OPTIONS).isdisjoint(PER_REQUEST)
    assert sorted(STREAM_FIELDS) == sorted({*REQUEST_OPTIONS, *PER_REQUEST})


@pytest.mark.parametrize("name", [*REQUEST_OPTIONS, "api_key", "reasoning"])
def test_each_request_option_has_the_type_and_default_of_its_config_field(name: str) -> None:
    stream_types = typing.get_type_hints(StreamOptions)
    config_types = typing.get_type_hints(AgentLoopConfig)
    assert (stream_types[name], STREAM_FIELDS[name].default) == (
        config_types[name],
        FIELDS[name].default,
    )


@pytest.mark.parametrize("name", [*REQUEST_OPTIONS, "api_key"])
async def test_each_request_option_given_to_an_agent_reaches_each_request(name: str) -> None:
    model = faux.model(["one", "two"])
    agent = Agent(model, thinking_level="high", **{name: SAMPLES[name]})
    await agent.prompt("hi")
    await agent.prompt("again")
    for call in model.calls:
        options = call.options
        assert getattr(options, name) == SAMPLES[name]
        others = [other for other in REQUEST_OPTIONS if other != name]
        assert [getattr(options, other) for other in others] == [
            FIELDS[other].default if other != "headers" else {} for other in others
        ]
        assert (options.reasoning, options.thinking_level) == ("high", "high")


async def test_a_thinking_level_a_hook_sets_reaches_the_next_request() -> None:
    # one run of two requests: the run's options, made once, are made again for the second
    model = faux.model([faux.reply(faux.tool_call("missing", {})), "two"])

    async def lower(request: Any) -> Any:
        return RequestUpdate(thinking_level="off") if len(model.calls) == 1 else None

    config = AgentLoopConfig(model=model, reasoning="high", prepare_request=lower)
    await run_agent_loop([UserMessage.text("hi")], AgentContext(), config, _ignore)
    levels = [(call.options.reasoning, call.options.thinking_level) for call in model.calls]
    assert levels == [("high", "high"), (None, "off")]


async def _ignore(event: object) -> None:
    pass


# -- the request options a config refuses ----------------------------------------------------------

REFUSED: list[tuple[str, Any, type[Exception], str]] = [
    ("max_retries", -1, ValueError, "max_retries must be an int of 0 or more, not -1"),
    ("max_retries", True, ValueError, "max_retries must be an int of 0 or more, not True"),
    ("max_retries", 2.0, ValueError, "max_retries must be an int of 0 or more, not 2.0"),
    (
        "max_retry_delay",
        math.nan,
        ValueError,
        "max_retry_delay must be a number of seconds of 0 or more, not nan",
    ),
    (
        "max_retry_delay",
        -0.5,
        ValueError,
        "max_retry_delay must be a number of seconds of 0 or more, not -0.5",
    ),
    (
        "max_retry_delay",
        10**400,
        ValueError,
        "max_retry_delay must be a number of seconds of 0 or more, not an int of 1329 bits "
        "(too large for a float)",
    ),
    (
        "max_retry_delay",
        "60",
        ValueError,
        "max_retry_delay must be a number of seconds of 0 or more, not '60'",
    ),
    ("timeouts", 5, TypeError, "timeouts must be a Timeouts, not 5"),
    (
        "cache_retention",
        "forever",
        ValueError,
        "cache_retention must be 'none', 'short' or 'long', not 'forever'",
    ),
    (
        "cache_retention",
        None,
        ValueError,
        "cache_retention must be 'none', 'short' or 'long', not None",
    ),
    ("session_id", 123, TypeError, "session_id must be a str or None, not int 123"),
    ("session_id", b"s-1", TypeError, "session_id must be a str or None, not bytes b's-1'"),
]


@pytest.mark.parametrize("bad", [123, b"s-1", ["s-1"]])
def test_stream_options_refuse_a_session_id_that_is_not_a_string(bad: Any) -> None:
    """A request sends the session id in its body and headers: one that is not a string
    is refused where it is given, not by the provider in the middle of a run."""
    with pytest.raises(TypeError, match=r"^session_id must be a str or None, not "):
        StreamOptions(session_id=bad)


@pytest.mark.parametrize(("name", "bad", "kind", "message"), REFUSED)
def test_a_config_and_an_agent_refuse_request_options_out_of_range(
    name: str, bad: Any, kind: type[Exception], message: str
) -> None:
    model = faux.model(["hi"])
    for make in (AgentLoopConfig, Agent):
        with pytest.raises(kind) as info:
            make(model=model, **{name: bad})
        assert str(info.value) == message


@pytest.mark.parametrize(
    ("name", "value"), [("max_retries", 0), ("max_retry_delay", 0), ("max_retry_delay", math.inf)]
)
def test_the_edges_of_the_request_options_are_taken(name: str, value: Any) -> None:
    assert getattr(AgentLoopConfig(model=faux.model(["hi"]), **{name: value}), name) == value


@pytest.mark.parametrize("field", ["connect", "first_byte", "idle"])
@pytest.mark.parametrize("bad", [0, -1, math.inf, math.nan, True, "10", 10**400])
def test_a_timeout_must_be_a_positive_finite_number(field: str, bad: Any) -> None:
    with pytest.raises(
        ValueError,
        match=rf"^timeouts\.{field} must be a positive finite number "
        "of seconds or None, not ",
    ):
        Timeouts(**{field: bad})


def test_the_smallest_timeouts_and_none_are_taken() -> None:
    timeouts = Timeouts(connect=5e-324, first_byte=None, idle=1.7e308)
    assert (timeouts.connect, timeouts.first_byte, timeouts.idle) == (5e-324, None, 1.7e308)
