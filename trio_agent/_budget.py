"""Budgets: the limits a caller sets on one run, and how a run keeps to them.

A :class:`Budget` caps what one run may use: tokens, dollars, model requests
(turns) and tool calls. A run meters what it uses (:class:`Meter`, made only
when the run has a budget) and stops when a limit is reached; its
``agent_end`` then names the budget in a :class:`BudgetReached`.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable
from typing import Any, Literal, TypeAlias

import attrs

from ._messages import AssistantMessage, ToolResultMessage, Usage
from ._model import Model
from ._tools import shown_number

__all__ = ["Budget", "BudgetName", "BudgetReached", "Meter", "tool_budget_text"]

BudgetName: TypeAlias = Literal[
    "input_tokens", "output_tokens", "total_tokens", "cost", "turns", "tool_calls"
]
"""The fields of a :class:`Budget`, as :class:`BudgetReached` names them."""


def _count(minimum: int) -> Any:
    def check(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(
                f"Budget {attribute.name} must be an int or None, "
                f"not {type(value).__name__} {shown_number(value)}"
            )
        if value < minimum:
            raise ValueError(
                f"Budget {attribute.name} must be an int of {minimum} or more, "
                f"not {shown_number(value)}"
            )

    return check


def _check_cost(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(
            f"Budget cost must be a number of dollars or None, "
            f"not {type(value).__name__} {shown_number(value)}"
        )
    with contextlib.suppress(OverflowError):  # an int no float holds: refused below
        dollars = float(value)
        if math.isfinite(dollars) and dollars > 0:
            return
    raise ValueError(
        f"Budget cost must be a positive finite number of dollars, not {shown_number(value)}"
    )


@attrs.frozen(kw_only=True)
class Budget:
    """What one run may use; each limit is optional (``None``: no limit).

    - ``input_tokens``: tokens the model read, summed over the run's replies
      (``usage.input + usage.cache_read + usage.cache_write`` of each).
    - ``output_tokens``: tokens the model wrote (``usage.output``, reasoning included).
    - ``total_tokens``: input and output tokens as counted above, together.
    - ``cost``: dollars, the sum of ``usage.cost.total`` (what the provider's
      reported tokens cost at the model's catalog prices).
    - ``turns``: model requests the run makes.
    - ``tool_calls``: tool calls the run answers (0: none runs).

    A tool result's ``usage`` (a tool that calls a model itself) counts too,
    except what in it is not a positive number: a negative count or cost gives
    nothing back, and one of another type (or a cost that is not finite, or too
    large for a float) is left out.
    Token limits, ``turns`` and ``cost`` are positive; ``tool_calls`` is 0 or
    more. A bad value is a ``TypeError`` or ``ValueError`` naming the field.

    It is ``AgentLoopConfig.budget``, ``Agent(budget=...)``, and ``trio-agent --max-cost``
    and the other ``--max-*`` flags.

    A run checks its budget after each turn (the reply, its tool calls and
    ``turn_end``): when a limit is used up, or the next request would cross it for sure, the
    run ends there with ``agent_end(stop=BudgetReached(...))`` and asks the model nothing
    more, polls no queue and calls no hook after it. The first request of a run is always
    made. "For sure": ``turns`` reached; ``output_tokens`` used up; for ``input_tokens`` and
    ``total_tokens``, what was used plus the last request's input (the next request reads the
    same transcript and more) crosses the limit; for ``cost``, what was spent plus that input
    at the cheaper of the model's input and cache-read prices does. So a token or cost limit
    is exceeded by at most the one turn that crosses it, whose size is not known before it is
    made; ``turns`` and ``tool_calls`` are never exceeded. The calls of the reply that crosses
    a token or cost limit still run (they were asked for and paid for; the transcript can go
    on with a larger budget); a call past the ``tool_calls`` limit does not run: its result
    is the error ``tool-call budget of N reached``, and the run ends after that turn (a
    truncated batch runs none).
    """

    input_tokens: int | None = attrs.field(default=None, validator=_count(1))
    output_tokens: int | None = attrs.field(default=None, validator=_count(1))
    total_tokens: int | None = attrs.field(default=None, validator=_count(1))
    cost: float | None = attrs.field(default=None, validator=_check_cost)
    turns: int | None = attrs.field(default=None, validator=_count(1))
    tool_calls: int | None = attrs.field(default=None, validator=_count(0))


@attrs.frozen
class BudgetReached:
    """Why a run stopped: the budget ``name`` of ``limit`` was reached, with ``used`` used.

    ``used`` is what the run had used when it stopped, counted as the budget
    counts it; for ``input_tokens`` and ``total_tokens`` it may be below
    ``limit`` when the next request would have crossed it (its input is at
    least the last request's). For ``tool_calls`` it counts the calls the
    model asked for, including those past the limit, which were answered
    with an error and not run.

    It is ``AgentEnd.stop`` and ``AgentState.stop``; ``name`` is a :data:`BudgetName`.
    ``str()`` of it is a line such as ``cost budget of $0.5 reached (used $0.52)``.
    """

    name: BudgetName
    limit: float
    used: float

    def __str__(self) -> str:
        if self.name == "cost":
            return f"cost budget of ${self.limit:g} reached (used ${self.used:.6g})"
        what = "tool-call" if self.name == "tool_calls" else self.name.replace("_", " ")
        return f"{what} budget of {_shown(self.limit)} reached (used {_shown(self.used)})"


def _tokens(value: Any) -> int:
    return value if type(value) is int and value > 0 else 0


def _dollars(value: Any) -> float:
    """A cost as a float; 0 for one that is not a positive finite number (an int no float
    holds among them)."""
    if type(value) is float or type(value) is int:
        with contextlib.suppress(OverflowError):
            dollars = float(value)
            if math.isfinite(dollars) and dollars > 0:
                return dollars
    return 0.0


def _shown(value: float) -> str:
    if isinstance(value, int):
        return shown_number(value)  # an int too long for digits or for a float: its size
    return f"{value:.6g}"


def tool_budget_text(limit: int) -> str:
    """The error result of a tool call past the run's ``tool_calls`` budget."""
    return f"tool-call budget of {limit} reached"


class Meter:
    """What one run with a budget has used so far (made only for such a run)."""

    __slots__ = (
        "budget",
        "calls",
        "cost",
        "floor",
        "floor_cost",
        "input",
        "output",
        "refused",
        "turns",
    )

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.input = 0  # tokens read, cache included
        self.output = 0
        self.cost = 0.0
        self.turns = 0  # model requests made
        self.calls = 0  # tool calls asked for in batches that run (truncated ones do not)
        self.refused = False  # a call was past the tool-call budget
        self.floor = 0  # the input of the last request: the next one reads at least as much
        self.floor_cost = 0.0  # what reading that much costs at least

    def admit(self, count: int) -> int:
        """How many of the ``count`` calls of a batch may run (the first ones, in source
        order); records them all as asked for."""
        allowed = count
        limit = self.budget.tool_calls
        if limit is not None:
            allowed = max(0, min(count, limit - self.calls))
            if allowed < count:
                self.refused = True
        self.calls += count
        return allowed

    def _add(self, usage: Usage) -> int:
        # What a server reports is bounded by its provider; a tool's usage is whatever the
        # tool made: a count that is not an int, or a cost that is not a finite number, is
        # left out rather than allowed to fail the run, and a negative one too: nothing
        # gives back what the run has used.
        read = _tokens(usage.input) + _tokens(usage.cache_read) + _tokens(usage.cache_write)
        self.input += read
        self.output += _tokens(usage.output)
        self.cost += _dollars(getattr(usage.cost, "total", None))
        return read

    def turn_done(
        self, reply: AssistantMessage, results: Iterable[ToolResultMessage], model: Model
    ) -> BudgetReached | None:
        """Count a finished turn (its one request to ``model``, its reply, its tool
        results); the budget reached if the run must not ask the model again, else None."""
        self.turns += 1
        self.floor = floor = self._add(reply.usage)
        # The next request reads at least ``floor`` tokens, each at least at the cheaper of
        # the model's input and cache-read prices.
        rates = model.cost.rates(floor)
        try:
            tokens = float(floor)
        except OverflowError:  # more tokens than a float holds: as many as it can
            tokens = math.inf
        self.floor_cost = tokens * min(rates.input, rates.cache_read) / 1e6
        for result in results:
            if result.usage is not None:
                self._add(result.usage)
        return self.reached()

    def reached(self) -> BudgetReached | None:
        """The first budget (in field order) that is used up, or that the next request
        would cross for sure; None if the run may go on."""
        budget = self.budget
        limit: float | None = budget.input_tokens
        if limit is not None and (self.input >= limit or self.input + self.floor > limit):
            return BudgetReached("input_tokens", limit, self.input)
        limit = budget.output_tokens
        if limit is not None and self.output >= limit:
            return BudgetReached("output_tokens", limit, self.output)
        limit = budget.total_tokens
        total = self.input + self.output
        if limit is not None and (total >= limit or total + self.floor > limit):
            return BudgetReached("total_tokens", limit, total)
        limit = budget.cost
        if limit is not None and (self.cost >= limit or self.cost + self.floor_cost > limit):
            return BudgetReached("cost", limit, self.cost)
        limit = budget.turns
        if limit is not None and self.turns >= limit:
            return BudgetReached("turns", limit, self.turns)
        limit = budget.tool_calls
        if limit is not None and self.refused:
            return BudgetReached("tool_calls", limit, self.calls)
        return None
