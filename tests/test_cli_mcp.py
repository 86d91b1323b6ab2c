"""``trio-agent run`` and ``chat`` with ``--mcp``: the tools of an MCP server started for the
command's life (docs/examples/mcp_server.py, over stdio), a missing ``mcp`` package, a server
that does not start, and the help that lists the option."""

from __future__ import annotations

import importlib.util
import shlex
import sys
from pathlib import Path

import pytest

import trio_agent
from tests._providers import fixture
from tests.test_cli import answer, cli, keyed, model_options, run_main
from tests.test_provider_matrix import APIS
from trio_agent import ToolResultMessage
from trio_agent.testing import ScriptedResponse, check_transcript, open_sse_server

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "docs" / "examples" / "mcp_server.py"
MCP = shlex.join([sys.executable, str(SERVER)])
(API,) = [api for api in APIS if api.name == "openai_chat"]

needs_mcp = pytest.mark.skipif(
    importlib.util.find_spec("mcp") is None, reason="needs the mcp package"
)


def word_count_call() -> ScriptedResponse:
    """The API's "echo" tool call made a call of the example server's ``word_count``."""
    body = fixture(API.name, API.call_fixture)
    body = body.replace(b'"echo"', b'"word_count"').replace(b"value", b"text")
    return ScriptedResponse(body=body, pieces=(1, 7))


@needs_mcp
async def test_run_gives_the_model_the_tools_of_an_mcp_server(tmp_path: Path) -> None:
    session = tmp_path / "session.json"
    async with open_sse_server(word_count_call(), answer(API)) as server:
        argv = ["run", "Count", *model_options(API, server.url), "--session", str(session)]
        result = await cli([*argv, "--mcp", MCP], env=keyed(API), cwd=tmp_path)
    assert result.code == 0, result
    assert result.out == API.answer + "\n"
    assert "→ word_count" in result.err
    assert "Traceback" not in result.err
    assert b'"word_count"' in server.requests[0].body  # offered beside the file tools
    assert b'"read_file"' in server.requests[0].body
    transcript = trio_agent.loads(session.read_text())
    check_transcript(transcript)
    (tool_result,) = [m for m in transcript if isinstance(m, ToolResultMessage)]
    assert not tool_result.is_error, tool_result
    assert "2" in "".join(getattr(part, "text", "") for part in tool_result.content)


@needs_mcp
async def test_chat_gives_the_model_the_tools_of_an_mcp_server(tmp_path: Path) -> None:
    async with open_sse_server(word_count_call(), answer(API)) as server:
        argv = ["chat", *model_options(API, server.url), "--mcp", MCP]
        result = await cli(argv, env=keyed(API), cwd=tmp_path, stdin=b"Count\n")
    assert result.code == 0, result
    assert API.answer in result.out
    assert "→ word_count" in result.err
    assert b'"word_count"' in server.requests[0].body


@needs_mcp
async def test_a_server_that_does_not_start_is_one_line_and_exit_1(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-server"
    result = await cli(
        [
            "run",
            "hi",
            "--model",
            "openai-chat:llama3.2",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--mcp",
            str(missing),
        ],
        env=keyed(API),
        cwd=tmp_path,
    )
    assert result.code == 1, result
    (line,) = result.err.splitlines()
    assert line.startswith("error: --mcp "), line
    assert "did not start" in line


@needs_mcp
async def test_a_server_whose_tool_list_cannot_be_read_is_one_line_and_exit_1(
    tmp_path: Path,
) -> None:
    # The list nested past what the SDK's parser reads: it waited for a reply for ever.
    unruly = shlex.join([sys.executable, str(ROOT / "tests" / "mcp_unruly_server.py"), "deep"])
    result = await cli(
        [
            "run",
            "hi",
            "--model",
            "openai-chat:llama3.2",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--mcp",
            unruly,
        ],
        env=keyed(API),
        cwd=tmp_path,
    )
    assert result.code == 1, result
    (line,) = result.err.splitlines()  # not the SDK's log of what it could not parse
    assert line.startswith(f"error: --mcp {unruly!r}: the server did not start: "), line
    assert "its reply could not be read" in line


def test_without_the_mcp_package_mcp_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "trio_agent.mcp", None)  # import trio_agent.mcp fails
    for command in (["run", "hi"], ["chat"]):
        result = run_main([*command, "--model", "openai-chat:x", "--mcp", "python server.py"])
        assert result.code == 2, result
        assert result.err.splitlines() == [
            "error: --mcp needs the mcp package: pip install 'trio_agent[mcp]'"
        ]
        assert result.out == ""


def test_without_mcp_the_package_is_not_needed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "trio_agent.mcp", None)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = run_main(["run", "hi", "--model", "openai-chat:gpt-4o"])
    assert result.code == 1, result  # past the options, to the key, without trio_agent.mcp
    assert result.err.startswith("error: no API key"), result


@pytest.mark.parametrize(
    ("spec", "says"),
    [("", "--mcp needs a command line"), ("python 'x.py", "No closing quotation")],
)
def test_an_mcp_command_line_that_does_not_parse_is_a_usage_error(spec: str, says: str) -> None:
    result = run_main(["run", "hi", "--model", "openai-chat:x", "--mcp", spec])
    assert result.code == 2, result
    assert says in result.err
    assert "usage: trio-agent run" in result.err


@pytest.mark.parametrize("command", ["run", "chat"])
def test_the_help_lists_mcp(command: str) -> None:
    result = run_main([command, "--help"])
    assert result.code == 0
    assert "--mcp 'COMMAND ARGS'" in result.out
    assert "trio_agent[mcp]" in result.out
