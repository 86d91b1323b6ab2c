"""Server-sent events from the text of a response, one network read at a time.

:class:`SseDecoder` takes each piece of text as it arrives and returns the
events it completes. It follows the event-stream interpretation of the HTML
standard with httpx-sse's conventions (design.md#server-sent-events), and a property
test holds it to httpx-sse's own decoder on every stream and every way of
cutting it, but for the one rule of the standard httpx-sse leaves out (the
last point below):

* lines end in ``\\n``, ``\\r\\n`` or ``\\r``, and in nothing else (a raw
  U+2028 inside a JSON string does not end a line); an empty line dispatches;
* ``event``, ``data`` (several lines joined with ``\\n``), ``id`` (unless it
  holds a NUL; it is kept for later events) and ``retry`` (an integer); one
  space after the colon is dropped; a line starting with ``:`` is a comment;
  other fields are ignored;
* an event is named ``message`` when it has no ``event`` line;
* a block without a ``data`` line dispatches nothing (the standard's
  "dispatch the event": if the data buffer is empty, reset the buffers and
  return). httpx-sse dispatches it, with empty data, when it has a name, an
  id or a retry; but ``retry: 3000``, ``id: 1`` or ``event: ping`` alone are
  legal blocks that carry no event, and the providers, whose events are all
  JSON, would take the empty data for a malformed event. Its ``id`` is still
  kept for the events after it;
* what follows the last empty line is dropped at the end of the stream;
* a byte-order mark at the start is not dropped (as httpx-sse has it): it
  makes the first line's field name unknown, so that line is ignored.

This decoder (design.md#server-sent-events) stands in for httpx-sse, for
speed. httpx-sse's ``EventSource.aiter_sse()`` passes every line
through two async generators and decodes it on its own, about 1.75 µs per
event of a chat stream, which is as much as the provider's whole parsing and
normalizing of the event. This decoder splits a whole read into events with
one ``str.split`` and takes the common event, a single ``data:`` line,
straight: about a third of that, with the event objects it makes
(``python -m benchmarks B8``). httpx-sse stays in the tests, as the reference
this decoder is checked against.

Work stays linear: the text of an event that spans many reads is joined once,
when its end arrives.
"""

from __future__ import annotations

import contextlib

import attrs

__all__ = ["MAX_EVENT_CHARS", "EventTooLarge", "SseDecoder", "SseEvent"]


@attrs.define
class SseEvent:
    """One server-sent event (mutable and slotted: one is made for every event of a
    stream, and only the parser that reads it sees it)."""

    event: str
    """The event's name: its ``event`` field, else ``"message"``."""
    data: str
    """Its ``data`` lines, joined with newlines."""
    id: str = ""
    """The last ``id`` the stream gave, at this event or before."""
    retry: int | None = None
    """Its ``retry`` field, the reconnection time in milliseconds."""


MAX_EVENT_CHARS = 32 * 1024 * 1024
"""The longest event a decoder holds while it waits for the event's end (32 Mi characters:
far above any event of the four APIs, a whole long reply in a final event included)."""


class EventTooLarge(ValueError):
    """An event grew past :data:`MAX_EVENT_CHARS` without ending."""


class SseDecoder:
    """Decodes one event stream; :meth:`decode` each piece of text, then :meth:`flush`.

    The text of an event is held until the event ends, so a server that never
    ends one (an endless ``data:`` line) would make it hold everything it
    sends: past ``max_event_chars``, :meth:`decode` raises
    :class:`EventTooLarge` instead.
    """

    __slots__ = ("_cr", "_data", "_event", "_id", "_limit", "_pending", "_retry", "_size")

    def __init__(self, max_event_chars: int = MAX_EVENT_CHARS) -> None:
        self._limit = max_event_chars
        self._size = 0  # the characters held in _pending
        self._pending: list[str] = []  # text after the last complete event, not yet decoded
        self._cr = False  # the last piece ended in "\r": it may be the start of a "\r\n"
        self._event = ""
        self._data: list[str] = []
        self._id = ""
        self._retry: int | None = None

    def decode(self, text: str) -> list[SseEvent]:
        """The events completed by ``text``, the next piece of the stream."""
        if self._cr:
            text = "\r" + text
            self._cr = False
        if text.endswith("\r"):
            self._cr = True
            text = text[:-1]
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        pending = self._pending
        if pending:
            if "\n\n" not in text and not (text[:1] == "\n" and pending[-1][-1:] == "\n"):
                if text:
                    pending.append(text)
                    self._hold(len(text))
                return []
            pending.append(text)
            text = "".join(pending)
            pending.clear()
            self._size = 0
        blocks = text.split("\n\n")
        rest = blocks.pop()
        if rest:
            pending.append(rest)
            self._hold(len(rest))
        events: list[SseEvent] = []
        for block in blocks:
            # The common event, one "data: " line, goes straight; the state is
            # always empty at the start of a block, as the previous one dispatched.
            if block[:6] == "data: " and "\n" not in block:
                events.append(SseEvent("message", block[6:], self._id))
            else:
                for line in block.split("\n"):
                    self._line(line, events)
                self._line("", events)
        return events

    def flush(self) -> list[SseEvent]:
        """The events completed by the end of the stream: a last ``\\r`` ends a line (and
        may end an event). What follows the last empty line is dropped: it can hold no
        event, as a block without its empty line never dispatches."""
        events: list[SseEvent] = []
        if self._cr:
            self._cr = False
            events = self.decode("\n")
        self._pending.clear()
        self._size = 0
        return events

    def _hold(self, size: int) -> None:
        """Count ``size`` more characters held for an unfinished event; refuse too many."""
        self._size += size
        if self._size > self._limit:
            held, self._size = self._size, 0
            self._pending.clear()
            raise EventTooLarge(
                f"an event longer than {self._limit:,} characters "
                f"({held:,} received without its end)"
            )

    def _line(self, line: str, events: list[SseEvent]) -> None:
        if not line:
            if self._data:
                events.append(
                    SseEvent(self._event or "message", "\n".join(self._data), self._id, self._retry)
                )
                self._data = []
            self._event = ""
            self._retry = None
            return
        if line[0] == ":":
            return
        field, _, value = line.partition(":")
        if value[:1] == " ":
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id":
            if "\0" not in value:
                self._id = value
        elif field == "retry":
            with contextlib.suppress(ValueError):  # as httpx-sse: what int() takes
                self._retry = int(value)
