"""What the command line shows: answers on stdout, progress on stderr, colour on a terminal.

Colour is used on a stream only when it is a terminal and ``NO_COLOR`` is
unset or empty (https://no-color.org). With ``--json`` every event is one
line of JSON on stdout and nothing else is written there.

A reader that leaves (``trio-agent demo | head -1``) is a normal way to stop, not an
error: a write that finds its stream's pipe closed silences that stream for good
(its descriptor is pointed at ``os.devnull``, so that what is still buffered, and
Python's own flush at exit, go nowhere instead of failing), and a closed stdout calls
:attr:`Terminal.on_closed`, which the command line uses to end the run.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from typing import TextIO

from .._events import AgentEvent
from .._json import dumps
from .._messages import AssistantMessage, TextContent

_STYLES = {"dim": "2", "bold": "1", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}


def _isatty(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def wants_colour(stream: TextIO) -> bool:
    """Whether to colour what goes to ``stream``."""
    return not os.environ.get("NO_COLOR", "") and _isatty(stream)


def silence(stream: TextIO) -> None:
    """Point ``stream``'s descriptor at ``os.devnull``: later writes and flushes (Python's
    at exit among them) succeed and go nowhere. A stream without one is left as it is."""
    with contextlib.suppress(OSError, ValueError):
        fd = stream.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, fd)
        finally:
            os.close(devnull)


def short(text: str, width: int = 72) -> str:
    """``text`` on one line, cut to ``width`` characters."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def hint(error: str) -> str:
    """What to do about a provider's error message, or "" when there is nothing to add."""
    if "HTTP 401" in error or "HTTP 403" in error:
        return "check the API key in the environment"
    if "HTTP 404" in error:
        return "check the model id (--model) and the server's URL (--base-url)"
    if "HTTP 429" in error:
        return "the server is rate limiting: wait and try again"
    if error.startswith(("could not connect", "could not reach")):
        return "is the server running, and is --base-url right?"
    return ""


class Terminal:
    """The two output streams and their styles.

    Writing never raises ``BrokenPipeError``: a stream whose reader left is silenced
    (:func:`silence`), and when it is stdout, :attr:`out_closed` is set and
    :attr:`on_closed` called (once).
    """

    def __init__(self, out: TextIO, err: TextIO, *, json_lines: bool = False) -> None:
        self.out = out
        self.err = err
        self.json_lines = json_lines
        self.out_closed = False  # stdout's reader left: nothing more is written there
        self.err_closed = False
        self.on_closed: Callable[[], None] | None = None
        self._colour_out = wants_colour(out)
        self._colour_err = wants_colour(err)
        # Both on one terminal: a note must not land in the middle of an answer's line.
        self._shared_screen = _isatty(out) and _isatty(err)
        self._out_open = False  # an answer is being written on stdout
        self._err_open = False  # thinking is being written on stderr

    def _style(self, text: str, style: str, colour: bool) -> str:
        return f"\x1b[{_STYLES[style]}m{text}\x1b[0m" if colour else text

    def _write_out(self, text: str) -> None:
        if self.out_closed:
            return
        try:
            self.out.write(text)
            self.out.flush()
        except BrokenPipeError:
            silence(self.out)
            self.out_closed = True
            if self.on_closed is not None:
                self.on_closed()

    def _write_err(self, text: str) -> None:
        if self.err_closed:
            return
        try:
            self.err.write(text)
            self.err.flush()
        except BrokenPipeError:
            silence(self.err)
            self.err_closed = True

    def answer(self, text: str) -> None:
        """Part of an answer, on stdout, as it arrives."""
        self._write_out(text)
        self._out_open = True

    def end_answer(self) -> None:
        if self._out_open:
            self._write_out("\n")
            self._out_open = False

    def note(self, text: str, style: str = "dim") -> None:
        """A line of progress on stderr."""
        if self._out_open and self._shared_screen:
            self.end_answer()
        if self._err_open:
            self._write_err("\n")
            self._err_open = False
        self._write_err(self._style(text, style, self._colour_err) + "\n")

    def thinking(self, text: str) -> None:
        self._write_err(self._style(text, "dim", self._colour_err))
        self._err_open = True

    def error(self, text: str) -> None:
        """One line naming a failure, and what to do about it when that is known."""
        advice = hint(text)
        line = f"error: {short(text, 400)}" + (f" ({advice})" if advice else "")
        self.note(line, "red")

    def prompt_marker(self) -> None:
        self._write_err(self._style("> ", "bold", self._colour_err))

    async def show(self, event: AgentEvent) -> None:
        """The listener: one event, as JSON or for a person."""
        if self.json_lines:
            self._write_out(dumps(event) + "\n")
            return
        self._show(event)

    def _show(self, event: AgentEvent) -> None:
        if event.type == "message_update":
            inner = event.assistant_message_event
            if inner.type == "text_delta":
                self.answer(inner.delta)
            elif inner.type == "text_end":
                self.end_answer()
            elif inner.type == "thinking_delta":
                self.thinking(inner.delta)
            elif inner.type == "thinking_end" and self._err_open:
                self._write_err("\n")
                self._err_open = False
        elif event.type == "tool_execution_start":
            arguments = json.dumps(event.args, ensure_ascii=False)
            self.note(f"  → {event.tool_name} {short(arguments, 60)}  [{event.tool_call_id}]")
        elif event.type == "tool_execution_update":
            self.note(f"    … {event.tool_call_id}: {short(_text(event.partial_result.content))}")
        elif event.type == "tool_execution_end":
            text = short(_text(event.result.content), 60)
            if event.is_error:
                self.note(f"  ✗ {event.tool_call_id}: {text}", "yellow")
            else:
                self.note(f"  ✓ {event.tool_call_id}: {text}", "green")
        elif event.type == "turn_end" and len(event.tool_results) > 1:
            order = ", ".join(m.tool_call_id for m in event.tool_results)
            self.note(f"  results handed back in source order: {order}")
        elif event.type == "message_end" and isinstance(event.message, AssistantMessage):
            self.end_answer()
            message = event.message
            if message.stop_reason == "error":
                self.error(message.error_message or "the model's reply failed")
            elif message.stop_reason == "aborted" and not self.out_closed:
                self.note("  (aborted)", "yellow")  # (not when the reader leaving aborted it)
            elif message.stop_reason == "length":
                self.note("  (the reply was cut at the token limit)", "yellow")


def _text(content: object) -> str:
    blocks = content if isinstance(content, tuple | list) else ()
    return " ".join(b.text for b in blocks if isinstance(b, TextContent)) or "(no text)"
