"""trio_agent: LLM agents on Trio's structured concurrency.

A run streams a reply from a model, executes the tool calls in it (one by
one, or concurrently), feeds the results back, and repeats until the model is
done. The host can steer it, queue follow-ups and abort it at any instant,
and nothing is lost: every tool call gets its result, no task outlives the
run, every delta received is kept.

The public names are re-exported here; the modules that define them are
private. Model providers live in :mod:`trio_agent.providers`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import _public
from ._agent import Agent as Agent
from ._agent import AgentBusyError as AgentBusyError
from ._agent import AgentListener as AgentListener
from ._agent import AgentState as AgentState
from ._agent import QueueMode as QueueMode
from ._budget import Budget as Budget
from ._budget import BudgetName as BudgetName
from ._budget import BudgetReached as BudgetReached
from ._config import AfterToolCallContext as AfterToolCallContext
from ._config import AfterToolCallResult as AfterToolCallResult
from ._config import AgentContext as AgentContext
from ._config import AgentLoopConfig as AgentLoopConfig
from ._config import BeforeToolCallContext as BeforeToolCallContext
from ._config import BeforeToolCallResult as BeforeToolCallResult
from ._config import NextTurn as NextTurn
from ._config import RequestContext as RequestContext
from ._config import RequestUpdate as RequestUpdate
from ._config import ThinkingLevel as ThinkingLevel
from ._config import ToolExecution as ToolExecution
from ._config import TurnContext as TurnContext
from ._config import TurnDecision as TurnDecision
from ._decorator import tool as tool
from ._errors import ToolArgumentsError as ToolArgumentsError
from ._errors import ToolDefinitionError as ToolDefinitionError
from ._errors import TranscriptError as TranscriptError
from ._errors import TrioAgentError as TrioAgentError
from ._errors import UnknownApiError as UnknownApiError
from ._errors import UnknownModelError as UnknownModelError
from ._events import AgentEnd as AgentEnd
from ._events import AgentEvent as AgentEvent
from ._events import AgentStart as AgentStart
from ._events import AssistantMessageEvent as AssistantMessageEvent
from ._events import MessageEnd as MessageEnd
from ._events import MessageStart as MessageStart
from ._events import MessageUpdate as MessageUpdate
from ._events import StreamDone as StreamDone
from ._events import StreamError as StreamError
from ._events import StreamStart as StreamStart
from ._events import TextDelta as TextDelta
from ._events import TextEnd as TextEnd
from ._events import TextStart as TextStart
from ._events import ThinkingDelta as ThinkingDelta
from ._events import ThinkingEnd as ThinkingEnd
from ._events import ThinkingStart as ThinkingStart
from ._events import ToolCallDelta as ToolCallDelta
from ._events import ToolCallEnd as ToolCallEnd
from ._events import ToolCallStart as ToolCallStart
from ._events import ToolExecutionEnd as ToolExecutionEnd
from ._events import ToolExecutionStart as ToolExecutionStart
from ._events import ToolExecutionUpdate as ToolExecutionUpdate
from ._events import TurnEnd as TurnEnd
from ._events import TurnStart as TurnStart
from ._execution import ToolCallOutcome as ToolCallOutcome
from ._execution import run_tool_call as run_tool_call
from ._loop import AgentEmit as AgentEmit
from ._loop import default_convert_to_llm as default_convert_to_llm
from ._loop import run_agent_loop as run_agent_loop
from ._loop import run_agent_loop_continue as run_agent_loop_continue
from ._messages import AgentMessage as AgentMessage
from ._messages import AssistantContent as AssistantContent
from ._messages import AssistantMessage as AssistantMessage
from ._messages import Content as Content
from ._messages import Cost as Cost
from ._messages import CustomMessage as CustomMessage
from ._messages import ErrorKind as ErrorKind
from ._messages import ImageContent as ImageContent
from ._messages import LlmMessage as LlmMessage
from ._messages import Message as Message
from ._messages import ReplyThinkingLevel as ReplyThinkingLevel
from ._messages import StopReason as StopReason
from ._messages import SystemContent as SystemContent
from ._messages import SystemMessage as SystemMessage
from ._messages import TextContent as TextContent
from ._messages import ThinkingContent as ThinkingContent
from ._messages import ToolCall as ToolCall
from ._messages import ToolDeclaration as ToolDeclaration
from ._messages import ToolReference as ToolReference
from ._messages import ToolResult as ToolResult
from ._messages import ToolResultContent as ToolResultContent
from ._messages import ToolResultMessage as ToolResultMessage
from ._messages import Usage as Usage
from ._messages import UserContent as UserContent
from ._messages import UserMessage as UserMessage
from ._messages import system_prompt as system_prompt
from ._model import Model as Model
from ._model import ModelCost as ModelCost
from ._model import ModelCostTier as ModelCostTier
from ._overflow import is_context_overflow as is_context_overflow
from ._stream import CacheRetention as CacheRetention
from ._stream import LlmContext as LlmContext
from ._stream import ReasoningLevel as ReasoningLevel
from ._stream import StreamFn as StreamFn
from ._stream import StreamOptions as StreamOptions
from ._stream import Timeouts as Timeouts
from ._tools import AgentTool as AgentTool
from ._tools import ExecutionMode as ExecutionMode
from ._tools import ReplayPolicy as ReplayPolicy
from ._tools import ToolExecute as ToolExecute
from ._tools import ToolUpdate as ToolUpdate

__version__ = "0.1.0.dev0"

__all__ = [
    "AfterToolCallContext",
    "AfterToolCallResult",
    "Agent",
    "AgentBusyError",
    "AgentContext",
    "AgentEmit",
    "AgentEnd",
    "AgentEvent",
    "AgentListener",
    "AgentLoopConfig",
    "AgentMessage",
    "AgentStart",
    "AgentState",
    "AgentTool",
    "AssistantContent",
    "AssistantMessage",
    "AssistantMessageEvent",
    "BeforeToolCallContext",
    "BeforeToolCallResult",
    "Budget",
    "BudgetName",
    "BudgetReached",
    "CacheRetention",
    "Content",
    "Cost",
    "CustomMessage",
    "ErrorKind",
    "ExecutionMode",
    "ImageContent",
    "LlmContext",
    "LlmMessage",
    "Message",
    "MessageEnd",
    "MessageStart",
    "MessageUpdate",
    "Model",
    "ModelCost",
    "ModelCostTier",
    "NextTurn",
    "QueueMode",
    "ReasoningLevel",
    "ReplayPolicy",
    "ReplyThinkingLevel",
    "RequestContext",
    "RequestUpdate",
    "StopReason",
    "StreamDone",
    "StreamError",
    "StreamFn",
    "StreamOptions",
    "StreamStart",
    "SystemContent",
    "SystemMessage",
    "TextContent",
    "TextDelta",
    "TextEnd",
    "TextStart",
    "ThinkingContent",
    "ThinkingDelta",
    "ThinkingEnd",
    "ThinkingLevel",
    "ThinkingStart",
    "Timeouts",
    "ToolArgumentsError",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallOutcome",
    "ToolCallStart",
    "ToolDeclaration",
    "ToolDefinitionError",
    "ToolExecute",
    "ToolExecution",
    "ToolExecutionEnd",
    "ToolExecutionStart",
    "ToolExecutionUpdate",
    "ToolReference",
    "ToolResult",
    "ToolResultContent",
    "ToolResultMessage",
    "ToolUpdate",
    "TranscriptError",
    "TrioAgentError",
    "TurnContext",
    "TurnDecision",
    "TurnEnd",
    "TurnStart",
    "UnknownApiError",
    "UnknownModelError",
    "Usage",
    "UserContent",
    "UserMessage",
    "default_convert_to_llm",
    "dumps",
    "from_json",
    "is_context_overflow",
    "loads",
    "register_message_kind",
    "run_agent_loop",
    "run_agent_loop_continue",
    "run_tool_call",
    "system_prompt",
    "to_json",
    "tool",
]

_public.fixup_module_metadata(__name__, globals())

if TYPE_CHECKING:
    from ._json import dumps as dumps
    from ._json import from_json as from_json
    from ._json import loads as loads
    from ._json import register_message_kind as register_message_kind
    from ._json import to_json as to_json

_JSON_NAMES = ("dumps", "from_json", "loads", "register_message_kind", "to_json")


def __getattr__(name: str) -> Any:
    """The transcript functions, imported on first use: their converter holds hooks for
    every message class, which a program that never reads or writes JSON does without."""
    if name not in _JSON_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import _json

    names = {name: getattr(_json, name) for name in _JSON_NAMES}
    _public.fixup_module_metadata(__name__, {"__all__": _JSON_NAMES, **names})
    globals().update(names)
    return names[name]
