"""A pytest plugin: fixtures for testing agents and tools with the testing kit.

It is opt-in, never loaded by installing trio_agent: enable it with
``pytest -p trio_agent.testing.pytest_plugin``, or in the top-level
``conftest.py``::

    pytest_plugins = ["trio_agent.testing.pytest_plugin"]

The async tests and the ``sse_server`` fixture need pytest-trio (``trio_mode
= true`` in the pytest configuration, or ``@pytest.mark.trio`` on each test).

The fixtures, per test:

* ``scripted_model`` — a :class:`~trio_agent.testing.ScriptedModel` with an
  empty script: the test fills it (``scripted_model.add(reply(...), "text")``)
  and reads what it was asked (``scripted_model.calls``);
* ``event_recorder`` — an :class:`~trio_agent.testing.EventRecorder`;
* ``make_agent`` — an :class:`AgentFactory`: ``make_agent(script, tools=...,
  **agent_options)`` makes an :class:`~trio_agent.Agent` on the test's
  scripted model (the script is added to it), subscribed to the test's
  recorder; ``model=`` puts it on another model, a real provider's pointed
  at ``sse_server`` for instance;
* ``agent`` — ``make_agent()``: an agent on ``scripted_model``, recorded by
  ``event_recorder``, without tools (``agent.set_tools([...])``);
* ``sse_server`` — a loopback :class:`~trio_agent.testing.SSEServer` running
  in the test's Trio run (URL at ``sse_server.url``), stopped after the test;
  the test adds the responses (``sse_server.add(ScriptedResponse(...))``).

::

    async def test_the_tool_result_reaches_the_model(make_agent, scripted_model, event_recorder):
        agent = make_agent([reply(tool_call("echo", {"text": "hi"})), "done"], tools=[echo])
        await agent.prompt("go")
        assert event_recorder.tool_order("end") == ["faux_0_0"]
        assert scripted_model.calls[1].context.messages[-1].content == (TextContent("hi"),)

Why it is shaped so. An :class:`~trio_agent.Agent` has no task between runs
and a scripted model none at all, so the model, the recorder and the agents
are plain sync fixtures: a trio test uses them, and so does a sync test that
calls ``trio.run`` itself (a Hypothesis test, say). Only the server owns
tasks, so only ``sse_server`` is async: it is a Trio fixture, whose nursery
lives in the test's run and is cancelled when the test is done. A test has
one scripted model and one recorder, shared by every agent the test makes,
so a script can be filled and events read through whichever is at hand; a
test that needs two separate scripts makes a second model with
:func:`trio_agent.testing.scripted_model` (imported under another name, as
the fixture's argument hides it) and passes it as ``model=``.

Checks at teardown. When a test that made agents through ``agent`` or
``make_agent`` has passed, the plugin checks what every run promises, for
each of those agents: the events of each run follow the grammar
(:func:`~trio_agent.testing.check_event_grammar`; a run that stopped before
``agent_end``, as one cancelled from outside does, must be a valid
beginning), the transcript answers every tool call
(:func:`~trio_agent.testing.check_transcript`), and the agent is left with
no run and no pending tool call. A violation is reported as an error at the
test's teardown. A test that failed is not checked (its own failure says
more), and ``@pytest.mark.no_agent_checks`` turns the checks off for a test
that builds a broken transcript on purpose.

Time. Use pytest-trio's ``autojump_clock`` fixture for anything timed: the
scripted model's delays and pace, the retries' backoff and a stalled
server's timeouts then cost no real time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator, Iterable, Iterator
from typing import Any

import pytest

from .._agent import Agent
from .._events import AgentEvent
from .._messages import AssistantMessage
from .._model import Model
from .._tools import AgentTool
from ..providers.faux import Reply, Script, ScriptedModel
from ..providers.faux import model as _scripted_model
from ._checks import EventRecorder, agent_problems, check_event_grammar, split_runs
from ._sse_server import SSEServer, open_sse_server

__all__ = [
    "AgentFactory",
    "agent",
    "event_recorder",
    "make_agent",
    "scripted_model",
    "sse_server",
]

_CALL_PASSED = pytest.StashKey[bool]()
_NO_CHECKS_MARKER = "no_agent_checks"


class AgentFactory:
    """Makes agents for one test, wired to its scripted model and recorder (``make_agent``).

    Every agent it makes is kept in :attr:`agents` and checked when the test
    has passed (see :meth:`check`).
    """

    def __init__(self, model: ScriptedModel, recorder: EventRecorder) -> None:
        self.model = model
        """The test's scripted model (the ``scripted_model`` fixture)."""
        self.recorder = recorder
        """The test's recorder (the ``event_recorder`` fixture)."""
        self.agents: list[Agent] = []
        """The agents made, in order."""
        self._events: list[list[AgentEvent]] = []

    def __call__(
        self,
        script: Iterable[Script] = (),
        *,
        tools: Iterable[AgentTool] = (),
        model: Model | None = None,
        **options: Any,
    ) -> Agent:
        """An :class:`~trio_agent.Agent` with these tools, subscribed to the test's recorder.

        ``script`` (replies, as :func:`~trio_agent.testing.scripted_model`
        takes them) is appended to the script of the agent's model: the
        test's scripted model, or ``model``, which may also be any other
        :class:`~trio_agent.Model` (then without a script). The other
        keywords go to ``Agent`` (``system_prompt``, ``tool_execution``,
        ``api_key``, hooks, ...).
        """
        if isinstance(script, str | Reply | AssistantMessage) or callable(script):
            raise TypeError(
                f"script must be an iterable of replies, not a single {type(script).__name__}: "
                "write make_agent([reply]), not make_agent(reply)"
            )
        replies = list(script)
        target = self.model if model is None else model
        if replies:
            if not isinstance(target, ScriptedModel):
                raise TypeError(
                    f"make_agent(script=...) plays the script on a scripted model, and "
                    f"model={target.id!r} is an {target.api!r} model: give that model's "
                    "replies to its server instead"
                )
            target.add(*replies)
        agent = Agent(target, tools=tools, **options)
        events: list[AgentEvent] = []

        async def log(event: AgentEvent) -> None:
            events.append(event)

        agent.subscribe(log)
        agent.subscribe(self.recorder)
        self.agents.append(agent)
        self._events.append(events)
        return agent

    def check(self) -> None:
        """Check every agent made so far: the grammar of its runs' events, its transcript,
        and that it is idle. Raises ``AssertionError`` listing every problem found.

        The plugin does so at the teardown of a test that passed; a test may
        call it too, after its runs.
        """
        problems = self.problems()
        if problems:
            raise AssertionError("\n".join(problems))

    def problems(self) -> list[str]:
        """What :meth:`check` finds wrong, one sentence per problem (empty: all is well)."""
        problems: list[str] = []
        for number, (agent, events) in enumerate(zip(self.agents, self._events, strict=True), 1):
            where = f"agent #{number} (model {agent.state.model.id!r})"
            runs = split_runs(events)
            for index, run in enumerate(runs, 1):
                try:
                    check_event_grammar(run, complete=run[-1].type == "agent_end")
                except AssertionError as exc:
                    problems.append(f"{where}, run {index} of {len(runs)}: {exc}")
            problems.extend(f"{where}, {problem}" for problem in agent_problems(agent))
        return problems


# -- hooks ----------------------------------------------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{_NO_CHECKS_MARKER}: do not check the runs of the agents made by the `agent` and "
        "`make_agent` fixtures at teardown (trio_agent.testing.pytest_plugin)",
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    # The teardown checks run only for a test that passed: remember how the test itself went.
    report = yield
    if report.when == "call":
        item.stash[_CALL_PASSED] = report.passed
    return report


# -- fixtures -------------------------------------------------------------------------------------


@pytest.fixture
def scripted_model() -> ScriptedModel:
    """The test's scripted model, with an empty script: ``scripted_model.add(reply, ...)``."""
    return _scripted_model()


@pytest.fixture
def event_recorder() -> EventRecorder:
    """The test's event recorder; the agents of ``agent`` and ``make_agent`` report to it."""
    return EventRecorder()


@pytest.fixture
def make_agent(
    request: pytest.FixtureRequest, scripted_model: ScriptedModel, event_recorder: EventRecorder
) -> Iterator[AgentFactory]:
    """An :class:`AgentFactory`: ``make_agent(script, tools=..., **agent_options)``.

    After a test that passed, every agent it made is checked (see the module's
    docs); ``@pytest.mark.no_agent_checks`` turns that off.
    """
    factory = AgentFactory(scripted_model, event_recorder)
    yield factory
    node = request.node
    wanted = node.get_closest_marker(_NO_CHECKS_MARKER) is None
    problems = factory.problems() if wanted and node.stash.get(_CALL_PASSED, False) else []
    if problems:
        pytest.fail(
            "trio_agent checks at teardown: "
            + "\n".join(problems)
            + f"\n(@pytest.mark.{_NO_CHECKS_MARKER} turns these checks off)",
            pytrace=False,
        )


@pytest.fixture
def agent(make_agent: AgentFactory) -> Agent:
    """``make_agent()``: an agent on ``scripted_model``, recorded by ``event_recorder``."""
    return make_agent()


@pytest.fixture
async def sse_server() -> AsyncIterator[SSEServer]:
    """A loopback :class:`~trio_agent.testing.SSEServer` with an empty script, running in
    the test's Trio run until the test is done (a Trio fixture: needs pytest-trio)."""
    async with open_sse_server() as server:
        yield server
