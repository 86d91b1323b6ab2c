"""Shared helpers of the test suite: tools, and virtual time (the checkers are the kit's)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio
from hypothesis import settings

import trio_agent
from trio_agent import (
    AgentTool,
    Cost,
    ToolResult,
    ToolUpdate,
    Usage,
)

ECHO_SCHEMA = {
    "type": "object",
    "properties": {"value": {"type": "string"}},
    "required": ["value"],
}


def make_tool(
    name: str,
    behaviour: Callable[[str, dict[str, Any], ToolUpdate], Awaitable[ToolResult]],
    *,
    schema: dict[str, Any] | None = None,
    execution_mode: Any = None,
) -> AgentTool:
    return AgentTool(
        name=name,
        description=f"the {name} tool",
        parameters=schema if schema is not None else {"type": "object", "properties": {}},
        execute=behaviour,
        execution_mode=execution_mode,
    )


async def echo(tool_call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
    return ToolResult.text("echo:" + str(args.get("value")))


ECHO = make_tool("echo", echo, schema=ECHO_SCHEMA)


def run_with_clock(fn: Callable[[], Awaitable[Any]]) -> Any:
    """``trio.run`` on virtual time that jumps when everything is blocked."""
    import trio.testing

    return trio.run(fn, clock=trio.testing.MockClock(autojump_threshold=0))


__all__ = [
    "ECHO",
    "ECHO_SCHEMA",
    "echo",
    "make_tool",
    "run_with_clock",
    "trio",
    "trio_agent",
]


def examples(share: float) -> settings:
    """Settings that run ``share`` of the profile's examples (the "ci" profile: 1,000)."""
    profile = settings.default
    assert profile is not None
    return settings(max_examples=max(10, round(profile.max_examples * share)))


def usage(
    input: int = 0, output: int = 0, cache_read: int = 0, cache_write: int = 0, cost: float = 0.0
) -> Usage:
    """A reply's usage: these token counts, their total, and ``cost`` dollars in all."""
    return Usage(
        input=input,
        output=output,
        cache_read=cache_read,
        cache_write=cache_write,
        total_tokens=input + output + cache_read + cache_write,
        cost=Cost(total=cost),
    )
