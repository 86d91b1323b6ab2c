"""trio_agent.mcp against servers that send too much, too deep or without end:
tests/mcp_unruly_server.py (the SDK's own low-level server class), over stdio as a subprocess
and over streamable HTTP on loopback.

Each documented limit is tested at the limit: exactly the limit is kept whole, one more is
cut (or left out) and says so. Every test that does real I/O is bounded by ``fail_after``;
none sleeps to wait for a server.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import pytest
import trio
from mcp.shared.exceptions import MCPError

from trio_agent import Agent, AgentTool, ImageContent, TextContent, ToolResult, ToolResultMessage
from trio_agent.mcp import (
    MAX_ERROR_CHARS,
    MAX_IMAGE_CHARS,
    MAX_PAGES,
    MAX_RESULT_BLOCKS,
    MAX_RESULT_CHARS,
    MAX_TOOL_CHARS,
    MAX_TOOLS,
    McpServer,
    open_server,
)
from trio_agent.providers import faux

SERVER = str(Path(__file__).with_name("mcp_unruly_server.py"))
PLAIN_TOOLS = 12  # the tools of the server besides those a listing adds
# The SDK's streamable HTTP transport leaves httpx2's stream generators to the garbage
# collector when it closes, which Trio reports; the SDK's, not ours.
pytestmark = pytest.mark.filterwarnings(r"ignore:Async generator 'http(x|core)2\.:ResourceWarning")
BOUND = 15  # seconds: every real-I/O test ends well before this


def unruly(
    listing: str = "plain", include: Callable[[str], bool] | None = None
) -> AbstractAsyncContextManager[McpServer]:
    """The server over stdio, listing ``listing``."""
    return open_server(sys.executable, args=[SERVER, listing], include=include)


@asynccontextmanager
async def unruly_http(listing: str) -> AsyncIterator[str]:
    """The server over streamable HTTP, listing ``listing``: its URL."""
    process = await trio.lowlevel.open_process(
        # stderr to nowhere: a pipe nobody reads would block the server once full.
        [sys.executable, SERVER, listing, "http"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert process.stdout is not None
        line = b""
        while not line.endswith(b"\n"):
            chunk = await process.stdout.receive_some(1)
            assert chunk, "the HTTP server exited before it was ready"
            line += chunk
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    finally:
        process.terminate()
        with trio.fail_after(BOUND, shield=True):  # reaped even when the test was cancelled
            await process.wait()


def tool(server: McpServer, name: str) -> AgentTool:
    return next(tool for tool in server.tools if tool.name == name)


async def call(server: McpServer, name: str, **args: object) -> ToolResult:
    return await tool(server, name).execute("c", dict(args), lambda _: None)


def text(result: ToolResult | ToolResultMessage) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


def cut_note(body: str) -> str:
    match = re.search(r"\n\[cut: [^\]]*\]\Z", body)
    assert match is not None, body[-80:]
    return match.group()


# --- the tool list ------------------------------------------------------------------------------


async def test_the_tools_past_max_tools_are_left_out_and_named() -> None:
    extra = MAX_TOOLS - PLAIN_TOOLS
    with trio.fail_after(BOUND):
        async with unruly(f"many:{extra}") as server:
            whole = (len(server.tools), server.skipped, server.truncated)
        async with unruly(f"many:{extra + 3}") as server:
            cut = (len(server.tools), server.skipped, server.truncated)
    assert whole == (MAX_TOOLS, (), False)
    assert cut == (MAX_TOOLS, (f"t{extra}", f"t{extra + 1}", f"t{extra + 2}"), False)


async def test_skipped_names_at_most_max_tools_and_truncated_says_there_were_more() -> None:
    extra = 2 * MAX_TOOLS - PLAIN_TOOLS
    with trio.fail_after(BOUND):
        async with unruly(f"many:{extra}") as server:
            whole = (len(server.tools), len(server.skipped), server.truncated)
        async with unruly(f"many:{extra + 1}") as server:
            cut = (len(server.tools), len(server.skipped), server.truncated)
    assert whole == (MAX_TOOLS, MAX_TOOLS, False)
    assert cut == (MAX_TOOLS, MAX_TOOLS, True)


async def test_a_skipped_name_longer_than_128_characters_is_shown_cut() -> None:
    with trio.fail_after(BOUND):
        async with unruly("long_names") as server:
            pass
    assert server.skipped == ("n" * 128, "m" * 128 + "…")


async def test_a_deadline_reaches_the_caller_while_the_tools_are_made() -> None:
    # The include predicate sees each tool just before it is made; the deadline passes at
    # the tenth. Making the tool is a checkpoint, so the other 390 are never made.
    seen: list[str] = []
    with trio.fail_after(BOUND), trio.CancelScope() as scope:

        def include(name: str) -> bool:
            seen.append(name)
            if len(seen) == 10:
                scope.cancel()
            return True

        async with unruly("many:400", include=include):
            pytest.fail("the block ran")  # pragma: no cover
    assert scope.cancelled_caught
    assert len(seen) == 10


async def test_a_tool_defined_in_more_than_max_tool_chars_is_left_out() -> None:
    with trio.fail_after(BOUND):
        async with unruly(f"sized:{MAX_TOOL_CHARS}") as server:
            names = {tool.name for tool in server.tools}
    assert "fits" in names
    assert "too_big" not in names
    assert server.skipped == ("too_big",)


async def test_an_unchanged_tool_is_not_made_again_when_the_list_changes() -> None:
    changed = trio.Event()
    with trio.fail_after(BOUND):
        async with unruly("plain") as server:
            before = server.tools
            server.on_tools_changed(lambda _: changed.set())
            await call(server, "relist", listing="many:1")
            await changed.wait()
            after = server.tools
    assert [tool.name for tool in after] == [*(tool.name for tool in before), "t0"]
    assert all(new is old for new, old in zip(after, before, strict=False))


async def test_a_list_without_end_is_read_to_max_pages_after_a_list_change() -> None:
    changed = trio.Event()
    with trio.fail_after(BOUND):
        async with unruly("plain") as server:
            server.on_tools_changed(lambda _: changed.set())
            await call(server, "relist", listing="endless")
            await changed.wait()
    assert [tool.name for tool in server.tools] == [f"page{n}" for n in range(MAX_PAGES)]
    assert server.truncated


async def test_max_pages_pages_are_read_whole() -> None:
    with trio.fail_after(BOUND):
        async with unruly(f"pages:{MAX_PAGES}") as server:
            pass
    assert [tool.name for tool in server.tools] == [f"page{n}" for n in range(MAX_PAGES)]
    assert not server.truncated


async def test_a_cursor_that_comes_back_ends_the_listing() -> None:
    with trio.fail_after(BOUND):
        async with unruly("repeat") as server:
            pass
    # page one has a tool "page" and the cursor "again"; the page for "again" has "page"
    # again (a name listed twice) and "again" again.
    assert ([tool.name for tool in server.tools], server.skipped) == (["page"], ("page",))
    assert server.truncated


# --- replies the SDK cannot read ------------------------------------------------------------------


async def test_an_unreadable_tool_list_fails_open_server_over_stdio() -> None:
    with trio.fail_after(BOUND), pytest.raises(RuntimeError) as info:
        async with unruly("deep"):
            pytest.fail("the block ran")  # pragma: no cover
    assert str(info.value).startswith(
        f"MCP server {sys.executable!r} failed to list its tools: its reply could not be "
        "read: Invalid JSON: recursion limit exceeded"
    )
    assert isinstance(info.value.__cause__, MCPError)


async def test_an_unreadable_tool_list_fails_open_server_over_http() -> None:
    with trio.fail_after(BOUND):
        async with unruly_http("deep") as url:
            with pytest.raises(RuntimeError, match=f"^MCP server '{url}' failed") as info:
                async with open_server(url=url):
                    pytest.fail("the block ran")  # pragma: no cover
    assert "recursion limit exceeded" in str(info.value)


async def test_an_unreadable_call_result_is_an_error_naming_the_server_and_the_tool() -> None:
    with trio.fail_after(BOUND):
        async with unruly() as server:
            with pytest.raises(Exception, match=r"^MCP server") as info:
                await call(server, "deep")
            pid = text(await call(server, "pid"))  # the session goes on
    assert type(info.value) is Exception
    assert str(info.value).startswith(
        f"MCP server {sys.executable!r} failed to run tool 'deep': its reply could not be read"
    )
    assert pid.isdigit()


async def test_a_byte_that_is_not_utf8_is_read_as_a_replacement_character() -> None:
    # The SDK's stdio client decoded strictly: the reader failed, and the call waited for ever.
    with trio.fail_after(BOUND):
        async with unruly() as server:
            result = await call(server, "bad_utf8")
            pid = text(await call(server, "pid"))  # the session goes on
    assert text(result) == "a\ufffdb"
    assert pid.isdigit()


async def refused(length: int) -> str:
    """What ``open_server`` raises for a listing refused with a message of ``length``."""
    with trio.fail_after(BOUND), pytest.raises(RuntimeError) as info:
        async with unruly(f"refuse:{length}"):
            pass  # pragma: no cover  (the listing fails)
    return str(info.value)


async def test_open_servers_error_is_kept_whole_at_max_error_chars_and_cut_to_it_past() -> None:
    told = f"MCP server {sys.executable!r} failed to list its tools: "
    whole = await refused(MAX_ERROR_CHARS - len(told))
    assert whole == told + "e" * (MAX_ERROR_CHARS - len(told))  # all of it: no cut note
    cut = await refused(MAX_ERROR_CHARS - len(told) + 1)
    assert len(cut) == MAX_ERROR_CHARS
    assert cut.startswith(told + "eee")
    assert cut.endswith(cut_note(cut))


async def test_a_tool_whose_schema_holds_nan_is_left_out() -> None:
    # NaN is not JSON: every request to the model would fail to encode with it.
    with trio.fail_after(BOUND):
        async with unruly("nan") as server:
            pass
    assert ([tool.name for tool in server.tools], server.skipped) == (["finite"], ("nan",))


async def test_a_pattern_re2_cannot_compile_is_left_out_of_a_tools_schema() -> None:
    """zod writes a lookahead into every e-mail address's pattern: the tool is kept, without
    that pattern (its data, a property named "pattern" included, as the server wrote it);
    a patternProperties key with a lookahead costs its tool."""
    with trio.fail_after(BOUND):
        async with unruly("lookahead") as server:
            pass
    assert server.skipped == ("keyed",)
    properties = tool(server, "mail").parameters["properties"]
    assert properties == {
        "to": {"type": "string", "format": "email"},
        "pattern": {"type": "string", "enum": ["(?=data)", "plain"]},
        "options": {"const": {"pattern": "(?=data, not a keyword)"}},
    }
    arguments = {"to": "a.b@example.com", "pattern": "(?=data)"}
    assert tool(server, "mail").validate_arguments(arguments) == arguments


async def test_structured_content_holding_nan_is_not_kept_in_details() -> None:
    # A saved transcript holding it could not be read back.
    with trio.fail_after(BOUND):
        async with unruly() as server:
            result = await call(server, "nan_structured")
    assert text(result) == "ok"
    assert result.details == {
        "cut": "structured content that is not JSON (NaN or infinity), not kept"
    }


async def test_progress_numbers_that_are_not_finite_are_given_as_none() -> None:
    updates: list[ToolResult] = []
    seen = trio.Event()

    def update(partial: ToolResult) -> None:
        updates.append(partial)
        seen.set()

    with trio.fail_after(BOUND):
        async with unruly() as server:
            await tool(server, "nan_progress").execute("c", {}, update)
            await seen.wait()  # the SDK may run the progress callback after the result
    assert updates[0].details == {"progress": None, "total": None}


async def test_structured_content_is_not_checked_with_a_backtracking_regex() -> None:
    # The tool's output schema has the pattern ^(a+)+$ and its result "a" * 26 + "!": Python's
    # re takes 2**26 steps to refuse it (2**40, hours, for 40 a's); the result is not checked.
    with trio.fail_after(BOUND):
        async with unruly() as server:
            result = await call(server, "redos", n=26)
    assert text(result) == "checked?"
    assert result.details == {"s": "a" * 26 + "!"}


async def test_structured_content_failing_its_output_schema_is_an_error_found_in_linear_time() -> (
    None
):
    # Through the loop, the result is checked with RE2: 40 a's and a "!" (2**40 steps for a
    # backtracking engine) are refused at once, and the run goes on.
    with trio.fail_after(BOUND):
        async with unruly() as server:
            redos = tool(server, "redos")
            call = faux.reply(faux.tool_call("redos", {"n": 40}, id="r"))
            agent = Agent(faux.model([call, "done"]), tools=[redos])
            await agent.prompt("go")
    [result] = [m for m in agent.state.messages if isinstance(m, ToolResultMessage)]
    assert result.is_error
    assert text(result).startswith(
        "Tool 'redos' returned structured_content that does not match its output_schema:\n"
        '  - s: must match pattern "^(a+)+$"'
    )


# --- what a call keeps ---------------------------------------------------------------------------


async def test_a_results_text_is_kept_whole_at_the_limit_and_cut_to_it_past() -> None:
    limit = MAX_RESULT_CHARS
    with trio.fail_after(BOUND):
        async with unruly() as server:
            whole = await call(server, "texts", sizes=[limit])
            split = await call(server, "texts", sizes=[60_000, limit - 60_000])
            cut = await call(server, "texts", sizes=[60_000, limit - 60_000 + 1])
    assert text(whole) == text(split) == "x" * limit
    assert len(split.content) == 2
    body = text(cut)
    note = cut_note(body)
    assert len(body) == limit
    assert body == "x" * (limit - len(note)) + note
    assert note == f"\n[cut: {len(note) + 1:,} more characters]"


async def test_a_result_keeps_at_most_max_result_blocks_and_counts_the_rest() -> None:
    with trio.fail_after(BOUND):
        async with unruly() as server:
            whole = await call(server, "texts", sizes=[1] * MAX_RESULT_BLOCKS)
            cut = await call(server, "texts", sizes=[1] * (MAX_RESULT_BLOCKS + 1))
            flood = await call(server, "texts", sizes=[1] * 10_000)
    assert [block.text for block in whole.content] == ["x"] * MAX_RESULT_BLOCKS  # type: ignore[union-attr]
    assert len(cut.content) == MAX_RESULT_BLOCKS - 1
    assert text(cut) == "x" * (MAX_RESULT_BLOCKS - 1) + "\n[cut: 2 more blocks]"
    assert len(flood.content) == MAX_RESULT_BLOCKS - 1
    assert cut_note(text(flood)) == f"\n[cut: {10_000 - MAX_RESULT_BLOCKS + 1:,} more blocks]"


async def test_an_error_result_is_kept_whole_at_max_error_chars_and_cut_to_it_past() -> None:
    with trio.fail_after(BOUND):
        async with unruly() as server:
            whole = await call(server, "error", size=MAX_ERROR_CHARS)
            cut = await call(server, "error", size=MAX_ERROR_CHARS + 1)
    assert (whole.is_error, cut.is_error) == (True, True)  # returned, not raised
    assert text(whole) == "e" * MAX_ERROR_CHARS
    message = text(cut)
    note = cut_note(message)
    assert len(message) == MAX_ERROR_CHARS
    assert message == "e" * (MAX_ERROR_CHARS - len(note)) + note
    assert note == f"\n[cut: {len(note) + 1} more characters]"


async def test_structured_content_is_kept_in_details_up_to_the_limit() -> None:
    with trio.fail_after(BOUND):
        async with unruly() as server:
            whole = await call(server, "structured", size=MAX_RESULT_CHARS)
            cut = await call(server, "structured", size=MAX_RESULT_CHARS + 1)
    assert whole.details == {"s": "y" * (MAX_RESULT_CHARS - 9)}
    assert cut.details == {
        "cut": f"structured content of {MAX_RESULT_CHARS + 1:,} characters of JSON, not kept"
    }
    assert text(whole) == text(cut) == "ok"


async def test_images_are_kept_up_to_max_image_chars_in_all() -> None:
    size = MAX_IMAGE_CHARS // 2 - len("image/png")  # two images of this size fill it
    with trio.fail_after(BOUND):
        async with unruly() as server:
            whole = await call(server, "images", count=2, size=size)
            cut = await call(server, "images", count=2, size=size + 1)
    assert [type(block) for block in whole.content] == [ImageContent, ImageContent]
    assert isinstance(cut.content[0], ImageContent)
    assert cut.content[1] == TextContent(
        f"[image not shown: {size + 1 + len('image/png'):,} characters, past what a result keeps]"
    )


async def test_a_progress_message_is_cut_at_max_error_chars() -> None:
    updates: list[ToolResult] = []
    with trio.fail_after(BOUND):
        async with unruly() as server:
            for size in (MAX_ERROR_CHARS, MAX_ERROR_CHARS + 1):
                seen = trio.Event()

                def update(partial: ToolResult, seen: trio.Event = seen) -> None:
                    updates.append(partial)
                    seen.set()

                await tool(server, "progress").execute("c", {"size": size}, update)
                await seen.wait()  # the SDK may run the progress callback after the result
    whole, cut = (text(update) for update in updates)
    assert whole == "p" * MAX_ERROR_CHARS
    note = cut_note(cut)
    assert cut == "p" * (MAX_ERROR_CHARS - len(note)) + note
    assert note == f"\n[cut: {len(note) + 1} more characters]"


# --- the application's own exceptions -------------------------------------------------------------


async def test_what_include_raises_escapes_open_server_as_itself() -> None:
    error = LookupError("the application's own")

    def include(name: str) -> bool:
        raise error

    with trio.fail_after(BOUND), pytest.raises(LookupError) as info:
        async with unruly(include=include):
            pytest.fail("the block ran")  # pragma: no cover
    assert info.value is error


@pytest.mark.parametrize("where", ["callback", "include"])
async def test_what_the_application_raises_after_a_list_change_cancels_the_body_and_escapes(
    where: str,
) -> None:
    error = LookupError("the application's own")
    body: list[str] = []

    def callback(tools: object) -> None:
        raise error

    def include(name: str) -> bool:
        if name == "t0":
            raise error
        return True

    async def block() -> None:
        async with unruly(include=include if where == "include" else None) as server:
            if where == "callback":
                server.on_tools_changed(callback)
            await call(server, "relist", listing="many:1")
            try:
                await trio.sleep_forever()
            finally:
                body.append("cancelled")

    with trio.fail_after(BOUND), pytest.raises(LookupError) as info:
        await block()
    assert info.value is error
    assert body == ["cancelled"]
