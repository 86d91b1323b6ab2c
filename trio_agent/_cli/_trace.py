"""``--trace``: the OpenTelemetry spans of each run, printed as a tree on stderr after it.

Needs the OpenTelemetry SDK (``pip install opentelemetry-sdk``); imported only
when ``--trace`` is given.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .._events import AgentEvent

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

TRACE_NEEDED = "--trace needs the OpenTelemetry SDK: pip install opentelemetry-sdk"

_SHOWN = (
    "gen_ai.request.model",
    "gen_ai.tool.call.id",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.response.finish_reasons",
)


class TraceUnavailable(Exception):
    """The OpenTelemetry SDK is not installed."""


def tree(spans: Sequence[ReadableSpan]) -> list[str]:
    """The lines of ``spans`` as an indented tree: name, duration, key attributes, status."""
    ids = {span.context.span_id for span in spans if span.context is not None}
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None else None
        children.setdefault(parent if parent in ids else None, []).append(span)
    lines: list[str] = []

    def add(span: ReadableSpan, depth: int) -> None:
        start, end = span.start_time or 0, span.end_time or 0
        parts = [f"{'  ' * depth}{span.name}  {(end - start) / 1e6:.1f} ms"]
        attributes = span.attributes or {}
        for key in _SHOWN:
            if key not in attributes or (key == "gen_ai.request.model" and depth):
                continue  # a chat span's name has its model
            value: Any = attributes[key]
            if isinstance(value, tuple):
                value = ",".join(map(str, value))
            parts.append(f"{key.removeprefix('gen_ai.')}={value}")
        if span.status.status_code.name == "ERROR":
            parts.append(f"ERROR: {span.status.description or ''}".rstrip(": "))
        lines.append("  ".join(parts))
        for child in sorted(
            children.get(span.context.span_id if span.context else None, []),
            key=lambda s: s.start_time or 0,
        ):
            add(child, depth + 1)

    for root in sorted(children.get(None, []), key=lambda s: s.start_time or 0):
        add(root, 0)
    return lines


def open_trace(write: Callable[[str], None]) -> list[Callable[[AgentEvent], Any]]:
    """The listeners that trace each run and ``write`` its tree, line by line, when it ends.

    Raises :class:`TraceUnavailable` when the OpenTelemetry SDK is missing.
    """
    try:
        from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

        from ..otel import Tracing
    except ImportError:
        raise TraceUnavailable(TRACE_NEEDED) from None

    ended: list[ReadableSpan] = []

    class Collect(SpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            ended.append(span)

    provider = TracerProvider()
    provider.add_span_processor(Collect())
    tracing = Tracing(provider)

    async def show(event: AgentEvent) -> None:
        if event.type == "agent_end":
            for line in tree(ended):
                write(line)
            ended.clear()

    return [tracing.listener, show]
