"""Run one conformance scenario with trio_agent and print its normalized lines.

    python tests/conformance/runner.py SCENARIO.json

The scenario format and the output are those of ``FORMAT.md``, beside this file
(FORMAT.md#the-scenario-file): scripted replies, scripted tools, hook rules and
actions in; one canonical JSON value per line out — the events of each run as
emitted, harness lines (``#run``, ``#action``, ``#run_end``) and a final
``#result`` line (FORMAT.md#the-output).

How the scenario semantics map onto Trio (the conformance README):

* time is ``trio.sleep(ms / 1000)`` under ``MockClock(autojump_threshold=0)``;
* the scripted stream is the faux provider, which is lock-step: each event is made
  when the loop asks for it (FORMAT.md#pulled-one-event-at-a-time);
* a tool that honours abort is simply cancelled; one with ``honorAbort:
  false`` runs its body in a shielded cancel scope;
* ``afterMs`` actions run in a task of the harness's nursery, ``on`` actions
  inside the listener after the triggering line was printed.

A scenario in ``scenarios_1_6/`` is printed in the 1.6 format
(FORMAT.md#the-16-format): durations (``timed``), structured content and a result's own
``is_error`` are in its lines, and its keys drive ``prepare_request``, ``finish_turn``,
``NextTurn.messages`` and ``run_tool_call``.

Drivers: ``loop`` runs ``run_agent_loop`` / ``run_agent_loop_continue`` with
the harness's own queues. ``agent`` drives ``trio_agent.Agent`` (when the
package has one). ``--driver loop`` forces the loop driver on an agent
scenario, which prints the same event lines as long as the scenario uses
nothing only an Agent has.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio
import trio.testing

import trio_agent
from trio_agent import (
    AfterToolCallContext,
    AfterToolCallResult,
    AgentContext,
    AgentLoopConfig,
    AgentMessage,
    AgentTool,
    AssistantMessage,
    BeforeToolCallContext,
    BeforeToolCallResult,
    ImageContent,
    NextTurn,
    RequestContext,
    RequestUpdate,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    TurnContext,
    TurnDecision,
    UserMessage,
)
from trio_agent.providers import faux

MODEL_ID = "scripted"


def canonical(value: Any) -> str:
    """Canonical JSON: sorted keys, no whitespace, UTF-8 (FORMAT.md#canonical-json)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class ScriptError(Exception):
    """An error a scenario asks for (``throw``): JS's ``Error(text)``."""


@attrs.frozen
class CustomMessage:
    """A message of a role trio_agent does not know (``role: "notification"``)."""

    role: str
    fields: dict[str, Any]


# --- normalization (FORMAT.md#normalization) --------------------------------------------------


def norm_block(block: Any) -> dict[str, Any]:
    if isinstance(block, TextContent):
        return {"type": "text", "text": block.text}
    if isinstance(block, ThinkingContent):
        out: dict[str, Any] = {"type": "thinking", "thinking": block.thinking}
        if block.redacted:
            out["redacted"] = True
        return out
    if isinstance(block, ToolCall):
        return {
            "type": "toolCall",
            "id": block.id,
            "name": block.name,
            "arguments": block.arguments,
        }
    if isinstance(block, ImageContent):
        return {"type": "image", "mimeType": block.mime_type, "data": block.data}
    raise TypeError(f"unknown content block {block!r}")


def _timed(value: Any, v1: bool) -> dict[str, Any]:
    """``timed: true`` (1.6 format) when ``value`` carries a duration: pi's ``durationMs``
    is a wall-clock reading, so the traces compare whether it is there, not its value."""
    return {"timed": True} if v1 and getattr(value, "duration", None) is not None else {}


def norm_message(message: Any, v1: bool = False) -> dict[str, Any]:
    if isinstance(message, UserMessage):
        content = message.content
        return {
            "role": "user",
            "content": content if isinstance(content, str) else [norm_block(b) for b in content],
        }
    if isinstance(message, AssistantMessage):
        out: dict[str, Any] = {
            "role": "assistant",
            "content": [norm_block(b) for b in message.content],
            "stopReason": message.stop_reason,
        }
        if message.error_message is not None:
            out["errorMessage"] = message.error_message
        return out
    if isinstance(message, ToolResultMessage):
        out = {
            "role": "toolResult",
            "toolCallId": message.tool_call_id,
            "toolName": message.tool_name,
            "content": [norm_block(b) for b in message.content],
            "isError": message.is_error,
        }
        if message.details is not None:
            out["details"] = message.details
        if message.usage is not None:
            out["usage"] = trio_agent.to_json(message.usage)
        structured = getattr(message, "structured_content", None)
        if v1 and structured is not None:
            out["structuredContent"] = structured
        return {**out, **_timed(message, v1)}
    if isinstance(message, CustomMessage):
        return {"role": message.role, **message.fields}
    raise TypeError(f"unknown message {message!r}")


def norm_result(result: ToolResult, v1: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"content": [norm_block(b) for b in result.content]}
    if result.details is not None:
        out["details"] = result.details
    if isinstance(result.terminate, bool):
        out["terminate"] = result.terminate
    if result.usage is not None:
        out["usage"] = trio_agent.to_json(result.usage)
    if v1:
        structured = getattr(result, "structured_content", None)
        if structured is not None:
            out["structuredContent"] = structured
        if getattr(result, "is_error", False) is True:
            out["isError"] = True
    return out


def norm_stream_event(event: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": event.type}
    for name, key in (
        ("content_index", "contentIndex"),
        ("delta", "delta"),
        ("content", "content"),
    ):
        if hasattr(event, name):
            out[key] = getattr(event, name)
    if isinstance(event, trio_agent.ToolCallEnd):
        out["toolCall"] = norm_block(event.tool_call)
    return out


def norm_event(event: Any, v1: bool = False) -> dict[str, Any]:
    kind = event.type
    out: dict[str, Any] = {"type": kind}
    if kind == "agent_end":
        out["messages"] = [norm_message(m, v1) for m in event.messages]
    elif kind == "turn_end":
        out["message"] = norm_message(event.message, v1)
        out["toolResults"] = [norm_message(m, v1) for m in event.tool_results]
    elif kind in ("message_start", "message_end"):
        out["message"] = norm_message(event.message, v1)
    elif kind == "message_update":
        out["message"] = norm_message(event.message, v1)
        out["event"] = norm_stream_event(event.assistant_message_event)
    elif kind.startswith("tool_execution_"):
        out["toolCallId"] = event.tool_call_id
        out["toolName"] = event.tool_name
        if kind == "tool_execution_end":
            out["isError"] = event.is_error
            out["result"] = norm_result(event.result, v1)
            out.update(_timed(event, v1))
        else:
            out["args"] = event.args
            if kind == "tool_execution_update":
                out["partialResult"] = norm_result(event.partial_result, v1)
    return out


def norm_outcome(outcome: Any) -> dict[str, Any]:
    """A ``run_tool_call`` outcome, as the 1.6 harness puts it in the outer call's details."""
    return {
        "toolCallId": outcome.tool_call.id,
        "toolName": outcome.tool_call.name,
        "isError": outcome.is_error,
        "result": norm_result(outcome.result, True),
        **_timed(outcome, True),
    }


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        parts.append(block.text if isinstance(block, TextContent) else "[image]")
    return "".join(parts)


def compact(message: Any) -> str:
    """The compact strings of ``#result.llmCalls[].messages``
    (FORMAT.md#compact-message-strings)."""
    if isinstance(message, UserMessage):
        return "user:" + _text_of(message.content)
    if isinstance(message, AssistantMessage):
        blocks = []
        for block in message.content:
            if isinstance(block, TextContent):
                blocks.append("text:" + block.text)
            elif isinstance(block, ThinkingContent):
                blocks.append("thinking:" + block.thinking)
            elif isinstance(block, ToolCall):
                blocks.append(f"toolCall:{block.id}:{block.name}")
        return f"assistant({message.stop_reason}):" + "|".join(blocks)
    if isinstance(message, ToolResultMessage):
        status = "error" if message.is_error else "ok"
        return f"toolResult({message.tool_call_id},{message.tool_name},{status}):" + _text_of(
            message.content
        )
    return str(message.role)


# --- reading the scenario ------------------------------------------------------------------------


def to_message(spec: Any) -> AgentMessage:
    """A scenario message: a string is a user text message; objects are used as given."""
    if isinstance(spec, str):
        return UserMessage((TextContent(spec),))
    if spec.get("role") in ("user", "assistant", "toolResult"):
        message: AgentMessage = trio_agent.from_json(spec, trio_agent.AgentMessage)
        return message
    fields = {key: value for key, value in spec.items() if key not in ("role", "timestamp")}
    return CustomMessage(spec["role"], fields)


def to_messages(spec: Any) -> list[AgentMessage]:
    return [to_message(item) for item in spec] if isinstance(spec, list) else [to_message(spec)]


def to_prompt(spec: Any) -> str | AgentMessage | list[AgentMessage]:
    """A prompt for ``Agent.prompt``: a string as it is, a message, or a list of messages."""
    if isinstance(spec, str):
        return spec
    return to_messages(spec) if isinstance(spec, list) else to_message(spec)


def to_blocks(spec: Any) -> tuple[Any, ...]:
    if isinstance(spec, str):
        return (TextContent(spec),)
    blocks: list[Any] = []
    for block in spec:
        if block["type"] == "text":
            blocks.append(TextContent(block["text"]))
        elif block["type"] == "thinking":
            blocks.append(ThinkingContent(block["thinking"]))
        elif block["type"] == "toolCall":
            blocks.append(ToolCall(block["id"], block["name"], block.get("arguments", {})))
        elif block["type"] == "image":
            blocks.append(ImageContent(block["data"], block["mimeType"]))
        else:
            raise ValueError(f"unknown block type {block['type']!r}")
    return tuple(blocks)


def to_reply(spec: dict[str, Any]) -> faux.Reply:
    """The scripted reply ``responses[k]`` (FORMAT.md#scripted-replies)."""
    raises = ScriptError(spec["throw"]) if "throw" in spec else None
    return faux.Reply(
        content=to_blocks(spec.get("content", [])),
        stop_reason=spec.get("stopReason"),
        error_message=spec.get("errorMessage"),
        chunk_size=spec.get("chunkSize", 0),
        chunk_delay=spec.get("chunkDelayMs", 0) / 1000,
        start_delay=spec.get("startDelayMs", 0) / 1000,
        emit_start=not spec.get("noStart", False),
        raises=raises,
    )


def _missing(index: int) -> Callable[[Any], faux.Reply]:
    def reply(context: Any) -> faux.Reply:
        return faux.Reply(
            stop_reason="error",
            error_message=f"scripted stream: no response #{index}",
            emit_start=False,
        )

    return reply


def _matches(match: dict[str, Any], tool_call: ToolCall) -> bool:
    return bool(
        match.get("toolName", tool_call.name) == tool_call.name
        and match.get("toolCallId", tool_call.id) == tool_call.id
    )


def _pick(rules: list[dict[str, Any]], call: int) -> dict[str, Any] | None:
    """The first rule for the ``call``-th invocation of a hook (a rule without ``call``: any)."""
    return next((rule for rule in rules if rule.get("call", call) == call), None)


async def _sleep_ms(ms: int) -> None:
    if ms:
        await trio.sleep(ms / 1000)


# --- the harness --------------------------------------------------------------------------------


class Harness:
    """Everything one scenario needs: its model, tools, hooks, queues, actions and output."""

    def __init__(
        self, scenario: dict[str, Any], driver: str | None = None, v1: bool = False
    ) -> None:
        self.scenario = scenario
        self.driver = driver or scenario.get("driver", "agent")
        self.v1 = v1  # the 1.6 format: durations, structured content, returned is_error
        self.config_spec: dict[str, Any] = scenario.get("config", {})
        self.lines: list[str] = []
        self.tool_executions: list[dict[str, Any]] = []
        # Trio starts the calls of a parallel batch together, in an order its
        # scheduler picks at random; the record lists them in source order,
        # which is the order pi invokes them in.
        # Calls a tool runs through run_tool_call come right after it, in the order it runs them.
        self.execution_order: list[tuple[int, int, int]] = []
        self.inner_calls: dict[str, int] = {}  # inner call id -> the position of its tool's call
        self.batch_seq = 0
        self.call_positions: dict[str, int] = {}
        self.hook_calls: list[dict[str, Any]] = []
        responses: list[faux.Script] = [to_reply(spec) for spec in scenario.get("responses", [])]
        responses += [_missing(k) for k in range(len(responses), len(responses) + 64)]
        self.model = faux.model(responses, id=MODEL_ID, provider=MODEL_ID)
        self.tools = [self._tool(spec) for spec in scenario.get("tools", [])]
        self.actions = [dict(action, _fired=False) for action in scenario.get("actions", [])]
        if "runs" in scenario:
            self.runs: list[dict[str, Any]] = scenario["runs"]
        else:
            self.runs = [{"prompt": scenario.get("prompt", "Hello")}]
        self.steering: list[AgentMessage] = []
        self.follow_ups: list[AgentMessage] = []
        self.polls = {"steering": 0, "followUp": 0}
        self.turn_ends = 0
        self.prepare_calls = 0
        self.request_calls = 0
        self.finish_calls = 0
        self.last_assistant: AssistantMessage | None = None
        self.run_index = 0
        self.event_counts: dict[int, list[dict[str, Any]]] = {}
        self.abort: trio.CancelScope | None = None
        self.agent: trio_agent.Agent | None = None
        self.nursery: trio.Nursery | None = None

    def out(self, value: Any) -> None:
        self.lines.append(canonical(value))

    # -- tools (FORMAT.md#scripted-tools) ------------------------------------------------------

    def _tool(self, spec: dict[str, Any]) -> AgentTool:
        name = spec["name"]
        behavior = spec.get("behavior", {})
        overrides = spec.get("overrides", {})

        async def execute(tool_call_id: str, args: dict[str, Any], on_update: Any) -> ToolResult:
            b = {**behavior, **overrides.get(tool_call_id, {})}
            record = {
                "toolCallId": tool_call_id,
                "toolName": name,
                "params": copy.deepcopy(args),
                "outcome": "running",
            }
            self.tool_executions.append(record)
            if tool_call_id in self.call_positions:
                order = (self.batch_seq, self.call_positions[tool_call_id], 0)
            else:
                position = self.inner_calls.get(tool_call_id, 0)
                order = (self.batch_seq, position, len(self.execution_order) + 1)
            self.execution_order.append(order)

            def fill(template: str) -> str:
                return (
                    template.replace("{toolCallId}", tool_call_id)
                    .replace("{toolName}", name)
                    .replace("{params}", canonical(args))
                )

            async def body() -> ToolResult:
                delay = b.get("delayMs", 0)
                updates = b.get("updates", 0)
                piece = delay // (updates + 1)
                for i in range(1, updates + 1):
                    await _sleep_ms(piece)
                    on_update(
                        ToolResult(
                            content=(TextContent(f"progress {i}/{updates}"),),
                            details={"progress": i},
                        )
                    )
                await _sleep_ms(delay - updates * piece)
                details = b.get("details", {})
                if "runToolCall" in b:
                    inner = await self._run_inner(tool_call_id, b["runToolCall"])
                    details = {**details, "inner": inner}
                if "throw" in b:
                    raise ScriptError(fill(b["throw"]))
                extra: dict[str, Any] = {}  # the 1.6 fields, only when a scenario sets them
                if "isError" in b:
                    extra["is_error"] = b["isError"]
                if "structuredContent" in b:
                    extra["structured_content"] = copy.deepcopy(b["structuredContent"])
                return ToolResult(
                    content=(TextContent(fill(b.get("result", "ok"))),),
                    details=details,
                    terminate=b.get("terminate"),
                    **extra,
                )

            try:
                if b.get("honorAbort", True):
                    result = await body()
                else:
                    with trio.CancelScope(shield=True):
                        result = await body()
            except trio.Cancelled:
                record["outcome"] = "aborted"
                raise
            except Exception:
                record["outcome"] = "threw"
                raise
            record["outcome"] = "returned"
            if "lateUpdateAfterMs" in b and self.nursery is not None:
                self.nursery.start_soon(self._late_update, on_update, b["lateUpdateAfterMs"])
            return result

        extra: dict[str, Any] = {}  # the 1.6 fields, only when a scenario sets them
        if "outputSchema" in spec:
            extra["output_schema"] = spec["outputSchema"]
        if "replay" in spec:
            extra["replay"] = spec["replay"]
        return AgentTool(
            name=name,
            description=spec.get("description", ""),
            parameters=spec.get("parameters", {"type": "object", "properties": {}}),
            execute=execute,
            execution_mode=spec.get("executionMode"),
            **extra,
        )

    async def _run_inner(self, outer: str, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The ``runToolCall`` behaviour: each call through ``run_tool_call`` with the run's
        tool hooks, the last assistant message and an empty context."""
        assert self.last_assistant is not None
        spec = self.config_spec
        outcomes = []
        for call in calls:
            self.inner_calls[call["id"]] = self.call_positions.get(outer, 0)
            outcome = await trio_agent.run_tool_call(
                ToolCall(call["id"], call["name"], copy.deepcopy(call.get("arguments", {}))),
                tools=self.tools,
                assistant_message=self.last_assistant,
                context=AgentContext("", [], self.tools),
                before_tool_call=self.before_tool_call if "beforeToolCall" in spec else None,
                after_tool_call=self.after_tool_call if "afterToolCall" in spec else None,
            )
            outcomes.append(norm_outcome(outcome))
        return outcomes

    async def _late_update(self, on_update: Any, ms: int) -> None:
        await _sleep_ms(ms)
        on_update(ToolResult(content=(TextContent("late update"),), details={"late": True}))

    # -- hooks (FORMAT.md#config) --------------------------------------------------------------

    async def before_tool_call(self, ctx: BeforeToolCallContext) -> BeforeToolCallResult | None:
        messages = ctx.context.messages
        self.hook_calls.append(
            {
                "hook": "beforeToolCall",
                "toolCallId": ctx.tool_call.id,
                "args": copy.deepcopy(ctx.args),
                "lastContextRole": messages[-1].role if messages else None,
            }
        )
        for rule in self.config_spec["beforeToolCall"]:
            if _matches(rule.get("match", {}), ctx.tool_call):
                await _sleep_ms(rule.get("delayMs", 0))
                ctx.args.update(rule.get("setArgs", {}))
                if "throw" in rule:
                    raise ScriptError(rule["throw"])
                if rule.get("block"):
                    return BeforeToolCallResult(
                        block=True, reason=rule.get("reason"), terminate=rule.get("terminate")
                    )
                return None
        return None

    async def after_tool_call(self, ctx: AfterToolCallContext) -> AfterToolCallResult | None:
        self.hook_calls.append(
            {
                "hook": "afterToolCall",
                "toolCallId": ctx.tool_call.id,
                "args": copy.deepcopy(ctx.args),
                "isError": ctx.is_error,
                "result": norm_result(ctx.result, self.v1),
            }
        )
        for rule in self.config_spec["afterToolCall"]:
            if _matches(rule.get("match", {}), ctx.tool_call):
                await _sleep_ms(rule.get("delayMs", 0))
                if "throw" in rule:
                    raise ScriptError(rule["throw"])
                override = rule.get("override")
                if override is None:
                    return None
                usage = override.get("usage")
                extra: dict[str, Any] = {}
                if "structuredContent" in override:
                    extra["structured_content"] = override["structuredContent"]
                return AfterToolCallResult(
                    content=to_blocks(override["content"]) if "content" in override else None,
                    details=override.get("details"),
                    usage=None if usage is None else trio_agent.from_json(usage, trio_agent.Usage),
                    terminate=override.get("terminate"),
                    is_error=override.get("isError"),
                    **extra,
                )
        return None

    async def transform_context(self, messages: Sequence[AgentMessage]) -> Sequence[AgentMessage]:
        keep = self.config_spec["transformContext"].get("keepLast")
        return list(messages)[-keep:] if keep else list(messages)

    async def get_api_key(self, provider: str) -> str | None:
        key: str | None = self.config_spec["apiKey"]
        return key

    async def should_stop_after_turn(self, turn: TurnContext) -> bool:
        return self.turn_ends >= int(self.config_spec["stopAfterTurn"])

    async def prepare_next_turn(self, turn: TurnContext) -> NextTurn | None:
        self.prepare_calls += 1
        call = self.prepare_calls
        self.hook_calls.append(
            {
                "hook": "prepareNextTurn",
                "call": call,
                "message": compact(turn.message),
                "toolResults": [compact(m) for m in turn.tool_results],
                "contextMessages": [compact(m) for m in turn.context.messages],
                "newMessages": len(turn.new_messages),
            }
        )
        await self._fire({"hook": "prepareNextTurn"}, hook_call=call)
        for rule in self.config_spec["prepareNextTurn"]:
            if rule.get("call", call) != call:
                continue
            await _sleep_ms(rule.get("delayMs", 0))
            if "throw" in rule:
                raise ScriptError(rule["throw"])
            return NextTurn(
                context=self._rule_context(rule, turn.context),
                model=attrs.evolve(self.model, id=rule["model"]) if "model" in rule else None,
                thinking_level=rule.get("thinkingLevel"),
                messages=[to_message(m) for m in rule.get("messages", [])],
            )
        return None

    def _rule_context(self, rule: dict[str, Any], base: AgentContext) -> AgentContext | None:
        """The context a rule's ``context`` key builds from ``base`` (None without one)."""
        if "context" not in rule:
            return None
        spec = rule["context"]
        if "messages" in spec:
            messages: list[AgentMessage] = [to_message(m) for m in spec["messages"]]
        elif spec.get("keepLast"):
            messages = list(base.messages)[-spec["keepLast"] :]
        else:
            messages = list(base.messages)
        tools = base.tools
        if "tools" in spec:
            tools = [t for t in base.tools if t.name in spec["tools"]]
        return AgentContext(spec.get("systemPrompt", base.system_prompt), messages, tools)

    async def prepare_request(self, request: RequestContext) -> RequestUpdate | None:
        self.request_calls += 1
        call = self.request_calls
        self.hook_calls.append(
            {
                "hook": "prepareRequest",
                "call": call,
                "contextMessages": [compact(m) for m in request.context.messages],
                "model": request.model.id,
                "thinkingLevel": request.thinking_level,
            }
        )
        await self._fire({"hook": "prepareRequest"}, hook_call=call)
        rule = _pick(self.config_spec["prepareRequest"], call)
        if rule is None:
            return None
        await _sleep_ms(rule.get("delayMs", 0))
        if "throw" in rule:
            raise ScriptError(rule["throw"])
        return RequestUpdate(
            context=self._rule_context(rule, request.context),
            model=attrs.evolve(self.model, id=rule["model"]) if "model" in rule else None,
            thinking_level=rule.get("thinkingLevel"),
        )

    async def finish_turn(self, turn: TurnContext) -> TurnDecision | None:
        self.finish_calls += 1
        call = self.finish_calls
        self.hook_calls.append(
            {
                "hook": "finishTurn",
                "call": call,
                "message": compact(turn.message),
                "toolResults": [compact(m) for m in turn.tool_results],
                "newMessages": len(turn.new_messages),
            }
        )
        await self._fire({"hook": "finishTurn"}, hook_call=call)
        rule = _pick(self.config_spec["finishTurn"], call)
        if rule is None:
            return None
        await _sleep_ms(rule.get("delayMs", 0))
        if "throw" in rule:
            raise ScriptError(rule["throw"])
        action: TurnDecision | None = rule.get("action")
        return action

    # -- queues (the loop driver's own) -------------------------------------------------------

    def _drain(self, queue: list[AgentMessage], mode: str) -> list[AgentMessage]:
        if not queue:
            return []
        if mode == "all":
            taken = list(queue)
            queue.clear()
            return taken
        return [queue.pop(0)]

    async def get_steering_messages(self) -> list[AgentMessage]:
        self.polls["steering"] += 1
        return self._drain(self.steering, self.config_spec.get("steeringMode", "one-at-a-time"))

    async def get_follow_up_messages(self) -> list[AgentMessage]:
        self.polls["followUp"] += 1
        return self._drain(self.follow_ups, self.config_spec.get("followUpMode", "one-at-a-time"))

    def loop_config(self) -> AgentLoopConfig:
        spec = self.config_spec
        return AgentLoopConfig(
            model=self.model,
            tool_execution=spec.get("toolExecution", "parallel"),
            get_steering_messages=self.get_steering_messages,
            get_follow_up_messages=self.get_follow_up_messages,
            before_tool_call=self.before_tool_call if "beforeToolCall" in spec else None,
            after_tool_call=self.after_tool_call if "afterToolCall" in spec else None,
            transform_context=self.transform_context if "transformContext" in spec else None,
            get_api_key=self.get_api_key if "apiKey" in spec else None,
            should_stop_after_turn=self.should_stop_after_turn if "stopAfterTurn" in spec else None,
            prepare_next_turn=self.prepare_next_turn if "prepareNextTurn" in spec else None,
            prepare_request=self.prepare_request if "prepareRequest" in spec else None,
            finish_turn=self.finish_turn if "finishTurn" in spec else None,
        )

    # -- actions (FORMAT.md#actions) -----------------------------------------------------------

    def _event_matches(self, on: dict[str, Any], event: Any) -> bool:
        if on.get("type") != event.type:
            return False
        if "toolCallId" in on and getattr(event, "tool_call_id", None) != on["toolCallId"]:
            return False
        if "toolName" in on and getattr(event, "tool_name", None) != on["toolName"]:
            return False
        if "role" in on and getattr(getattr(event, "message", None), "role", None) != on["role"]:
            return False
        if "eventType" in on:
            inner = getattr(event, "assistant_message_event", None)
            if getattr(inner, "type", None) != on["eventType"]:
                return False
        return True

    async def on_event(self, event: Any) -> None:
        """The listener: print the event's line, then fire the actions it triggers."""
        if event.type == "turn_end":
            self.turn_ends += 1
        if event.type == "message_end" and isinstance(event.message, AssistantMessage):
            self.last_assistant = event.message
            self.batch_seq += 1
            self.call_positions = {c.id: i for i, c in enumerate(event.message.tool_calls)}
        self.out(norm_event(event, self.v1))
        for action in self.actions:
            on = action.get("on")
            if (
                action["_fired"]
                or on is None
                or "hook" in on
                or action.get("run", 0) != self.run_index
            ):
                continue
            if self._event_matches(on, event):
                action["_seen"] = action.get("_seen", 0) + 1
                if action["_seen"] == on.get("nth", 1):
                    await self._do(action)

    async def _fire(self, trigger: dict[str, Any], hook_call: int) -> None:
        for action in self.actions:
            on = action.get("on") or {}
            if (
                action["_fired"]
                or on.get("hook") != trigger["hook"]
                or action.get("run", 0) != self.run_index
            ):
                continue
            if on.get("nth", 1) == hook_call:
                await self._do(action)

    async def _after(self, action: dict[str, Any]) -> None:
        await _sleep_ms(action["afterMs"])
        if not action["_fired"]:
            await self._do(action)

    async def _do(self, action: dict[str, Any]) -> None:
        action["_fired"] = True
        do = action["do"]
        line: dict[str, Any] = {"type": "#action", "do": do}
        agent = self.agent
        if do in ("steer", "followUp"):
            message = to_message(action["message"])
            line["message"] = norm_message(message, self.v1)
            self.out(line)
            if agent is not None:
                (agent.steer if do == "steer" else agent.follow_up)(message)
            else:
                (self.steering if do == "steer" else self.follow_ups).append(message)
        elif do == "abort":
            self.out(line)
            if agent is not None:
                agent.abort()
            elif self.abort is not None:
                self.abort.cancel()
        elif do == "clearQueues":
            self.out(line)
            if agent is not None:
                agent.clear_all_queues()
            self.steering.clear()
            self.follow_ups.clear()
        elif do == "throw":
            text = action.get("error", "listener error")
            line["error"] = text
            self.out(line)
            raise ScriptError(text)
        elif agent is not None and do in ("prompt", "continue"):
            try:
                if do == "prompt":
                    await agent.prompt(to_prompt(action["message"]))
                else:
                    await agent.continue_()
            except Exception as exc:
                line["error"] = str(exc)
            else:
                line["error"] = None
            self.out(line)
        else:
            raise ValueError(f"action {do!r} needs the agent driver")

    # -- running -------------------------------------------------------------------------------

    async def run(self) -> list[str]:
        if self.driver not in ("loop", "agent"):
            raise ValueError(f"unknown driver {self.driver!r}")
        messages = [to_message(m) for m in self.scenario.get("initialMessages", [])]
        system_prompt = self.scenario.get("systemPrompt", "")
        if self.driver == "agent":
            self.agent = self._make_agent(system_prompt, messages)
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            for index, run in enumerate(self.runs):
                self.run_index = index
                mode = "continue" if run.get("continue") else "prompt"
                self.out({"type": "#run", "run": index, "mode": mode})
                self.abort = trio.CancelScope()
                for action in self.actions:
                    if "afterMs" in action and action.get("run", 0) == index:
                        nursery.start_soon(self._after, action)
                if self.agent is not None:
                    await self._agent_run(self.agent, run, mode, index)
                else:
                    await self._loop_run(run, mode, index, system_prompt, messages)
            nursery.cancel_scope.cancel()  # timers of actions that never fired
        if self.agent is not None:
            messages = list(self.agent.state.messages)
        self.out(self._result(messages))
        return self.lines

    async def _loop_run(
        self,
        run: dict[str, Any],
        mode: str,
        index: int,
        system_prompt: str,
        messages: list[AgentMessage],
    ) -> None:
        context = AgentContext(system_prompt, list(messages), self.tools)
        try:
            if mode == "prompt":
                returned = await trio_agent.run_agent_loop(
                    to_messages(run["prompt"]),
                    context,
                    self.loop_config(),
                    self.on_event,
                    self.abort,
                )
            else:
                returned = await trio_agent.run_agent_loop_continue(
                    context, self.loop_config(), self.on_event, self.abort
                )
        except Exception as exc:
            self.out({"type": "#run_end", "run": index, "error": str(exc)})
        else:
            messages.extend(returned)
            returned_lines = [norm_message(m, self.v1) for m in returned]
            self.out({"type": "#run_end", "run": index, "error": None, "returned": returned_lines})

    def _make_agent(self, system_prompt: str, messages: list[AgentMessage]) -> trio_agent.Agent:
        config = self.loop_config()
        agent = trio_agent.Agent(
            self.model,
            system_prompt=system_prompt,
            tools=self.tools,
            messages=messages,
            tool_execution=config.tool_execution,
            steering_mode=self.config_spec.get("steeringMode", "one-at-a-time"),
            follow_up_mode=self.config_spec.get("followUpMode", "one-at-a-time"),
            before_tool_call=config.before_tool_call,
            after_tool_call=config.after_tool_call,
            transform_context=config.transform_context,
            get_api_key=config.get_api_key,
            should_stop_after_turn=config.should_stop_after_turn,
            prepare_next_turn=config.prepare_next_turn,
            prepare_request=config.prepare_request,
            finish_turn=config.finish_turn,
        )
        agent.subscribe(self.on_event)
        return agent

    async def _agent_run(
        self, agent: trio_agent.Agent, run: dict[str, Any], mode: str, index: int
    ) -> None:
        try:
            if mode == "prompt":
                await agent.prompt(to_prompt(run["prompt"]))
            else:
                await agent.continue_()
        except Exception as exc:
            self.out({"type": "#run_end", "run": index, "error": str(exc)})
        else:
            self.out({"type": "#run_end", "run": index, "error": None})

    def _result(self, messages: list[AgentMessage]) -> dict[str, Any]:
        calls = []
        for call in self.model.calls:
            entry: dict[str, Any] = {
                "messages": [compact(m) for m in call.context.messages],
                "tools": [tool.name for tool in call.context.tools],
            }
            if call.context.system_prompt:
                entry["systemPrompt"] = call.context.system_prompt
            if call.options.api_key is not None:
                entry["apiKey"] = call.options.api_key
            if call.model.id != MODEL_ID:
                entry["model"] = call.model.id
            if call.options.reasoning is not None:
                entry["reasoning"] = call.options.reasoning
            calls.append(entry)
        result: dict[str, Any] = {
            "type": "#result",
            "driver": self.driver,
            "llmCalls": calls,
            "toolExecutions": [
                record
                for _, record in sorted(
                    zip(self.execution_order, self.tool_executions, strict=True),
                    key=lambda pair: pair[0],
                )
            ],
            "hookCalls": self.hook_calls,
            "messages": [norm_message(m, self.v1) for m in messages],
        }
        if self.agent is not None:
            state = self.agent.state
            result["errorMessage"] = state.error_message
            result["isStreaming"] = state.is_streaming
            result["pendingToolCalls"] = sorted(state.pending_tool_calls)
            result["hasQueuedMessages"] = self.agent.has_queued_messages()
        else:
            result["polls"] = dict(self.polls)
            result["queued"] = {"steering": len(self.steering), "followUp": len(self.follow_ups)}
        return result


V1_DIRECTORY = "scenarios_1_6"


def run_scenario(path: str | Path, driver: str | None = None) -> list[str]:
    """The normalized lines of the scenario at ``path`` (in the 1.6 format when it lives in
    ``scenarios_1_6/``)."""
    path = Path(path)
    scenario = json.loads(path.read_text(encoding="utf-8"))
    harness = Harness(scenario, driver, v1=path.parent.name == V1_DIRECTORY)
    return trio.run(harness.run, clock=trio.testing.MockClock(autojump_threshold=0))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenario", help="a scenario file (FORMAT.md#the-scenario-file)")
    parser.add_argument(
        "--driver", choices=["loop", "agent"], help="override the scenario's driver"
    )
    args = parser.parse_args(argv)
    for line in run_scenario(args.scenario, args.driver):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
