"""The line that tells what a run used: tokens, and money at the model's catalog prices.

Printed on stderr (progress, not the answer) after ``run`` and after each
run of ``chat``; not with ``--json``, whose events already carry each
reply's usage. A run that used no tokens (it failed before the model
answered) gets no line: its error is the one line to read.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._messages import AgentMessage, AssistantMessage
from .._model import Model, ModelCost


def usage_line(messages: Sequence[AgentMessage], model: Model) -> str | None:
    """``"  used 1,234 tokens in, 56 out (1,000 cache read): $0.0012"`` for the replies in
    ``messages``; None when they used no tokens."""
    replies = [m for m in messages if isinstance(m, AssistantMessage)]
    tokens_in = sum(m.usage.input for m in replies)
    tokens_out = sum(m.usage.output for m in replies)
    cache_read = sum(m.usage.cache_read for m in replies)
    cache_write = sum(m.usage.cache_write for m in replies)
    if not (tokens_in or tokens_out or cache_read or cache_write):
        return None
    line = f"  used {tokens_in:,} tokens in, {tokens_out:,} out"
    counts = ((cache_read, "read"), (cache_write, "write"))
    cache = [f"{n:,} cache {kind}" for n, kind in counts if n]
    if cache:
        line += f" ({', '.join(cache)})"
    if model.cost == ModelCost():
        where = f" at {model.base_url}" if model.base_url else ""
        return f"{line}; no prices known for {model.id}{where}"
    return f"{line}: {money(sum(m.usage.cost.total for m in replies))}"


def money(amount: float) -> str:
    """Dollars, to the cent when there are some, else to four places (``"<$0.0001"`` below)."""
    if amount >= 1:
        return f"${amount:,.2f}"
    if 0 < amount < 0.0001:
        return "<$0.0001"
    return f"${amount:.4f}"
