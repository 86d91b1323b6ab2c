"""``trio-agent chat``: a conversation in which the person can act while the agent works.

One task reads lines (in a worker thread: a blocking read of stdin that is
abandoned on exit), one turns SIGINT into an input, and the chat loop takes
both from one channel, in order. A run is a task of its own, so that the
loop keeps taking input while it goes: a line then steers the run, and
Ctrl-C aborts it. Two Ctrl-C in a row (no line between) leave the chat.

The exit code: 130 after two Ctrl-C; else 1 when the last run ended with an
error (a provider's, or one raised), so that ``chat < questions.txt`` in a
script fails as ``run`` would; else 0. A stdout whose reader left ends the
chat (the run aborted) with 0.
"""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Literal, TextIO

import trio

from .._agent import Agent
from .._errors import TrioAgentError
from .._messages import AgentMessage, AssistantMessage
from ._cost import usage_line
from ._term import Terminal

Input = tuple[Literal["line", "eof", "interrupt", "closed"], str]
Save = Callable[[Path, Sequence[AgentMessage]], Awaitable[None]]

HELP = """\
  a line          a prompt (while the agent works: a steering message)
  /follow TEXT    queue a follow-up, sent when the agent would stop
  /save FILE      save the conversation
  /help           this text
  /quit           leave (also Ctrl-D; Ctrl-C twice)
  Ctrl-C          abort the current run"""


def ended_in_error(messages: Sequence[AgentMessage]) -> bool:
    """Whether the transcript's last message is a reply that failed (``stop_reason="error"``)."""
    last = messages[-1] if messages else None
    return isinstance(last, AssistantMessage) and last.stop_reason == "error"


class Chat:
    """The chat loop of one agent; :meth:`run` returns the exit code."""

    def __init__(
        self, agent: Agent, term: Terminal, stdin: TextIO, session: Path | None, *, save: Save
    ) -> None:
        self.agent = agent
        self.term = term
        self.stdin = stdin
        self.session = session
        self.save = save
        self._interactive = bool(getattr(stdin, "isatty", lambda: False)())
        self._done: trio.Event | None = None  # set when the current run has ended
        self._failed = False  # the last run ended with an error
        self._closed = trio.Event()  # stdout's reader left
        term.on_closed = self._on_closed

    def _on_closed(self) -> None:
        self.agent.abort()
        self._closed.set()

    async def run(self) -> int:
        send, receive = trio.open_memory_channel[Input](0)
        with trio.open_signal_receiver(signal.SIGINT) as signals:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._read_lines, send.clone())
                nursery.start_soon(self._watch_closed, send.clone())
                nursery.start_soon(self._forward, signals, send)
                if self._interactive:
                    self.term.note("trio-agent chat: /help for the commands, /quit to leave")
                code = await self._loop(receive, nursery)
                nursery.cancel_scope.cancel()
        return code

    async def _read_lines(self, send: trio.MemorySendChannel[Input]) -> None:
        async with send:
            while True:
                line = await trio.to_thread.run_sync(self.stdin.readline, abandon_on_cancel=True)
                if not line:
                    await send.send(("eof", ""))
                    return
                await send.send(("line", line.rstrip("\r\n")))

    async def _watch_closed(self, send: trio.MemorySendChannel[Input]) -> None:
        async with send:
            await self._closed.wait()
            await send.send(("closed", ""))

    async def _forward(
        self, signals: AsyncIterator[int], send: trio.MemorySendChannel[Input]
    ) -> None:
        async with send:
            async for _ in signals:
                await send.send(("interrupt", ""))

    def _prompt(self) -> None:
        if self._interactive and self._done is None:
            self.term.prompt_marker()

    async def _loop(self, inputs: trio.MemoryReceiveChannel[Input], nursery: trio.Nursery) -> int:
        self._prompt()
        interrupted = False  # the last input was a Ctrl-C
        async for kind, text in inputs:
            if kind == "closed":
                await self._stop()
                return 0
            if kind == "interrupt":
                if interrupted:
                    await self._stop()
                    return 130
                interrupted = True
                if self._done is not None:
                    self.agent.abort()
                    self.term.note("  aborting (Ctrl-C again to leave)", "yellow")
                else:
                    self.term.note("  (Ctrl-C again to leave, or /quit)", "yellow")
                    self._prompt()
                continue
            interrupted = False
            if kind == "eof":
                await self._finished()
                return 0 if self.term.out_closed else self._code()
            line = text.strip()
            if line in ("/quit", "/exit"):
                await self._stop()
                return self._code()
            if line.startswith("/"):
                await self._command(line)
            elif not line:
                pass
            elif self._done is not None:
                self.agent.steer(line)
                self.term.note(f"  (steering: {line})")
                continue
            else:
                self._done = trio.Event()
                nursery.start_soon(self._run, line, self._done)
                continue
            self._prompt()
        return 0  # not reached: the reader sends "eof" before it closes

    def _code(self) -> int:
        """The exit code of a chat left normally: 1 if its last run ended with an error."""
        return 1 if self._failed else 0

    async def _command(self, line: str) -> None:
        command, _, rest = line.partition(" ")
        rest = rest.strip()
        if command == "/help":
            self.term.note(HELP)
        elif command == "/follow" and rest:
            self.agent.follow_up(rest)
            when = "when this run would stop" if self._done is not None else "after the next answer"
            self.term.note(f"  (follow-up queued, sent {when})")
        elif command == "/save" and rest:
            if await self._save(Path(rest)):
                self.term.note(f"  saved {len(self.agent.state.messages)} messages to {rest}")
        elif command in ("/follow", "/save"):
            self.term.note(f"  {command} needs an argument: {command} {_ARGUMENTS[command]}")
        else:
            self.term.note(f"  unknown command {command!r} (/help lists them)", "yellow")

    async def _run(self, prompt: str, done: trio.Event) -> None:
        self._failed = True  # until the run returns and says otherwise
        start = len(self.agent.state.messages)
        try:
            await self.agent.prompt(prompt)
            self._failed = ended_in_error(self.agent.state.messages)
            if self.agent.state.stop is not None:
                self.term.note(f"  budget reached: {self.agent.state.stop}", "yellow")
            used = usage_line(self.agent.state.messages[start:], self.agent.state.model)
            if used is not None:
                self.term.note(used)
        except TrioAgentError as exc:
            self.term.error(str(exc))
        finally:
            if self.session is not None:
                with trio.CancelScope(shield=True):
                    await self._save(self.session)
            self._done = None
            done.set()
            self._prompt()

    async def _save(self, path: Path) -> bool:
        """Save the conversation to ``path``; a failure is told, and the chat goes on."""
        try:
            await self.save(path, self.agent.state.messages)
        except Exception as exc:
            self.term.error(str(exc))
            return False
        return True

    async def _finished(self) -> None:
        """Wait for the current run (if any) to end."""
        if self._done is not None:
            await self._done.wait()

    async def _stop(self) -> None:
        """Abort the current run (if any) and wait until it has ended and been saved."""
        if self._done is not None:
            self.agent.abort()
            await self._done.wait()


_ARGUMENTS = {"/follow": "TEXT", "/save": "FILE"}
