"""The kit for testing agents, and your own tools, under cancellation, timeouts and faults.

* Scripted models (the faux provider): :func:`scripted_model` plays replies
  built with :func:`reply`, :func:`text`, :func:`thinking`,
  :func:`tool_call`, lock-step, and records every call it receives.
* Recording and checking: :class:`EventRecorder`,
  :func:`check_event_grammar`, :func:`check_transcript`,
  :class:`TaskWatcher`.
* Cancellation fuzzing: :func:`assert_cancel_safe`.
* Hypothesis strategies: :mod:`trio_agent.testing.strategies` (the only
  module that imports hypothesis).
* A pytest plugin: ``-p trio_agent.testing.pytest_plugin``.
"""

from __future__ import annotations

from ..providers.faux import FauxCall as ScriptedCall
from ..providers.faux import FauxModel as ScriptedModel
from ..providers.faux import Reply, error, reply, text, thinking, tool_call
from ..providers.faux import model as scripted_model
from ._checks import (
    EventRecorder,
    TaskWatcher,
    check_event_grammar,
    check_transcript,
    describe_events,
)
from ._fuzz import CancelSafetyReport, Mode, Trial, assert_cancel_safe

__all__ = [
    "CancelSafetyReport",
    "EventRecorder",
    "Mode",
    "Reply",
    "ScriptedCall",
    "ScriptedModel",
    "TaskWatcher",
    "Trial",
    "assert_cancel_safe",
    "check_event_grammar",
    "check_transcript",
    "describe_events",
    "error",
    "reply",
    "scripted_model",
    "text",
    "thinking",
    "tool_call",
]
