"""The exceptions trio_agent raises.

Every exception of ours derives from :class:`TrioAgentError` and also from the
builtin it is closest to, so a generic ``except ValueError`` still catches a
bad argument::

    TrioAgentError(Exception)
    ├── AgentBusyError(RuntimeError)     an ``Agent`` asked to prompt, continue, reset or
    │                                    replace its messages during a run
    ├── ToolArgumentsError(ValueError)   tool-call arguments failed their JSON Schema
    ├── ToolDefinitionError(ValueError)  a tool is malformed (bad schema, bad signature)
    ├── TranscriptError(ValueError)      ``loads()`` got JSON that is not a valid transcript
    ├── UnknownApiError(LookupError)     no stream function is registered for ``model.api``
    └── UnknownModelError(LookupError)   a maker asked for a model its catalog provider
                                         does not list

``AgentBusyError`` is defined with :class:`trio_agent.Agent`. The exceptions of
:mod:`trio_agent.testing.strategies` (``BehaviourError``, ``InjectedFailure``)
are not ours in this sense: they stand for the failures of a user's tool,
listener or stream, which a scenario injects.

What a *run* lets escape is described in design.md#errors-that-end-a-run and by
:func:`trio_agent.run_agent_loop`: the original exception of a listener or a
hook, ``trio.Cancelled`` or ``KeyboardInterrupt`` — never an exception group of
ours. Errors of a tool, of its arguments, of a provider or of the network are
data (error results and error messages), not exceptions.
"""

from __future__ import annotations

import trio

__all__ = [
    "ToolArgumentsError",
    "ToolDefinitionError",
    "TranscriptError",
    "TrioAgentError",
    "UnknownApiError",
    "UnknownModelError",
]


class TrioAgentError(Exception):
    """The root of trio_agent's own exceptions."""


class ToolArgumentsError(TrioAgentError, ValueError):
    """A tool call's arguments do not satisfy the tool's ``parameters`` schema, or checking them
    took more than its budget of steps.

    The message is pi's text (``Validation failed for tool "NAME": ...``); the
    loop turns it into the call's error result, so the model can correct itself.
    """


class ToolDefinitionError(TrioAgentError, ValueError):
    """A tool cannot be built: its schema is not valid JSON Schema (or has a ``$ref`` that does
    not resolve within it, references that loop back on themselves, a pattern RE2 cannot
    compile, or is too large or too deep to compile within bounds), or the function given to
    :func:`trio_agent.tool` has a signature we cannot describe. The message names the tool and
    the problem."""


class TranscriptError(TrioAgentError, ValueError):
    """JSON given to :func:`trio_agent.loads` does not have the shape asked for.

    The message lists every problem with its path (``$[2].content[0].text``).
    """


class UnknownApiError(TrioAgentError, LookupError):
    """No stream function is registered for a model's ``api``."""


class UnknownModelError(TrioAgentError, LookupError):
    """A provider's maker (``anthropic.model(id)``, ...) was asked, without a ``base_url``,
    for a model the catalog does not list at that provider: one that is misspelt, or
    that the provider no longer serves (on any API). That is for the API's own provider
    and a provider that serves models over the API; the name of one that serves none
    there is only a label.

    The message names the id, the provider and the API, and lists the provider's
    nearest known ids (also in ``provider``, ``api``, ``id`` and ``nearest``). A model the
    catalog does not know is still made when given a ``base_url`` (then described by what
    is given and the maker's defaults). Also exported as
    ``trio_agent.models.UnknownModelError``.
    """

    provider: str = ""
    """The provider whose models were looked in."""
    api: str = ""
    """The API the model was asked for over."""
    id: str = ""
    """The id asked for."""
    nearest: tuple[str, ...] = ()
    """The provider's known ids nearest to it, nearest first."""


# --- what a run lets escape (internal) ---------------------------------------------------------


class ListenerFailed(BaseException):
    """A listener's exception on its way out through a stream function.

    A ``BaseException``, so that a provider's ``except Exception`` (meant for
    network errors) cannot swallow it; the loop unwraps it as soon as the
    stream function has let it through.
    """

    def __init__(self, original: Exception) -> None:
        super().__init__(original)
        self.original = original


def one_exception(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one exception a run lets escape from its nursery's group
    (design.md#invariant-8-one-exception-not-a-group).

    Precedence: ``KeyboardInterrupt`` and other non-``Exception`` errors, then
    the first ``Exception`` (a listener's or a hook's), then ``Cancelled``
    (what a cancellation from outside the run leaves).
    """
    leaves: list[BaseException] = []
    stack: list[BaseException] = [group]
    while stack:
        exc = stack.pop()
        if isinstance(exc, BaseExceptionGroup):
            stack.extend(reversed(exc.exceptions))
        elif isinstance(exc, ListenerFailed):
            leaves.append(exc.original)
        else:
            leaves.append(exc)
    for leaf in leaves:
        if not isinstance(leaf, Exception | trio.Cancelled):
            return leaf
    errors = [leaf for leaf in leaves if isinstance(leaf, Exception)]
    if errors:
        for other in errors[1:]:
            errors[0].add_note(f"trio_agent: the run also raised {other!r}")
        return errors[0]
    return leaves[0]
