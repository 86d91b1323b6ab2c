"""The exceptions trio_agent raises.

Every exception of ours derives from :class:`TrioAgentError` and also from the
builtin it is closest to, so a generic ``except ValueError`` still catches a
bad argument::

    TrioAgentError(Exception)
    ├── ToolArgumentsError(ValueError)   tool-call arguments failed their JSON Schema
    ├── ToolDefinitionError(ValueError)  a tool is malformed (bad schema, bad signature)
    ├── TranscriptError(ValueError)      ``loads()`` got JSON that is not a valid transcript
    └── UnknownApiError(LookupError)     no stream function is registered for ``model.api``

What a *run* lets escape is described in ``loop.md`` §7 and by
:func:`trio_agent.run_agent_loop`: the original exception of a listener or a
hook, ``trio.Cancelled`` or ``KeyboardInterrupt`` — never an exception group of
ours. Errors of a tool, of its arguments, of a provider or of the network are
data (error results and error messages), not exceptions.
"""

from __future__ import annotations

__all__ = [
    "ToolArgumentsError",
    "ToolDefinitionError",
    "TranscriptError",
    "TrioAgentError",
    "UnknownApiError",
]


class TrioAgentError(Exception):
    """The root of trio_agent's own exceptions."""


class ToolArgumentsError(TrioAgentError, ValueError):
    """A tool call's arguments do not satisfy the tool's ``parameters`` schema.

    The message is pi's text (``Validation failed for tool "NAME": ...``); the
    loop turns it into the call's error result, so the model can correct itself.
    """


class ToolDefinitionError(TrioAgentError, ValueError):
    """A tool cannot be built: its schema is not valid JSON Schema (or has a ``$ref`` that does
    not resolve within it), or the function given to :func:`trio_agent.tool` has a signature we
    cannot describe. The message names the tool and the problem."""


class TranscriptError(TrioAgentError, ValueError):
    """JSON given to :func:`trio_agent.loads` does not have the shape asked for.

    The message lists every problem with its path (``$[2].content[0].text``).
    """


class UnknownApiError(TrioAgentError, LookupError):
    """No stream function is registered for a model's ``api``."""
