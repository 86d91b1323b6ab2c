"""Cancellation fuzzing: cancel a scenario at each of its checkpoints, and check what holds.

:func:`assert_cancel_safe` runs a scenario once, undisturbed, and counts its
*points*: each step of one of its tasks (a task runs from one checkpoint at
which it yields to the next in one step: the only moments another task, or a
timeout, can cancel it), and each event its listener is told of (where a
listener may abort the run itself). Then it runs the scenario again for
each point k — or a seeded sample of them — and at the k-th point cancels
it: once through the run's abort (``trial.abort`` and every watched
``Agent``), and once through a cancel scope around the whole scenario, as a
caller's timeout would. After every run it checks that

* the scenario did not raise (abort) or ended by raising ``trio.Cancelled``
  (outer cancellation), so no ``Cancelled`` was swallowed;
* no tool that ``trio.Cancelled`` reached returned a result or turned it
  into another exception;
* the events of each run follow the grammar (:func:`check_event_grammar`)
  and every transcript answers every tool call (:func:`check_transcript`);
* no task started by the scenario is still alive when it ends;
* it ended within ``grace`` seconds after the cancellation.

The points of one run are replayed the same way in the next (Trio's
scheduler is seeded before each run), so a failure names the point that
makes it, and ``points=[k]`` reruns only that one. Use it on virtual time
(pytest-trio's ``autojump_clock`` fixture, or ``MockClock(autojump_threshold=0)``):
the grace period is then counted in virtual seconds, and a tool that sleeps
costs no real time.
"""

from __future__ import annotations

import math
import random
import sys
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Literal

import attrs
import trio

from .._agent import Agent
from .._events import AgentEvent
from .._messages import ToolResult
from .._tools import AgentTool, ToolUpdate
from ._checks import (
    EventRecorder,
    TaskWatcher,
    agent_problems,
    check_event_grammar,
    check_transcript,
    describe_events,
    describe_task,
    split_runs,
)

__all__ = ["CancelSafetyReport", "Mode", "Trial", "assert_cancel_safe"]

Mode = Literal["abort", "outer"]
"""How :func:`assert_cancel_safe` cancels a scenario: ``"abort"`` through the run's abort,
``"outer"`` with a cancel scope around the scenario."""


class Trial:
    """One run of a scenario under :func:`assert_cancel_safe`: what the scenario wires in.

    * :attr:`recorder` — give it to the run as its listener (``emit`` of
      :func:`~trio_agent.run_agent_loop`), or let :meth:`watch` subscribe it;
    * :attr:`abort` — a fresh cancel scope for ``run_agent_loop(..., abort=trial.abort)``;
    * :meth:`watch` — an ``Agent`` to abort, record and check;
    * :meth:`tools` — tools to watch for a swallowed ``trio.Cancelled``.

    A scenario returns the transcript to check, if it has one (the messages
    of a ``run_agent_loop``), or ``None``. ``mode`` is ``"abort"``, ``"outer"`` or ``None``
    (the undisturbed run), ``point`` the point it cancels at. Made by
    :func:`assert_cancel_safe`.
    """

    def __init__(self, mode: Mode | None, point: int | None) -> None:
        self.mode = mode
        """``"abort"``, ``"outer"``, or ``None`` for the undisturbed run."""
        self.point = point
        """The point at which the cancellation comes (``None``: never)."""
        self.recorder = _TrialRecorder(self)
        self.abort = trio.CancelScope()
        self.agents: list[Agent] = []
        self._tracker: _Tracker | None = None

    def watch(self, agent: Agent) -> Agent:
        """Subscribe the recorder to ``agent``, abort it in abort mode, watch its tools,
        and check its transcript and state at the end. Returns ``agent``."""
        agent.subscribe(self.recorder)
        agent.set_tools(self.tools(agent.state.tools))
        self.agents.append(agent)
        return agent

    def tools(self, tools: Iterable[AgentTool]) -> list[AgentTool]:
        """The same tools, watched: a call that ``trio.Cancelled`` reached must end by raising
        it (a result, or another exception, means it was swallowed)."""
        return [self._watched(tool) for tool in tools]

    def _watched(self, tool: AgentTool) -> AgentTool:
        execute = tool.execute

        async def watched(tool_call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> Any:
            tracker = self._tracker
            if tracker is None:  # not under assert_cancel_safe
                return await execute(tool_call_id, args, on_update)
            task = trio.lowlevel.current_task()
            tracker.in_tool[task] = f"tool {tool.name!r} (call {tool_call_id!r})"
            try:
                result: ToolResult = await execute(tool_call_id, args, on_update)
            except Exception as exc:
                if task in tracker.cancelled_in_tool:
                    tracker.swallowed.append(
                        f"{tracker.in_tool[task]} turned trio.Cancelled into {exc!r}"
                    )
                raise
            else:
                if task in tracker.cancelled_in_tool:
                    tracker.swallowed.append(
                        f"{tracker.in_tool[task]} returned a result after trio.Cancelled "
                        "reached it (it swallowed the cancellation)"
                    )
                return result
            finally:
                tracker.in_tool.pop(task, None)
                tracker.cancelled_in_tool.discard(task)

        return attrs.evolve(tool, execute=watched)


class _TrialRecorder(EventRecorder):
    """The trial's listener: each event it is told of is also a point to cancel at."""

    def __init__(self, trial: Trial) -> None:
        super().__init__()
        self._trial = trial

    async def __call__(self, event: AgentEvent) -> None:
        self.events.append(event)
        tracker = self._trial._tracker
        if tracker is not None:
            tracker.point(f"event {event.type}")
        if self.on_event is not None:
            await self.on_event(event)


class _Tracker(TaskWatcher):
    """Counts the scenario's points, cancels at the chosen one, and sees whom it woke."""

    def __init__(self, inject_at: int | None, inject: Callable[[], None]) -> None:
        super().__init__()
        self.points = 0
        self.inject_at = inject_at
        self.inject = inject
        self.injected_at: float | None = None
        self.points_at_injection = 0
        self.woken: set[trio.lowlevel.Task] = set()
        self.in_tool: dict[trio.lowlevel.Task, str] = {}
        self.cancelled_in_tool: set[trio.lowlevel.Task] = set()
        self.swallowed: list[str] = []
        self.inject_error: Exception | None = None
        self.labels: list[str] | None = None  # what each point is, when asked
        self.injected_point = ""
        self.deadline_scope: trio.CancelScope | None = None
        self.grace = math.inf
        self.stuck = ""  # the tasks still running when the grace period ran out
        self._injecting = False

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        if task in self._watched:
            self.point(f"step of task {task.name!r}")

    def point(self, label: str) -> None:
        """A point to cancel at: a task of the scenario yielded, or its listener was told."""
        self.points += 1
        if self.labels is not None:
            self.labels.append(label)
        if self.points == self.inject_at:
            self.injected_point = label
            self._inject()

    def task_scheduled(self, task: trio.lowlevel.Task) -> None:
        if self._injecting and task in self._watched:
            self.woken.add(task)

    def _inject(self) -> None:
        # Runs inside Trio's scheduler: it must not raise (Trio would drop the instrument).
        self._injecting = True
        try:
            self.inject()
        except Exception as exc:
            self.inject_error = exc
        finally:
            self._injecting = False
        self.injected_at = trio.current_time()
        self.points_at_injection = self.points
        self.cancelled_in_tool |= self.woken & self.in_tool.keys()
        if self.deadline_scope is not None:
            self.deadline_scope.deadline = self.injected_at + self.grace


@attrs.frozen
class CancelSafetyReport:
    """What :func:`assert_cancel_safe` did: every trial passed."""

    points: int
    """Points counted in the undisturbed run (task steps and events)."""
    tried: dict[str, tuple[int, ...]]
    """For each mode, the points it cancelled at."""
    not_reached: dict[str, tuple[int, ...]]
    """For each mode, the chosen points a trial ended before (its path was shorter)."""

    @property
    def trials(self) -> int:
        """Runs of the scenario, the undisturbed one included."""
        return 1 + sum(len(points) for points in self.tried.values())


@attrs.define
class _Outcome:
    value: Any = None
    error: BaseException | None = None
    cancelled: bool = False  # ended by the outer cancellation's Cancelled
    ended_at: float = 0.0
    alive: list[str] = attrs.Factory(list)


def _seed_scheduler(seed: int) -> None:
    """Make Trio's scheduling choices the same in every trial (they are random by design)."""
    run_module = getattr(trio._core, "_run", None)
    generator = getattr(run_module, "_r", None)
    if isinstance(generator, random.Random):
        generator.seed(seed)


async def _run_trial(
    scenario: Callable[[Trial], Awaitable[Any]],
    trial: Trial,
    *,
    seed: int,
    grace: float,
) -> tuple[_Outcome, _Tracker]:
    outer = trio.CancelScope()

    def inject() -> None:
        if trial.mode == "outer":
            outer.cancel()
        else:
            trial.abort.cancel()
            for agent in trial.agents:
                agent.abort()

    tracker = _Tracker(trial.point, inject)
    tracker.grace = grace
    trial._tracker = tracker
    outcome = _Outcome()
    done = trio.Event()

    async def runner() -> None:
        _seed_scheduler(seed)
        with tracker.watching():
            with outer:
                try:
                    outcome.value = await scenario(trial)
                except Exception as exc:
                    outcome.error = exc
            outcome.cancelled = outer.cancelled_caught
            outcome.ended_at = trio.current_time()
            outcome.alive = [describe_task(task) for task in tracker.alive]
        done.set()

    async with trio.open_nursery() as nursery:
        tracker.deadline_scope = trio.CancelScope()
        nursery.start_soon(runner, name="scenario")
        with tracker.deadline_scope:
            await done.wait()
        if not done.is_set():  # the grace period passed: say who is stuck, then wait on
            tracker.stuck = "\n".join(f"  {describe_task(task)}" for task in tracker.running())
            print(
                f"assert_cancel_safe: {trial.mode} at point {trial.point}: still running "
                f"{grace:g} s after the cancellation; tasks:\n{tracker.stuck}",
                file=sys.stderr,
                flush=True,
            )
            await done.wait()
    return outcome, tracker


def _problems(trial: Trial, outcome: _Outcome, tracker: _Tracker, grace: float) -> list[str]:
    problems: list[str] = []
    injected = tracker.injected_at is not None
    if tracker.inject_error is not None:
        problems.append(f"cancelling raised {tracker.inject_error!r}")
    if outcome.error is not None:
        problems.append(f"the scenario raised {outcome.error!r}")
    if trial.mode == "outer" and injected and not outcome.cancelled and outcome.error is None:
        went_on = tracker.points - tracker.points_at_injection
        if tracker.woken:
            problems.append(
                "the scenario returned normally although trio.Cancelled reached it: "
                "something swallowed trio.Cancelled"
            )
        elif went_on > 0:
            problems.append(
                f"the scenario returned normally although it went on for {went_on} more point(s) "
                "after the cancellation from outside: something swallowed trio.Cancelled, "
                "or all that ran after it was shielded"
            )
    problems.extend(tracker.swallowed)
    if outcome.alive:
        problems.append(
            "tasks started by the scenario outlived it:\n"
            + "\n".join(f"  {a}" for a in outcome.alive)
        )
    if injected:
        assert tracker.injected_at is not None
        late = outcome.ended_at - tracker.injected_at
        if late > grace:
            problems.append(
                f"the scenario ended {late:g} s after the cancellation, more than grace={grace:g} "
                "(a shielded wait without a timeout?)"
                + (
                    f"; still running at the end of the grace period:\n{tracker.stuck}"
                    if tracker.stuck
                    else ""
                )
            )
    runs = split_runs(trial.recorder.events)
    for index, run in enumerate(runs):
        last = index == len(runs) - 1
        try:
            check_event_grammar(run, complete=not (last and trial.mode == "outer"))
        except AssertionError as exc:
            problems.append(f"run {index + 1} of the scenario: {exc}")
    if isinstance(outcome.value, Sequence) and not isinstance(outcome.value, str | bytes):
        try:
            check_transcript(outcome.value)
        except AssertionError as exc:
            problems.append(f"transcript: {exc}")
    for agent in trial.agents:
        problems.extend(f"the agent's {problem}" for problem in agent_problems(agent))
    return problems


def _choose(points: int, max_points: int, seed: int) -> list[int]:
    if points <= max_points:
        return list(range(1, points + 1))
    chosen = set(random.Random(seed).sample(range(2, points), max(0, max_points - 2)))
    return sorted(chosen | {1, points})


async def assert_cancel_safe(
    scenario: Callable[[Trial], Awaitable[Any]],
    *,
    modes: Sequence[Mode] = ("abort", "outer"),
    max_points: int = 200,
    points: Sequence[int] | None = None,
    seed: int = 0,
    grace: float = 5.0,
) -> CancelSafetyReport:
    """Cancel ``scenario`` at each of its checkpoints, and check it every time.

    ``scenario`` is an async function that takes a :class:`Trial` and runs
    the code under test once, wired to it::

        async def scenario(trial):
            agent = trial.watch(Agent(scripted_model([...]), tools=[my_tool]))
            await agent.prompt("go")

        await assert_cancel_safe(scenario)

    It is run once undisturbed, then once per mode (``"abort"``: the run's
    abort; ``"outer"``: a cancel scope around the scenario) and per chosen
    point: every point (each step of the scenario's tasks, each event its
    listener is told of), or, past ``max_points``, a sample drawn with
    ``seed`` (the first and last always in). ``points`` chooses them by hand
    (to rerun a failure). ``grace``: how long, after the cancellation, the
    scenario may take to end. Raises ``AssertionError`` at the first trial
    that fails, saying which, what went wrong and the events around it;
    returns a :class:`CancelSafetyReport` when all pass.

    After each run it checks the event grammar, the transcripts, that no task outlived the
    scenario, that no watched tool swallowed ``trio.Cancelled``, and that a cancellation
    from outside came out as ``trio.Cancelled``.
    """
    wrong = [mode for mode in modes if mode not in ("abort", "outer")]
    if wrong or max_points < 2:
        await trio.lowlevel.checkpoint()  # a refusal is a checkpoint too
        if wrong:
            raise ValueError(f"modes must be 'abort' and/or 'outer', not {wrong[0]!r}")
        raise ValueError(f"max_points must be at least 2, not {max_points!r}")
    undisturbed = Trial(None, None)
    outcome, tracker = await _run_trial(scenario, undisturbed, seed=seed, grace=grace)
    problems = _problems(undisturbed, outcome, tracker, grace)
    if problems:
        raise AssertionError(_report(undisturbed, tracker, problems, 0, seed))
    total = tracker.points
    chosen = list(points) if points is not None else _choose(total, max_points, seed)
    tried: dict[str, tuple[int, ...]] = {}
    not_reached: dict[str, tuple[int, ...]] = {}
    for mode in modes:
        missed: list[int] = []
        for point in chosen:
            trial = Trial(mode, point)
            outcome, tracker = await _run_trial(scenario, trial, seed=seed, grace=grace)
            if tracker.injected_at is None:
                missed.append(point)
            problems = _problems(trial, outcome, tracker, grace)
            if problems:
                raise AssertionError(_report(trial, tracker, problems, total, seed))
        tried[mode] = tuple(chosen)
        not_reached[mode] = tuple(missed)
    return CancelSafetyReport(points=total, tried=tried, not_reached=not_reached)


def _report(trial: Trial, tracker: _Tracker, problems: list[str], total: int, seed: int) -> str:
    if trial.mode is None:
        head = "the scenario fails without any cancellation"
        rerun = ""
    else:
        how = "abort" if trial.mode == "abort" else "cancellation from outside"
        head = f"{how} at point {trial.point} of {total} ({tracker.injected_point})"
        rerun = (
            f"\n  rerun: assert_cancel_safe(scenario, modes=[{trial.mode!r}], "
            f"points=[{trial.point}], seed={seed})"
        )
    events = trial.recorder.events
    shown = f"\n  events: {describe_events(events, len(events) - 1, 12)}" if events else ""
    return f"{head}:\n- " + "\n- ".join(problems) + shown + rerun
