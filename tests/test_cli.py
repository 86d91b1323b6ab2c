"""The command line: the demo, ``run`` and ``chat`` against the loopback server, the file
tools' confinement, terminal conventions and exit codes (cli.md).

The demo runs in-process on virtual time (deterministic: the reads finish in the
order of their sizes) and as a real process. ``run`` and ``chat`` run as real
processes against the loopback SSE server, once per wire API. Ctrl-C is tested in
a real pseudo-terminal: tests/test_cli_pty.py.
"""

from __future__ import annotations

import codecs
import io
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agent
from tests._providers import fixture
from tests.test_provider_matrix import APIS, KEY, OWN_SERVERS, Api, event_end
from trio_agent import AssistantMessage, Budget, ModelCost, ToolResultMessage, UserMessage
from trio_agent import models as catalog
from trio_agent._cli import SessionError, UsageError, _budget, _parser, _save, main, parse_model
from trio_agent._cli._files import file_tools
from trio_agent._cli._term import Terminal
from trio_agent.testing import ScriptedResponse, check_transcript, open_sse_server, sse_body

BASE_PATHS = {
    "openai_chat": "/v1",
    "openai_responses": "/v1",
    "anthropic": "",
    "google": "/v1beta",
}
MODEL_IDS = {
    "openai_chat": "gpt-4.1",
    "openai_responses": "gpt-4.1",
    "anthropic": "claude-sonnet-4-5",
    "google": "gemini-2.5-flash",
}
NOTES = "ping ✓ and x\nsecond line\n"
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(params=APIS, ids=[api.name for api in APIS])
def api(request: pytest.FixtureRequest) -> Api:
    param: Api = request.param
    return param


class Outcome:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    def __repr__(self) -> str:
        return f"exit {self.code}\n--- stdout\n{self.out}\n--- stderr\n{self.err}"


def run_main(argv: Sequence[str], *, stdin: str = "", autojump: float = 0) -> Outcome:
    out, err = io.StringIO(), io.StringIO()
    clock = trio.testing.MockClock(autojump_threshold=autojump)
    code = main(list(argv), stdin=io.StringIO(stdin), stdout=out, stderr=err, clock=clock)
    return Outcome(code, out.getvalue(), err.getvalue())


def project(tmp_path: Path) -> Path:
    """A folder to run the demo on: three text files of different sizes, a folder, a binary."""
    return fill(tmp_path / "project")


def fill(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "alpha.md").write_text("# Alpha\n" + "words and more words\n" * 2000)
    (root / "beta.txt").write_text("Beta\nshort\n")
    (root / "gamma.py").write_text('"""Gamma."""\n' + "x = 1\n" * 300)
    (root / "image.bin").write_bytes(b"\0\1\2")
    (root / "sub").mkdir()
    return root


# --- the demo -----------------------------------------------------------------------------------


def test_the_demo_streams_reads_in_parallel_and_answers_from_what_it_read(
    tmp_path: Path,
) -> None:
    # The reads count in worker threads: the clock must not jump while one is busy (so not
    # at once when every task waits), or a read could fall behind in virtual time.
    result = run_main(["demo", str(project(tmp_path))], autojump=0.01)
    assert result.code == 0, result
    out_lines = result.out.splitlines()
    assert out_lines[0] == "Let me look at the folder first."
    assert out_lines[1] == (
        "4 files and 1 folders. Reading alpha.md, beta.txt and gamma.py in parallel."
    )
    assert out_lines[2] == (
        "I read 3 files: 2,304 lines and 8,905 words in all; the longest is alpha.md."
    )
    assert out_lines[3:] == [
        '- alpha.md: 2,001 lines, 8,002 words, starting "# Alpha"',
        '- beta.txt: 2 lines, 2 words, starting "Beta"',
        '- gamma.py: 301 lines, 901 words, starting """"Gamma.""""',
    ]
    err = result.err
    starts = [line.split("[")[1].rstrip("]") for line in err.splitlines() if "→ read_file" in line]
    ends = [line.split(":")[0].split()[-1] for line in err.splitlines() if "✓ faux_1" in line]
    assert starts == ["faux_1_1", "faux_1_2", "faux_1_3"]
    assert ends == ["faux_1_2", "faux_1_3", "faux_1_1"]  # the smallest read finishes first
    assert "… faux_1_1: 33% of" in err
    assert "… faux_1_1: 100% of" in err
    assert "results handed back in source order: faux_1_1, faux_1_2, faux_1_3" in err
    assert "\x1b[" not in result.out + result.err  # not a terminal: no colour


def test_the_demo_takes_the_time_its_pace_says(tmp_path: Path) -> None:
    root = project(tmp_path)
    clock = trio.testing.MockClock(autojump_threshold=0)
    out, err = io.StringIO(), io.StringIO()
    assert main(["demo", str(root), "--pace", "100"], stdout=out, stderr=err, clock=clock) == 0
    paced = clock.current_time()
    clock = trio.testing.MockClock(autojump_threshold=0)
    assert main(["demo", str(root), "--pace", "0"], stdout=out, stderr=err, clock=clock) == 0
    assert clock.current_time() == 0
    assert 2 < paced < 20  # a few seconds on a small folder


def test_the_demo_in_json_prints_every_event_as_one_line(tmp_path: Path) -> None:
    result = run_main(["demo", str(project(tmp_path)), "--json", "--pace", "0"])
    assert result.code == 0, result
    events = [json.loads(line) for line in result.out.splitlines()]
    types = [event["type"] for event in events]
    assert types[0] == "agent_start"
    assert types[-1] == "agent_end"
    assert types.count("tool_execution_start") == 4
    transcript = trio_agent.loads(json.dumps(events[-1]["messages"]))
    check_transcript(transcript)
    assert result.err == ""  # nothing else: the events say it all


def test_the_demo_saves_a_transcript_that_loads(tmp_path: Path) -> None:
    saved = tmp_path / "demo.json"
    result = run_main(["demo", str(project(tmp_path)), "--save", str(saved)])
    assert result.code == 0, result
    transcript = trio_agent.loads(saved.read_text())
    check_transcript(transcript)
    assert isinstance(transcript[0], UserMessage)
    last = transcript[-1]
    assert isinstance(last, AssistantMessage)
    assert last.text.startswith("I read 3 files")


def test_the_demo_neither_lists_nor_reads_a_link_that_leads_outside(tmp_path: Path) -> None:
    root = project(tmp_path)
    (tmp_path / "secret.txt").write_text("the secret\n")
    (root / "a-link.txt").symlink_to(tmp_path / "secret.txt")
    result = run_main(["demo", str(root), "--pace", "0"])
    assert result.code == 0, result
    assert "a-link.txt" not in result.out + result.err
    assert "Reading alpha.md, beta.txt and gamma.py in parallel." in result.out


def test_the_demo_on_an_empty_folder_says_so(tmp_path: Path) -> None:
    result = run_main(["demo", str(tmp_path)])
    assert result.code == 0, result
    assert "no text file I can read" in result.out


def test_the_demo_runs_as_a_process_on_this_repository() -> None:
    repository = Path(__file__).resolve().parent.parent
    for command in (
        [sys.executable, "-m", "trio_agent"],
        [str(Path(sys.executable).parent / "trio-agent")],  # the installed script
    ):
        done = subprocess.run(
            [*command, "demo", "--pace", "0"],
            cwd=repository,
            capture_output=True,
            text=True,
            timeout=60,
            env=environment(),
        )
        assert done.returncode == 0, done.stderr
        assert "I read " in done.stdout
        assert "results handed back in source order" in done.stderr


# --- usage, help, colour ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        ([], "the following arguments are required: COMMAND"),
        (["demo", "/no/such/folder"], "'/no/such/folder' is not a folder"),
        (["demo", "--pace", "-1"], "--pace must be 0 or more, not -1"),
        (["run", "hi"], "--model API:ID is needed (or set TRIO_AGENT_MODEL)"),
        (["run", "hi", "--model", "gpt-4o"], "--model must be API:ID"),
        (["run", "hi", "--model", "foo:bar"], "--model names an unknown API 'foo'"),
        (["chat", "--model", "openai:x", "--root", "/no/such"], "'/no/such' is not a folder"),
        (["chat", "--model", "openai:x", "--thinking", "huge"], "invalid choice: 'huge'"),
        (["models", "--provider", "nope"], "--provider names an unknown provider 'nope'; known: "),
        (["models", "--api", "bedrock"], "--api names an unknown API 'bedrock'; known: "),
        (
            ["run", "hi", "--model", "openai:x", "--provider", "nope"],
            "--provider names an unknown provider 'nope'; known: ant-ling, anthropic, ",
        ),
        (
            ["chat", "--model", "anthropic:x", "--provider", "groq"],
            "--provider 'groq' serves no models over anthropic-messages; "
            "use --model with openai-chat",
        ),
        (
            ["run", "hi", "--model", "openai:x", "--max-cost", "-1"],
            "argument --max-cost: must be a positive number of dollars, not '-1'",
        ),
        (
            ["run", "hi", "--model", "openai:x", "--max-cost", "nan"],
            "argument --max-cost: must be a positive number of dollars, not 'nan'",
        ),
        (
            ["chat", "--model", "openai:x", "--max-turns", "0"],
            "argument --max-turns: must be a whole number of 1 or more, not '0'",
        ),
        (
            ["run", "hi", "--model", "openai:x", "--max-input-tokens", "many"],
            "argument --max-input-tokens: must be a whole number of 1 or more, not 'many'",
        ),
        (
            ["run", "hi", "--model", "openai:x", "--max-tool-calls", "-1"],
            "argument --max-tool-calls: must be a whole number of 0 or more, not '-1'",
        ),
    ],
)
def test_usage_errors_exit_2_and_say_what_is_wrong(
    argv: list[str], says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TRIO_AGENT_MODEL", raising=False)
    result = run_main(argv)
    assert result.code == 2, result
    assert says in result.err
    assert "usage: trio-agent" in result.err
    assert result.out == ""


@pytest.mark.parametrize("command", [[], ["demo"], ["run"], ["chat"], ["models"]])
def test_every_command_has_help(command: list[str]) -> None:
    result = run_main([*command, "--help"])
    assert result.code == 0
    assert result.out.startswith("usage: trio-agent")


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("no_color", "coloured"), [(None, True), ("", True), ("1", False)])
def test_colour_only_on_a_terminal_and_never_with_no_color(
    no_color: str | None, coloured: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if no_color is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", no_color)
    term = Terminal(FakeTerminal(), FakeTerminal())
    term.error("HTTP 401 from openai: bad key")
    shown = term.err.getvalue()  # type: ignore[attr-defined]  # a FakeTerminal, here
    assert ("\x1b[31m" in shown) is coloured
    assert "error: HTTP 401 from openai: bad key (check the API key in the environment)" in shown
    plain = Terminal(io.StringIO(), io.StringIO())
    plain.error("x")
    assert "\x1b[" not in plain.err.getvalue()  # type: ignore[attr-defined]  # a StringIO


# --- the file tools -----------------------------------------------------------------------------


async def call_tool(tools: list[Any], name: str, **arguments: Any) -> tuple[str, bool]:
    """The text of a tool's result, and whether it failed (as the loop would record it)."""
    (found,) = [t for t in tools if t.name == name]
    try:
        result = await found.execute("id", arguments, lambda partial: None)
    except Exception as exc:
        return str(exc), True
    return result.content[0].text, False


async def test_the_file_tools_read_list_and_search_inside_the_root(tmp_path: Path) -> None:
    root = project(tmp_path)
    tools = file_tools(root.resolve())
    assert await call_tool(tools, "list_files") == (
        "alpha.md\nbeta.txt\ngamma.py\nimage.bin\nsub/",
        False,
    )
    assert await call_tool(tools, "read_file", path="beta.txt") == ("Beta\nshort", False)
    text, failed = await call_tool(tools, "read_file", path="gamma.py", offset=2, limit=2)
    assert (text, failed) == ("x = 1\nx = 1\n[... lines 2-3 of 301; read on with offset=4]", False)
    text, failed = await call_tool(tools, "search_files", pattern="^Beta|Gamma")
    assert (text, failed) == ('beta.txt:1: Beta\ngamma.py:1: """Gamma."""', False)
    assert await call_tool(tools, "search_files", pattern="nowhere") == (
        "no match for 'nowhere'",
        False,
    )


@pytest.mark.parametrize(
    ("name", "arguments", "error"),
    [
        ("read_file", {"path": "../secret.txt"}, "path '../secret.txt' is outside the root"),
        ("read_file", {"path": "/etc/passwd"}, "path '/etc/passwd' is outside the root"),
        ("read_file", {"path": "link"}, "path 'link' is outside the root"),
        ("list_files", {"path": ".."}, "path '..' is outside the root"),
        ("search_files", {"pattern": "x", "path": "../"}, "path '../' is outside the root"),
        ("read_file", {"path": "image.bin"}, "'image.bin' is a binary file"),
        ("read_file", {"path": "sub"}, "'sub' is not a file"),
        ("list_files", {"path": "beta.txt"}, "'beta.txt' is not a folder"),
        ("read_file", {"path": "beta.txt", "offset": 0}, "offset must be 1 or more, not 0"),
        ("search_files", {"pattern": "("}, "pattern '(' is not a regular expression"),
    ],
)
async def test_the_file_tools_refuse_what_they_must_with_a_clear_error(
    tmp_path: Path, name: str, arguments: dict[str, Any], error: str
) -> None:
    root = project(tmp_path)
    (tmp_path / "secret.txt").write_text("secret")
    (root / "link").symlink_to(tmp_path / "secret.txt")
    text, failed = await call_tool(file_tools(root.resolve()), name, **arguments)
    assert failed
    assert error in text
    assert "secret" not in text.replace("secret.txt", "")


# --- run and chat against the loopback server ---------------------------------------------------


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("NO_COLOR", None)
    env.pop("TRIO_AGENT_MODEL", None)
    env.update(extra)
    return env


SERVER_KEY = "SERVER_KEY"
"""The variable that holds the loopback server's key, which ``--api-key-env`` names: a
provider's own variable is never sent to a server on this machine."""


def keyed(api: Api) -> dict[str, str]:
    """The environment of a command given the key (``model_options(..., key=True)``), the
    provider's own variables set too (they are not sent to the loopback server)."""
    return environment(**{SERVER_KEY: KEY}, **{name: "not-sent" for name in api.env_keys})


def model_options(api: Api, url: str, *, key: bool = False) -> list[str]:
    """``--model`` and ``--base-url`` for the loopback server at ``url``; with ``key``,
    ``--api-key-env`` naming the variable that holds its key (:func:`keyed`)."""
    return [
        "--model",
        f"{api.api_name}:{MODEL_IDS[api.name]}",
        "--base-url",
        url + BASE_PATHS[api.name],
        *(["--api-key-env", SERVER_KEY] if key else []),
    ]


def search_call(api: Api) -> ScriptedResponse:
    """The API's "echo" tool call, made a call of the file tool ``search_files``."""
    body = fixture(api.name, api.call_fixture)
    body = body.replace(b'"echo"', b'"search_files"').replace(b"value", b"pattern")
    return ScriptedResponse(body=body, pieces=(1, 7))


def answer(api: Api) -> ScriptedResponse:
    return ScriptedResponse(body=fixture(api.name, api.answer_fixture), pieces=(1, 7))


async def cli(
    argv: Sequence[str], *, env: dict[str, str], cwd: Path, stdin: bytes = b""
) -> Outcome:
    with trio.fail_after(60):
        done = await trio.run_process(
            [sys.executable, "-m", "trio_agent", *argv],
            stdin=stdin,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            env=env,
            cwd=cwd,
        )
    return Outcome(
        done.returncode, done.stdout.decode("utf-8"), done.stderr.decode("utf-8", "replace")
    )


async def test_run_calls_a_file_tool_and_streams_the_answer(api: Api, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text(NOTES)
    session = tmp_path / "session.json"
    async with open_sse_server(search_call(api), answer(api)) as server:
        argv = [
            "run",
            "Find ping",
            *model_options(api, server.url, key=True),
            "--session",
            str(session),
        ]
        result = await cli(argv, env=keyed(api), cwd=tmp_path)
    assert result.code == 0, result
    assert result.out == api.answer + "\n"
    assert "→ search_files" in result.err
    assert "Traceback" not in result.err
    assert KEY not in result.out + result.err
    assert len(server.requests) == 2
    assert b"notes.txt:1: ping" in server.requests[1].body  # the tool's result went back
    transcript = trio_agent.loads(session.read_text())
    check_transcript(transcript)
    (result_message,) = [m for m in transcript if isinstance(m, ToolResultMessage)]
    assert not result_message.is_error
    assert KEY not in session.read_text()


async def test_run_resumes_a_saved_session(api: Api, tmp_path: Path) -> None:
    session = tmp_path / "session.json"
    async with open_sse_server(answer(api), answer(api)) as server:
        options = [*model_options(api, server.url, key=True), "--session", str(session)]
        first = await cli(["run", "first question", *options], env=keyed(api), cwd=tmp_path)
        second = await cli(["run", "second question", *options], env=keyed(api), cwd=tmp_path)
    assert (first.code, second.code) == (0, 0), (first, second)
    assert b"first question" in server.requests[1].body
    transcript = trio_agent.loads(session.read_text())
    assert [type(m).__name__ for m in transcript] == [
        "UserMessage",
        "AssistantMessage",
        "UserMessage",
        "AssistantMessage",
    ]


async def test_a_provider_error_is_one_line_and_exit_1(api: Api, tmp_path: Path) -> None:
    body, _kind = api.error_body(401, "Invalid API key provided")
    refused = ScriptedResponse.error(401, body)
    async with open_sse_server(refused) as server:
        result = await cli(
            ["run", "hi", *model_options(api, server.url, key=True)], env=keyed(api), cwd=tmp_path
        )
    assert result.code == 1, result
    (line,) = result.err.splitlines()
    label = "local" if api.name == "openai_chat" else api.label  # a server on this machine
    assert line.startswith(f"error: HTTP 401 from {label}: ")
    assert "Invalid API key provided" in line
    assert line.endswith("(check the API key in the environment)")
    assert result.out == ""


async def test_a_charset_in_the_content_type_changes_nothing(tmp_path: Path) -> None:
    """SSE and JSON bodies are UTF-8 whatever charset the server names: the answer
    streams, and an error (the body of a 400) is one line, without a traceback."""
    api = APIS[0]
    body, _kind = api.error_body(400, "Ungültig ✓")
    refused = ScriptedResponse.error(400, body, content_type="application/json; charset=utf-16")
    answered = answer(api)
    answered.content_type = "text/event-stream; charset=utf-16"
    async with open_sse_server(answered, refused) as server:
        options = ["run", "hi", *model_options(api, server.url)]
        streamed = await cli(options, env=keyed(api), cwd=tmp_path)
        refusal = await cli(options, env=keyed(api), cwd=tmp_path)
    assert (streamed.code, streamed.out) == (0, api.answer + "\n"), streamed
    assert refusal.code == 1, refusal
    assert refusal.err.splitlines() == [
        "error: HTTP 400 from local: invalid_request_error: Ungültig ✓"
    ], refusal
    assert "Traceback" not in streamed.err + refusal.err


@pytest.mark.parametrize("command", [["run", "hi"], ["chat"]])
@pytest.mark.parametrize("api", [a for a in APIS if a.name != "openai_chat"], ids=lambda a: a.name)
async def test_a_missing_key_is_one_line_naming_the_variable_to_set(
    api: Api, command: list[str], tmp_path: Path
) -> None:
    """Checked before anything runs, and told in the command line's terms: the API's own
    variables are sent only to its provider's servers, so a server elsewhere (here, on
    this machine) needs ``--api-key-env``. (An OpenAI-compatible server on this machine
    needs no key: see the next test.)"""
    async with open_sse_server() as server:
        result = await cli(
            [*command, *model_options(api, server.url)],
            env=environment(),
            cwd=tmp_path,
            stdin=b"hi\n",
        )
    assert result.code == 1, result
    names = " and ".join(api.env_keys)
    verb = "is" if len(api.env_keys) == 1 else "are"
    assert result.err.splitlines() == [
        f"error: no API key for {api.label} at {server.url}: {names} {verb} sent only to "
        f"{OWN_SERVERS[api.name]}; for this server, "
        "name the variable that holds it with --api-key-env NAME"
    ]
    assert server.requests == []
    assert result.out == ""


@pytest.mark.parametrize("api", [a for a in APIS if a.name != "openai_chat"], ids=lambda a: a.name)
async def test_a_providers_own_key_is_not_sent_to_another_server(api: Api, tmp_path: Path) -> None:
    """``run --base-url`` with the provider's own variable set: the key stays here, and the
    line says why; ``--api-key-env`` sends the key named."""
    own = {name: KEY for name in api.env_keys}
    async with open_sse_server(answer(api)) as server:
        refused = await cli(
            ["run", "hi", *model_options(api, server.url)], env=environment(**own), cwd=tmp_path
        )
        assert server.requests == []
        given = await cli(
            ["run", "hi", *model_options(api, server.url), "--api-key-env", api.env_keys[0]],
            env=environment(**own),
            cwd=tmp_path,
        )
    assert refused.code == 1, refused
    (line,) = refused.err.splitlines()
    assert f"{api.env_keys[0]} " in line
    assert f"sent only to {OWN_SERVERS[api.name]}; for this server, " in line
    assert KEY not in refused.out + refused.err
    assert given.code == 0, given
    header, value = api.auth
    (request,) = server.requests
    assert request.headers[header] == value


@pytest.mark.parametrize(
    ("model", "says"),
    [
        ("openai-chat:gpt-4.1", "no API key for openai: set OPENAI_API_KEY, or"),
        (
            "openai-chat:llama --base-url https://openrouter.ai/api/v1",
            "no API key for openrouter: set OPENROUTER_API_KEY, or",
        ),
        (
            "openai-chat:llama --base-url https://models.example/v1",
            "no API key for openai-compatible: name the variable",
        ),
    ],
)
def test_a_missing_key_names_the_variable_of_the_openai_compatible_host(
    model: str, says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [n for n in os.environ if n.endswith("_API_KEY")]:
        monkeypatch.delenv(name)
    result = run_main(["run", "hi", "--model", *model.split()])
    assert result.code == 1, result
    (line,) = result.err.splitlines()
    assert line.startswith(f"error: {says}")
    assert line.endswith("--api-key-env NAME")


async def test_api_key_env_names_the_variable_that_holds_the_key(api: Api, tmp_path: Path) -> None:
    async with open_sse_server(answer(api)) as server:
        result = await cli(
            ["run", "hi", *model_options(api, server.url), "--api-key-env", "WORK_KEY"],
            env=environment(WORK_KEY=KEY),
            cwd=tmp_path,
        )
    assert result.code == 0, result
    assert result.out == api.answer + "\n"
    header, value = api.auth
    assert server.requests[0].headers[header] == value
    assert KEY not in result.out + result.err


@pytest.mark.parametrize(
    ("value", "state"), [(None, "not set"), ("", "empty")], ids=["unset", "empty"]
)
@pytest.mark.parametrize("command", [["run", "hi"], ["chat"]])
async def test_api_key_env_naming_no_key_is_one_line(
    command: list[str], value: str | None, state: str, tmp_path: Path
) -> None:
    env = environment() if value is None else environment(WORK_KEY=value)
    result = await cli(
        [
            *command,
            "--model",
            "anthropic-messages:claude-sonnet-4-5",
            "--api-key-env",
            "WORK_KEY",
        ],
        env=env,
        cwd=tmp_path,
    )
    assert result.code == 1, result
    assert result.err.splitlines() == [f"error: --api-key-env names WORK_KEY, which is {state}"]


async def test_a_local_openai_compatible_server_needs_no_key(tmp_path: Path) -> None:
    (api,) = [a for a in APIS if a.name == "openai_chat"]
    async with open_sse_server(answer(api)) as server:
        result = await cli(
            ["run", "hi", *model_options(api, server.url)], env=environment(), cwd=tmp_path
        )
    assert result.code == 0, result
    assert "authorization" not in server.requests[0].headers


async def test_a_server_that_is_not_there_is_one_line(tmp_path: Path) -> None:
    with trio.socket.socket() as sock:  # a port that nothing listens on
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = await cli(
        [
            "run",
            "hi",
            "--model",
            "openai-chat:llama3.2:3b",
            "--base-url",
            f"http://127.0.0.1:{port}/v1",
        ],
        env=environment(),
        cwd=tmp_path,
    )
    assert result.code == 1, result
    (line,) = result.err.splitlines()
    assert line.startswith("error: could not ")
    assert line.endswith("(is the server running, and is --base-url right?)")


async def test_chat_answers_each_line_and_leaves_at_the_end_of_input(
    api: Api, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text(NOTES)
    async with open_sse_server(search_call(api), answer(api)) as server:
        result = await cli(
            ["chat", *model_options(api, server.url, key=True)],
            env=keyed(api),
            cwd=tmp_path,
            stdin=b"Find ping\n/help\n/nope\n",
        )
    assert result.code == 0, result
    assert result.out == api.answer + "\n"
    assert "/follow TEXT" in result.err  # /help
    assert "unknown command '/nope'" in result.err
    assert len(server.requests) == 2


class Output:
    """What a process wrote on one of its pipes so far, and a way to wait for a text in it."""

    def __init__(self) -> None:
        self.text = ""
        self._changed = trio.Event()

    async def collect(self, stream: trio.abc.ReceiveStream) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        while data := await stream.receive_some():
            self.text += decoder.decode(data)
            self._changed.set()
            self._changed = trio.Event()

    async def expect(self, text: str, count: int = 1) -> None:
        try:
            with trio.fail_after(30):
                await self._until(lambda: self.text.count(text) >= count)
        except trio.TooSlowError:
            raise AssertionError(f"{text!r} (x{count}) never came; came:\n{self.text}") from None

    async def _until(self, condition: Callable[[], bool]) -> None:
        while not condition():
            await self._changed.wait()


async def test_chat_lines_typed_while_it_works_steer_it_and_follow_ups_come_after(
    api: Api, tmp_path: Path
) -> None:
    """A line typed while the agent streams is a steering message (the next turn's input);
    ``/follow TEXT`` is sent once the agent would stop; the end of input waits for the run."""
    body = fixture(api.name, "text.sse")
    resume = trio.Event()
    first = ScriptedResponse(body=body, stall_after=event_end(body, api.first_text), resume=resume)
    more = [ScriptedResponse(body=body, pieces=(1, 7)) for _ in range(2)]
    async with open_sse_server(first, *more) as server, trio.open_nursery() as nursery:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "trio_agent", "chat", *model_options(api, server.url, key=True)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=keyed(api),
            cwd=tmp_path,
        )
        assert process.stdin
        assert process.stdout
        assert process.stderr
        out, err = Output(), Output()
        nursery.start_soon(out.collect, process.stdout)
        nursery.start_soon(err.collect, process.stderr)
        await process.stdin.send_all(b"first question\n")
        await out.expect(api.partial)  # the first reply is streaming, and waits
        await process.stdin.send_all(b"be brief\n/follow and then this\n")
        await err.expect("(steering: be brief)")
        await err.expect("(follow-up queued, sent when this run would stop)")
        resume.set()
        await out.expect(api.text, count=3)
        await process.stdin.aclose()
        with trio.fail_after(30):
            assert await process.wait() == 0, err.text
    first_request, steered, followed = (request.body for request in server.requests)
    assert b"be brief" not in first_request
    assert steered.index(b"first question") < steered.index(b"be brief")
    assert b"and then this" not in steered
    assert followed.index(b"be brief") < followed.index(b"and then this")


# --- the command lines the docs show ------------------------------------------------------------

DOCUMENTED = [
    shlex.split(line.removeprefix("$ trio-agent ").split("  #")[0].split(" | ")[0])
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for block in re.findall(r"```console\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL)
    for line in block.splitlines()
    if line.startswith("$ trio-agent ")
]


def test_the_docs_show_command_lines() -> None:
    assert {argv[0] for argv in DOCUMENTED} == {"demo", "run", "chat", "models", "batch"}


@pytest.mark.parametrize("argv", DOCUMENTED, ids=" ".join)
def test_every_documented_command_line_is_valid_and_the_demos_run(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each ``$ trio-agent ...`` line of README.md and docs/ parses; the demo's run in full
    (in a folder of test files, and in the folder they name, made with test files too)."""
    parsed = _parser().parse_args(argv)
    if parsed.command != "demo":
        return  # run and chat need a real model: their runs are tested on loopback above
    here = project(tmp_path)  # the current folder
    monkeypatch.chdir(here)
    if parsed.folder != os.curdir:
        fill(here / parsed.folder)
    result = run_main([*argv, "--pace", "0"])
    assert result.code == 0, result
    assert result.out


def test_a_transcript_that_cannot_be_saved_is_one_line_and_exit_1(tmp_path: Path) -> None:
    target = tmp_path / "no such folder" / "demo.json"
    result = run_main(["demo", str(project(tmp_path)), "--pace", "0", "--save", str(target)])
    assert result.code == 1, result
    assert result.err.splitlines()[-1] == (
        f"error: cannot save the transcript to {str(target)!r}: No such file or directory"
    )
    assert "Traceback" not in result.err
    assert result.out  # the run itself was whole


def chat_tool_call(name: str, arguments: dict[str, Any]) -> ScriptedResponse:
    """An OpenAI chat reply that calls tool ``name`` with ``arguments``."""
    call = {"index": 0, "id": "call_1", "type": "function"}
    call["function"] = {"name": name, "arguments": json.dumps(arguments)}
    chunks = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [call]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]
    return ScriptedResponse(body=sse_body([(None, chunk) for chunk in chunks], done=True))


async def test_a_file_name_that_is_not_utf8_reaches_the_model_and_the_saved_session(
    tmp_path: Path,
) -> None:
    # On Linux a name is bytes: this one is Latin-1, not UTF-8. The model lists it,
    # reads it by the name it was shown, and the session is saved.
    root = tmp_path / "root"
    root.mkdir()
    fd = os.open(os.path.join(os.fsencode(root), b"caf\xe9.txt"), os.O_WRONLY | os.O_CREAT)
    os.write(fd, b"the menu\n")
    os.close(fd)
    (api,) = [api for api in APIS if api.name == "openai_chat"]
    session = tmp_path / "session.json"
    replies = [
        chat_tool_call("list_files", {}),
        chat_tool_call("read_file", {"path": "caf\\xe9.txt"}),
        answer(api),
    ]
    async with open_sse_server(*replies) as server:
        argv = ["run", "Read it", *model_options(api, server.url), "--root", str(root)]
        result = await cli([*argv, "--session", str(session)], env=keyed(api), cwd=tmp_path)
    assert result.code == 0, result
    assert "Traceback" not in result.err
    assert len(server.requests) == 3
    assert '"content":"caf\\\\xe9.txt"' in server.requests[1].body.decode()  # as listed
    assert b"the menu" in server.requests[2].body  # read by that name
    transcript = trio_agent.loads(session.read_text(encoding="utf-8"))
    results = [m for m in transcript if isinstance(m, ToolResultMessage)]
    assert [(m.content[0].text, m.is_error) for m in results] == [  # type: ignore[union-attr]
        ("caf\\xe9.txt", False),
        ("the menu", False),
    ]
    assert sorted(os.listdir(tmp_path)) == ["root", "session.json"]  # no .tmp


async def test_a_save_that_fails_midway_keeps_the_previous_file_and_leaves_no_other(
    tmp_path: Path,
) -> None:
    # The process may write files of 2,000 bytes at most: the transcript is larger, so
    # writing it fails after the new file was made (EFBIG, "File too large").
    saved = tmp_path / "demo.json"
    saved.write_text("[]\n")
    code = (
        "import resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))\n"
        "from trio_agent._cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    folder = project(tmp_path)
    with trio.fail_after(60):
        done = await trio.run_process(
            [sys.executable, "-c", code, "demo", str(folder), "--pace", "0", "--save", str(saved)],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd=tmp_path,
        )
    err = done.stderr.decode()
    assert done.returncode == 1, err
    assert err.splitlines()[-1] == (
        f"error: cannot save the transcript to {str(saved)!r}: File too large"
    )
    assert "Traceback" not in err
    assert saved.read_text() == "[]\n"  # the previous file, whole
    assert sorted(os.listdir(tmp_path)) == ["demo.json", "project"]


async def test_a_transcript_that_cannot_be_written_keeps_the_previous_file(
    tmp_path: Path,
) -> None:
    saved = tmp_path / "session.json"
    saved.write_text("[]\n")
    odd = ToolResultMessage(tool_call_id="c", tool_name="t", content=[], details={"at": {1}})
    with pytest.raises(SessionError) as info:
        await _save(saved, [odd])
    assert str(info.value) == (
        f"cannot save the transcript to {str(saved)!r}: Object of type set is not JSON serializable"
    )
    assert saved.read_text() == "[]\n"
    assert os.listdir(tmp_path) == ["session.json"]


async def test_chat_tells_a_failed_save_and_goes_on(tmp_path: Path) -> None:
    result = await cli(
        ["chat", "--model", "openai-chat:x", "--base-url", "http://127.0.0.1:9/v1"],
        env=environment(),
        cwd=tmp_path,
        stdin=b"/save missing/chat.json\n/save chat.json\n/save\n",
    )
    assert result.code == 0, result
    lines = result.err.splitlines()
    assert lines == [
        "error: cannot save the transcript to 'missing/chat.json': No such file or directory",
        "  saved 0 messages to chat.json",
        "  /save needs an argument: /save FILE",
    ]
    assert trio_agent.loads((tmp_path / "chat.json").read_text()) == []


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ('[{"role": "robot"}]', "invalid transcript: unknown message role 'robot'"),
        ("[{", "not valid JSON"),
        (None, "Is a directory"),
    ],
)
def test_a_session_that_does_not_load_is_one_line_and_exit_1(
    tmp_path: Path, content: str | None, reason: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    session = tmp_path / "session.json"
    if content is None:
        session.mkdir()
    else:
        session.write_text(content)
    result = run_main(["run", "hi", "--model", "openai:gpt-4.1", "--session", str(session)])
    assert result.code == 1, result
    (line,) = result.err.splitlines()
    assert line.startswith(f"error: cannot resume {str(session)!r}: {reason}")


# --- exit codes: chat after an error, a reader that leaves -----------------------------------


@pytest.mark.parametrize(
    ("then", "code"),
    [
        ([], 1),
        ([b"/quit\n"], 1),
        ([b"again\n"], 0),  # the last run went well
    ],
    ids=["end-of-input", "quit", "then-an-answer"],
)
async def test_chat_exits_1_when_its_last_run_ended_with_an_error(
    then: list[bytes], code: int, tmp_path: Path
) -> None:
    (api,) = [a for a in APIS if a.name == "openai_chat"]
    body, _kind = api.error_body(400, "The request was refused")
    refused = ScriptedResponse.error(400, body)  # not retried
    async with open_sse_server(refused, answer(api)) as server, trio.open_nursery() as nursery:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "trio_agent", "chat", *model_options(api, server.url)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=environment(),
            cwd=tmp_path,
        )
        assert process.stdin
        assert process.stdout
        assert process.stderr
        out, err = Output(), Output()
        nursery.start_soon(out.collect, process.stdout)
        nursery.start_soon(err.collect, process.stderr)
        await process.stdin.send_all(b"hi\n")
        await err.expect("error: HTTP 400 from local: ")
        for line in then:
            await process.stdin.send_all(line)
            if line == b"again\n":
                await out.expect(api.answer)
        await process.stdin.aclose()
        with trio.fail_after(30):
            assert await process.wait() == code, err.text


def run_with_stdout_closed(
    argv: list[str], cwd: Path, env: dict[str, str], stdin: bytes = b""
) -> tuple[int, str]:
    """Run the command line with a stdout whose reader has already left (as ``| head``
    leaves early): its exit code and stderr."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # closed before the process writes a byte: its first write breaks
    try:
        done = subprocess.run(
            [sys.executable, "-m", "trio_agent", *argv],
            input=stdin,
            stdout=write_end,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            timeout=60,
        )
    finally:
        os.close(write_end)
    return done.returncode, done.stderr.decode("utf-8", "replace")


@pytest.mark.parametrize("mode", [[], ["--json"]], ids=["text", "json"])
def test_a_reader_that_leaves_ends_the_demo_quietly_with_0(mode: list[str], tmp_path: Path) -> None:
    saved = tmp_path / "demo.json"
    code, err = run_with_stdout_closed(
        ["demo", str(project(tmp_path)), "--pace", "0", "--save", str(saved), *mode],
        cwd=tmp_path,
        env=environment(),
    )
    assert code == 0, err
    for noise in ("error", "Error", "Exception", "Traceback", "aborted"):
        assert noise not in err
    transcript = trio_agent.loads(saved.read_text())  # saved all the same, and whole
    check_transcript(transcript)
    last = transcript[-1]
    assert isinstance(last, AssistantMessage)
    assert last.stop_reason == "aborted"  # the run stopped when the reader left


@pytest.mark.parametrize(
    "argv",
    [["run", "hi"], ["run", "hi", "--json"], ["chat"]],
    ids=["run", "run-json", "chat"],
)
async def test_a_reader_that_leaves_ends_run_and_chat_quietly_with_0(
    argv: list[str], tmp_path: Path
) -> None:
    (api,) = [a for a in APIS if a.name == "openai_chat"]
    async with open_sse_server(answer(api)) as server:
        code, err = await trio.to_thread.run_sync(
            lambda: run_with_stdout_closed(
                [*argv, *model_options(api, server.url)],
                cwd=tmp_path,
                env=environment(),
                stdin=b"hi\n",
            )
        )
    assert code == 0, err
    for noise in ("error", "Error", "Exception", "Traceback", "aborted"):
        assert noise not in err


# --- the model catalog, and what a run cost ------------------------------------------------------


def test_models_lists_the_catalog_one_model_a_line_starting_with_what_model_takes() -> None:
    result = run_main(["models", "--provider", "groq"])
    assert result.code == 0, result
    lines = result.out.splitlines()
    assert len(lines) == 7
    assert lines[1] == (
        "openai-chat:llama-3.3-70b-versatile  groq  context 131,072, output 32,768  "
        "$0.59 in / $0.79 out per M tokens  text"
    )
    assert result.err == ""


def test_models_in_json_is_one_object_a_line() -> None:
    result = run_main(["models", "--api", "anthropic", "--provider", "anthropic", "--json"])
    assert result.code == 0, result
    models = [json.loads(line) for line in result.out.splitlines()]
    assert len(models) == 18
    (sonnet,) = [m for m in models if m["id"] == "claude-sonnet-4-5"]
    assert sonnet["cost"] == {"input": 3.0, "output": 15.0, "cacheRead": 0.3, "cacheWrite": 3.75}
    assert (sonnet["api"], sonnet["baseUrl"]) == ("anthropic-messages", "https://api.anthropic.com")


def test_models_lists_every_model_without_a_filter() -> None:
    assert len(run_main(["models"]).out.splitlines()) == len(catalog.list())


def test_model_takes_what_the_catalog_knows_and_thinking_makes_a_reasoning_model() -> None:
    sonnet = parse_model("anthropic:claude-sonnet-4-5", None, "off")
    assert (sonnet.cost.output, sonnet.max_tokens, sonnet.reasoning) == (15.0, 64_000, True)
    unknown = parse_model("openai-chat:my-model", "http://localhost:8000/v1", "high")
    assert (unknown.reasoning, unknown.cost, unknown.provider) == (True, ModelCost(), "vllm")


async def test_run_tells_the_tokens_it_used_on_stderr(api: Api, tmp_path: Path) -> None:
    async with open_sse_server(answer(api)) as server:
        result = await cli(
            ["run", "hi", *model_options(api, server.url, key=True)], env=keyed(api), cwd=tmp_path
        )
    assert result.code == 0, result
    last = result.err.splitlines()[-1]
    # a server on loopback is not the one the catalog prices: no money, only tokens
    assert re.fullmatch(
        r"  used [\d,]+ tokens in, [\d,]+ out( \(.*\))?; no prices known for .+", last
    )
    assert result.out == api.answer + "\n"


async def test_run_in_json_prints_no_usage_line(tmp_path: Path) -> None:
    (api,) = [a for a in APIS if a.name == "anthropic"]
    async with open_sse_server(answer(api)) as server:
        argv = ["run", "hi", *model_options(api, server.url, key=True), "--json"]
        result = await cli(argv, env=keyed(api), cwd=tmp_path)
    assert result.code == 0, result
    assert "used " not in result.err


async def test_chat_tells_the_tokens_each_run_used(tmp_path: Path) -> None:
    (api,) = [a for a in APIS if a.name == "google"]
    async with open_sse_server(answer(api), answer(api)) as server, trio.open_nursery() as nursery:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "trio_agent", "chat", *model_options(api, server.url, key=True)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=keyed(api),
            cwd=tmp_path,
        )
        assert process.stdin
        assert process.stdout
        assert process.stderr
        out, err = Output(), Output()
        nursery.start_soon(out.collect, process.stdout)
        nursery.start_soon(err.collect, process.stderr)
        await process.stdin.send_all(b"one\n")
        await err.expect("  used ")
        await process.stdin.send_all(b"two\n")
        await err.expect("  used ", count=2)
        await process.stdin.aclose()
        with trio.fail_after(30):
            assert await process.wait() == 0, err.text
    assert out.text == (api.answer + "\n") * 2
    used = [line for line in err.text.splitlines() if line.startswith("  used ")]
    assert used[0] == used[1]
    assert used[0].endswith(f"; no prices known for {MODEL_IDS[api.name]} at {server.url}/v1beta")


# --- --provider ---------------------------------------------------------------------------------


def test_provider_picks_the_catalog_providers_model_url_and_prices() -> None:
    # The same id at two providers: the one named is used, at its URL and prices.
    groq = parse_model("openai-chat:llama-3.3-70b-versatile", None, "off", "groq")
    assert (groq.provider, groq.base_url, groq.cost.input, groq.cost.output) == (
        "groq",
        "https://api.groq.com/openai/v1",
        0.59,
        0.79,
    )
    m3 = parse_model("anthropic:MiniMax-M3", None, "off", "minimax")
    assert (m3.provider, m3.base_url, m3.reasoning) == (
        "minimax",
        catalog.find("minimax", "MiniMax-M3").base_url,  # type: ignore[union-attr]  # a known model
        True,
    )


def test_a_model_the_provider_does_not_list_is_a_usage_error_with_the_nearest_ids() -> None:
    with pytest.raises(UsageError) as caught:
        parse_model("openai-chat:llama-3.3-70b", None, "off", "groq")
    assert str(caught.value) == (
        "--model 'openai-chat:llama-3.3-70b': groq serves no model 'llama-3.3-70b' over "
        "openai-chat in the model catalog (@earendil-works/pi-ai@1.6.0); nearest known: "
        "llama-3.3-70b-versatile, llama-3.1-8b-instant. For a model the catalog does not "
        "list, give --base-url"
    )
    # the API's own provider, without --provider; a model 1.6.0 dropped
    result = run_main(["run", "hi", "--model", "anthropic:claude-3-opus"])
    assert result.code == 2, result
    assert result.err.splitlines()[-1] == (
        "trio-agent run: error: --model 'anthropic:claude-3-opus': anthropic serves no model "
        "'claude-3-opus' over anthropic-messages in the model catalog "
        "(@earendil-works/pi-ai@1.6.0); nearest known: claude-opus-5, claude-opus-5-5, "
        "claude-opus-4-8, claude-opus-4-7, claude-opus-4-6. For a model the catalog does not "
        "list, give --base-url"
    )
    # another server: the model is described by the maker's defaults
    other = parse_model("openai-chat:new-model", "http://localhost:8000/v1", "off", "groq")
    assert (other.provider, other.base_url, other.cost) == (
        "groq",
        "http://localhost:8000/v1",
        ModelCost(),
    )


def test_provider_without_its_key_names_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MINIMAX_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "not-minimaxs")
    result = run_main(["run", "hi", "--model", "anthropic:MiniMax-M3", "--provider", "minimax"])
    assert result.code == 1, result
    assert result.err.splitlines() == [
        "error: no API key for minimax: set MINIMAX_API_KEY, "
        "or name the variable that holds it with --api-key-env NAME"
    ]


async def test_provider_reads_the_key_of_its_variable(tmp_path: Path) -> None:
    # MiniMax's models speak the Anthropic API, whose provider reads ANTHROPIC_API_KEY:
    # --provider minimax reads MINIMAX_API_KEY instead, sent only to MiniMax's server
    # (tests/test_providers.py sees it sent there), so not to this one.
    (api,) = [a for a in APIS if a.name == "anthropic"]
    async with open_sse_server(answer(api)) as server:
        result = await cli(
            [
                "run",
                "hi",
                "--model",
                "anthropic-messages:MiniMax-M3",
                "--provider",
                "minimax",
                "--base-url",
                server.url,
            ],
            env=environment(MINIMAX_API_KEY=KEY, ANTHROPIC_API_KEY="not-minimaxs"),
            cwd=tmp_path,
        )
    assert result.code == 1, result
    assert result.err.splitlines() == [
        f"error: no API key for minimax at {server.url}: MINIMAX_API_KEY is sent only to "
        "https://api.minimax.io; for this server, "
        "name the variable that holds it with --api-key-env NAME"
    ]
    assert server.requests == []


def test_models_in_json_shows_the_tiered_prices() -> None:
    result = run_main(["models", "--provider", "openai", "--json"])
    assert result.code == 0, result
    (gpt,) = [m for m in map(json.loads, result.out.splitlines()) if m["id"] == "gpt-5.5"]
    assert gpt["cost"]["tiers"] == [
        {"inputTokensAbove": 272_000, "input": 10, "output": 45, "cacheRead": 1, "cacheWrite": 0}
    ]
    groq = run_main(["models", "--provider", "groq", "--json"]).out.splitlines()
    assert not any("tiers" in json.loads(line)["cost"] for line in groq)


# --- budgets ------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["run", "hi"], ["chat"]])
def test_the_budget_flags_make_the_budget_of_each_run(command: list[str]) -> None:
    args = _parser().parse_args(
        [
            *command,
            "--max-cost",
            "0.25",
            "--max-turns",
            "7",
            "--max-input-tokens",
            "1000",
            "--max-output-tokens",
            "200",
            "--max-tool-calls",
            "0",
        ]
    )
    assert _budget(args) == Budget(
        cost=0.25, turns=7, input_tokens=1000, output_tokens=200, tool_calls=0
    )
    assert _budget(_parser().parse_args(command)) is None


async def test_run_stops_at_its_turn_budget_with_a_line_and_exit_3(tmp_path: Path) -> None:
    (api,) = [a for a in APIS if a.name == "openai_chat"]
    (tmp_path / "notes.txt").write_text(NOTES)
    session = tmp_path / "session.json"
    async with open_sse_server(search_call(api), answer(api)) as server:
        argv = ["run", "Find ping", *model_options(api, server.url, key=True)]
        argv += ["--max-turns", "1", "--session", str(session)]
        result = await cli(argv, env=keyed(api), cwd=tmp_path)
    assert result.code == 3, result
    assert len(server.requests) == 1
    assert "budget reached: turns budget of 1 reached (used 1)" in result.err.splitlines()
    transcript = trio_agent.loads(session.read_text())
    check_transcript(transcript)  # the tool call that was asked for has its result
    assert isinstance(transcript[-1], ToolResultMessage)


async def test_run_answers_calls_past_its_tool_call_budget_without_running_them(
    tmp_path: Path,
) -> None:
    (api,) = [a for a in APIS if a.name == "openai_chat"]
    (tmp_path / "notes.txt").write_text(NOTES)
    session = tmp_path / "session.json"
    async with open_sse_server(search_call(api), answer(api)) as server:
        argv = ["run", "Find ping", *model_options(api, server.url, key=True)]
        argv += ["--max-tool-calls", "0", "--session", str(session)]
        result = await cli(argv, env=keyed(api), cwd=tmp_path)
    assert result.code == 3, result
    assert len(server.requests) == 1
    assert "budget reached: tool-call budget of 0 reached (used 1)" in result.err.splitlines()
    (refused,) = [m for m in trio_agent.loads(session.read_text()) if m.role == "toolResult"]
    assert refused.is_error
    assert refused.content[0].text == "tool-call budget of 0 reached"


async def test_chat_tells_a_run_that_reaches_its_budget_and_is_not_an_error(
    tmp_path: Path,
) -> None:
    (api,) = [a for a in APIS if a.name == "openai_chat"]
    (tmp_path / "notes.txt").write_text(NOTES)
    async with open_sse_server(search_call(api), answer(api)) as server:
        result = await cli(
            ["chat", *model_options(api, server.url, key=True), "--max-turns", "1"],
            env=keyed(api),
            cwd=tmp_path,
            stdin=b"Find ping\n",
        )
    assert result.code == 0, result  # a budget is not an error
    assert len(server.requests) == 1
    assert "  budget reached: turns budget of 1 reached (used 1)" in result.err.splitlines()


# -- the conversation's prompt cache ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("flag", "marks"),
    [
        ((), [{"type": "ephemeral"}]),
        (("--cache-retention", "long"), [{"type": "ephemeral", "ttl": "1h"}]),
        (("--cache-retention", "none"), []),
    ],
)
async def test_cache_retention_sets_the_breakpoints_of_every_request(
    tmp_path: Path, flag: tuple[str, ...], marks: list[dict[str, str]]
) -> None:
    """Each request of a command marks its cache breakpoints with the retention asked
    for (short by default), and ``none`` asks for no caching at all."""
    (tmp_path / "notes.txt").write_text(NOTES)
    api = next(api for api in APIS if api.name == "anthropic")
    async with open_sse_server(search_call(api), answer(api)) as server:
        argv = ["run", "Find ping", *model_options(api, server.url, key=True), *flag]
        result = await cli(argv, env=keyed(api), cwd=tmp_path)
    assert result.code == 0, result
    assert len(server.requests) == 2
    for request in server.requests:
        sent = _marks(json.loads(request.body))
        assert sent == ([] if not marks else sent[:1] * len(sent))
        assert {json.dumps(mark, sort_keys=True) for mark in sent} == {
            json.dumps(mark, sort_keys=True) for mark in marks
        }


def _marks(value: Any) -> list[Any]:
    """Every ``cache_control`` of a request body, in order."""
    if isinstance(value, dict):
        found = [value["cache_control"]] if "cache_control" in value else []
        for item in value.values():
            found += _marks(item)
        return found
    if isinstance(value, list):
        return [mark for item in value for mark in _marks(item)]
    return []


async def test_a_command_names_its_conversation_for_the_prompt_cache(tmp_path: Path) -> None:
    """Every request of one command carries the same cache key, another command another."""
    (tmp_path / "notes.txt").write_text(NOTES)
    api = next(api for api in APIS if api.name == "openai_responses")
    async with open_sse_server(search_call(api), answer(api), answer(api)) as server:
        options = ["run", "Find ping", *model_options(api, server.url, key=True)]
        first = await cli(options, env=keyed(api), cwd=tmp_path)
        second = await cli(options, env=keyed(api), cwd=tmp_path)
    assert (first.code, second.code) == (0, 0), (first, second)
    keys = [json.loads(request.body)["prompt_cache_key"] for request in server.requests]
    assert all(re.fullmatch("[0-9a-f]{32}", key) for key in keys), keys
    assert keys[0] == keys[1] != keys[2]
