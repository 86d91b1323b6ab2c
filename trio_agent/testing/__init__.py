"""The kit for testing agents, and your own tools, under cancellation, timeouts and faults.

* Scripted models (the faux provider): :func:`scripted_model` plays replies
  built with :func:`reply`, :func:`text`, :func:`thinking`,
  :func:`tool_call`, lock-step, and records every call it receives.
* Recording and checking: :class:`EventRecorder`,
  :func:`check_event_grammar`, :func:`check_transcript`,
  :class:`TaskWatcher`.
* Cancellation fuzzing: :func:`assert_cancel_safe`.
* A loopback server for provider tests: :class:`SSEServer` replays
  :class:`ScriptedResponse` bodies, whole or in seeded small pieces, with
  faults (a dropped connection, a stall, a malformed event, HTTP errors with
  ``retry-after``); :func:`open_sse_server`, :func:`sse_body`.
* Hypothesis strategies: :mod:`trio_agent.testing.strategies` (the only
  module that imports hypothesis).
* A pytest plugin: ``-p trio_agent.testing.pytest_plugin``.
"""

from __future__ import annotations

from .. import _public
from ..providers.faux import (
    Reply,
    ScriptedCall,
    ScriptedModel,
    error,
    reply,
    text,
    thinking,
    tool_call,
)
from ..providers.faux import model as scripted_model
from ._checks import (
    EventRecorder,
    TaskWatcher,
    check_event_grammar,
    check_transcript,
    describe_events,
)
from ._fuzz import CancelSafetyReport, Mode, Trial, assert_cancel_safe
from ._sse_server import (
    MALFORMED_EVENT,
    RecordedRequest,
    ScriptedResponse,
    SSEServer,
    open_sse_server,
    sse_body,
)

__all__ = [
    "MALFORMED_EVENT",
    "CancelSafetyReport",
    "EventRecorder",
    "Mode",
    "RecordedRequest",
    "Reply",
    "SSEServer",
    "ScriptedCall",
    "ScriptedModel",
    "ScriptedResponse",
    "TaskWatcher",
    "Trial",
    "assert_cancel_safe",
    "check_event_grammar",
    "check_transcript",
    "describe_events",
    "error",
    "open_sse_server",
    "reply",
    "scripted_model",
    "sse_body",
    "text",
    "thinking",
    "tool_call",
]

_public.fixup_module_metadata(__name__, globals())
