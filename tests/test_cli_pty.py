"""Ctrl-C in a real pseudo-terminal: the command line as a person at a keyboard meets it.

Each test starts ``python -m trio_agent`` on a new pseudo-terminal (its
controlling terminal, so that typing Ctrl-C there makes the terminal driver send
SIGINT, exactly as at a keyboard), types into it, and reads what it shows.
"""

from __future__ import annotations

import codecs
import os
import re
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import trio
import trio.lowlevel

import trio_agent
from tests._providers import fixture
from tests.test_cli import environment, keyed, model_options, project
from tests.test_provider_matrix import APIS, event_end
from trio_agent import AssistantMessage, ToolResultMessage, UserMessage
from trio_agent.testing import ScriptedResponse, check_transcript, open_sse_server

ESCAPES = re.compile(r"\x1b\[[0-9;]*m")
CTRL_C = b"\x03"


class Terminal:
    """The other end of a process's pseudo-terminal: type into it, read what it shows."""

    def __init__(self, pid: int, fd: int) -> None:
        self.pid = pid
        self.stream = trio.lowlevel.FdStream(fd)
        self.shown = ""
        self._changed = trio.Event()

    async def read_all(self) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        while data := await self._receive():
            self.shown += ESCAPES.sub("", decoder.decode(data))
            self._changed.set()
            self._changed = trio.Event()

    async def _receive(self) -> bytes:
        try:
            return await self.stream.receive_some()
        except trio.BrokenResourceError:  # EIO: the process and its terminal are gone
            return b""

    async def expect(self, text: str, count: int = 1) -> None:
        try:
            with trio.fail_after(30):
                await self._until(lambda: self.shown.count(text) >= count)
        except trio.TooSlowError:
            raise AssertionError(
                f"{text!r} (x{count}) never showed; the screen:\n{self.shown}"
            ) from None

    async def _until(self, condition: Callable[[], bool]) -> None:
        while not condition():
            await self._changed.wait()

    async def type(self, keys: bytes) -> None:
        await self.stream.send_all(keys)

    async def exit_code(self) -> int:
        with trio.fail_after(30):
            _, status = await trio.to_thread.run_sync(os.waitpid, self.pid, 0)
        return os.waitstatus_to_exitcode(status)


@asynccontextmanager
async def on_a_terminal(argv: list[str], cwd: Path, env: dict[str, str]) -> AsyncIterator[Terminal]:
    pid, fd = os.forkpty()
    if pid == 0:  # the child: nothing but exec (no Python state of the parent is used)
        try:
            os.chdir(cwd)
            os.execve(sys.executable, [sys.executable, "-m", "trio_agent", *argv], env)
        finally:
            os._exit(127)
    terminal = Terminal(pid, fd)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(terminal.read_all)
        try:
            yield terminal
        finally:
            nursery.cancel_scope.cancel()
            await terminal.stream.aclose()


async def test_ctrl_c_in_the_demo_aborts_keeps_what_arrived_and_exits_130(
    tmp_path: Path,
) -> None:
    saved = tmp_path / "demo.json"
    root = project(tmp_path)
    argv = ["demo", str(root), "--pace", "20", "--save", str(saved)]
    async with on_a_terminal(argv, tmp_path, environment()) as terminal:
        await terminal.expect("… faux_1_1: 33% of")  # the reads are under way
        await terminal.type(CTRL_C)
        await terminal.expect("interrupted: aborting")
        assert await terminal.exit_code() == 130
    transcript = trio_agent.loads(saved.read_text())
    check_transcript(transcript)  # every started call has its result
    results = [m for m in transcript if isinstance(m, ToolResultMessage)]
    assert len(results) == 4  # the listing and the three reads
    alpha = results[1]  # the largest file's read, the slowest: under way at the Ctrl-C
    assert alpha.tool_call_id == "faux_1_1"
    assert alpha.is_error
    kept = [m for m in transcript if isinstance(m, AssistantMessage)]
    assert kept[1].text.startswith("4 files and 1 folders.")  # the partial answer is kept
    assert kept[-1].stop_reason == "aborted"
    assert "Traceback" not in terminal.shown


async def test_ctrl_c_in_chat_aborts_the_run_twice_leaves_and_the_session_resumes(
    tmp_path: Path,
) -> None:
    (api,) = [a for a in APIS if a.name == "anthropic"]
    session = tmp_path / "session.json"
    body = fixture(api.name, "text.sse")
    stalled = ScriptedResponse(body=body, stall_after=event_end(body, api.first_text))
    env = keyed(api)
    async with open_sse_server(stalled, ScriptedResponse(body=body)) as server:
        options = [*model_options(api, server.url, key=True), "--session", str(session)]
        async with on_a_terminal(["chat", *options], tmp_path, env) as terminal:
            await terminal.expect("> ")
            await terminal.type(b"hello there\r")
            await terminal.expect(api.partial)  # the reply streams, then the server stalls
            await terminal.type(CTRL_C)
            await terminal.expect("(aborted)")
            await server.wait_closed_by_client()  # the request was ended
            await terminal.expect("> ", count=2)  # ready for the next line
            await terminal.type(CTRL_C)  # the second in a row: leave
            assert await terminal.exit_code() == 130
        assert "Traceback" not in terminal.shown
        transcript = trio_agent.loads(session.read_text())
        assert len(transcript) == 2
        question, reply = transcript
        assert isinstance(question, UserMessage)
        assert isinstance(reply, AssistantMessage)
        assert reply.stop_reason == "aborted"
        assert reply.text == api.partial  # what arrived before the abort is kept

        # The saved session resumes: the question is sent again, the aborted reply is not.
        async with on_a_terminal(["chat", *options], tmp_path, env) as terminal:
            await terminal.expect("resumed 2 messages")
            await terminal.expect("> ")
            await terminal.type(CTRL_C)  # no run to abort: one Ctrl-C only warns
            await terminal.expect("(Ctrl-C again to leave, or /quit)")
            await terminal.type(b"go on\r")
            await terminal.expect(api.text)
            await terminal.type(b"/quit\r")
            assert await terminal.exit_code() == 0
    resumed = server.requests[1].body
    assert resumed.index(b"hello there") < resumed.index(b"go on")
    assert len(trio_agent.loads(session.read_text())) == 4
