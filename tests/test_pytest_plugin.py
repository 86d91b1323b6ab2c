"""The pytest plugin (trio_agent.testing.pytest_plugin), driven through pytester.

Each test writes a small test module that uses the plugin's fixtures, runs
pytest on it with the plugin and pytest-trio, and checks the outcome: what
passed, and how a failure reads.
"""

from __future__ import annotations

from pathlib import Path

# Imported here, before any in-process run: pytester removes the modules a run
# imported when it ends. httpx2 imports httpcore2 at its first request and keeps
# a table of httpcore2's exception classes; were that first request made in a
# run here, the table would hold a removed copy's classes, and the later
# provider tests would get httpcore2's exceptions unmapped.
import httpcore2  # noqa: F401  (imported for that, as said above)
import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
PLUGIN_ARGS = ("-p", "trio_agent.testing.pytest_plugin")
# pytest-trio is loaded by its entry point ("trio"). In-process, "-p trio" would also ask
# pytest to rewrite the already imported trio package, a warning (an error here); the
# subprocess test below names it, with entry points off.
# A strict user project: unknown markers and warnings are errors.
INI = """
[pytest]
trio_mode = true
addopts = --strict-markers
filterwarnings = error
"""

SCRIPTED = """
import pytest
import trio

from trio_agent import TextContent, tool
from trio_agent.providers import openai_chat
from trio_agent.testing import reply, scripted_model as make_model, tool_call


@tool
async def echo(text: str) -> str:
    \"\"\"Say it back.\"\"\"
    return text


async def test_the_agent_plays_the_script(agent, scripted_model, event_recorder):
    scripted_model.add(reply("Hello"))
    await agent.prompt("hi")
    assert agent.state.messages[-1].text == "Hello"
    assert (event_recorder.types[0], event_recorder.types[-1]) == ("agent_start", "agent_end")
    assert scripted_model.calls[0].context.messages[0].content == (TextContent("hi"),)


async def test_make_agent_takes_the_script_and_tools(make_agent, scripted_model, event_recorder):
    agent = make_agent([reply(tool_call("echo", {"text": "hi"})), "done"], tools=[echo])
    await agent.prompt("go")
    assert event_recorder.tool_order("end") == ["faux_0_0"]
    assert scripted_model.calls[1].context.messages[-1].content == (TextContent("hi"),)
    assert agent.state.messages[-1].text == "done"


def test_the_fixtures_are_shared_within_a_test(agent, make_agent, scripted_model, event_recorder):
    second = make_agent(system_prompt="be brief")
    assert make_agent.agents == [agent, second]
    assert agent.state.model is second.state.model is scripted_model
    assert second.state.system_prompt == "be brief"
    assert make_agent.recorder is event_recorder


def test_make_agent_on_another_model(make_agent):
    own = make_model(["mine"])
    assert make_agent(["more"], model=own).state.model is own
    assert own.remaining == 2


def test_make_agent_refuses_a_single_reply_and_a_script_for_a_real_model(make_agent):
    with pytest.raises(TypeError, match="an iterable of replies"):
        make_agent(reply("x"))
    real = openai_chat.model("gpt-4.1", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(TypeError, match="plays the script on a scripted model"):
        make_agent(["x"], model=real)


def test_a_sync_test_runs_the_agent_itself(agent, scripted_model):
    scripted_model.add("sync")
    trio.run(agent.prompt, "hi")
    assert agent.state.messages[-1].text == "sync"


async def test_autojump_clock_makes_delays_free(agent, scripted_model, autojump_clock):
    scripted_model.add(reply("late", start_delay=3600))
    start = trio.current_time()
    await agent.prompt("hi")
    assert trio.current_time() - start == 3600
    assert agent.state.messages[-1].text == "late"


async def test_the_recorder_acts_at_an_event(agent, scripted_model, event_recorder):
    scripted_model.add(reply("a long answer", chunk_size=2))
    deltas = []

    async def abort_at_the_second_delta(event):
        if event.type == "message_update" and event.assistant_message_event.type == "text_delta":
            deltas.append(event)
            if len(deltas) == 2:
                agent.abort()

    event_recorder.on_event = abort_at_the_second_delta
    await agent.prompt("hi")
    last = agent.state.messages[-1]
    assert (last.stop_reason, last.text) == ("aborted", "a lo")


async def test_a_run_cancelled_from_outside_passes_the_checks(
    agent, scripted_model, autojump_clock
):
    scripted_model.add(reply(tool_call("echo", {"text": "x"}), start_delay=10))
    with trio.move_on_after(1):
        await agent.prompt("hi")
    assert not agent.state.is_streaming
    agent.set_tools([echo])
    scripted_model.add("next")
    await agent.prompt("again")
    assert agent.state.messages[-1].text == "next"
"""

SERVER = """
import pytest
import trio

from trio_agent import Timeouts
from trio_agent.providers import openai_chat
from trio_agent.testing import ScriptedResponse, sse_body


def chunk(delta, finish=None):
    return {
        "id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4.1",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


BODY = sse_body(
    [
        (None, chunk({"role": "assistant", "content": ""})),
        (None, chunk({"content": "Hello"})),
        (None, chunk({"content": " world"})),
        (None, chunk({}, "stop")),
    ],
    done=True,
)
AFTER_HELLO = BODY.index(b"\\n\\n", BODY.index(b'"Hello"')) + 2


@pytest.fixture
def openai_agent(make_agent, sse_server):
    model = openai_chat.model("gpt-4.1", base_url=sse_server.url + "/v1", provider="openai")
    return make_agent(
        model=model, api_key="test-key", timeouts=Timeouts(first_byte=10, idle=30)
    )


async def test_a_body_in_random_pieces(openai_agent, sse_server):
    sse_server.add(ScriptedResponse(body=BODY, pieces=(1, 3)))
    await openai_agent.prompt("hi")
    assert openai_agent.state.messages[-1].text == "Hello world"
    (request,) = sse_server.requests
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.headers["authorization"] == "Bearer test-key"
    assert request.json["messages"][-1]["content"] == [{"type": "text", "text": "hi"}]


async def test_a_dropped_connection(openai_agent, sse_server, autojump_clock):
    sse_server.add(ScriptedResponse(body=BODY, pieces=(1, 7), drop_after=AFTER_HELLO + 5))
    await openai_agent.prompt("hi")
    last = openai_agent.state.messages[-1]
    assert (last.stop_reason, last.text) == ("error", "Hello")
    assert last.error_message.startswith("connection to openai lost")


async def test_a_stall_reaches_the_idle_timeout(openai_agent, sse_server, autojump_clock):
    sse_server.add(ScriptedResponse(body=BODY, stall_after=AFTER_HELLO))
    start = trio.current_time()
    await openai_agent.prompt("hi")
    assert trio.current_time() - start == pytest.approx(30, abs=0.5)
    assert openai_agent.state.error_message == "openai sent nothing for 30 s (idle timeout)"
    with trio.fail_after(5):
        await sse_server.wait_closed_by_client()


async def test_no_head_is_retried(openai_agent, sse_server, autojump_clock):
    sse_server.add(ScriptedResponse(stall_before_head=True), ScriptedResponse(body=BODY))
    start = trio.current_time()
    await openai_agent.prompt("hi")
    assert trio.current_time() - start == pytest.approx(10, abs=2)
    assert openai_agent.state.messages[-1].text == "Hello world"
    assert (len(sse_server.requests), sse_server.connections) == (2, 2)


@pytest.mark.parametrize(
    ("retry", "waited"), [({"retry_after": 7}, 7), ({"retry_after_ms": 1500}, 1.5)]
)
async def test_429_is_retried_when_the_server_says(
    openai_agent, sse_server, autojump_clock, retry, waited
):
    limited = ScriptedResponse.error(
        429, {"error": {"message": "Rate limit", "type": "rate_limit"}}, **retry
    )
    sse_server.add(limited, ScriptedResponse(body=BODY))
    start = trio.current_time()
    await openai_agent.prompt("hi")
    assert trio.current_time() - start == pytest.approx(waited, abs=0.2)
    assert openai_agent.state.messages[-1].text == "Hello world"
    assert len(sse_server.requests) == 2


async def test_a_malformed_event(openai_agent, sse_server):
    sse_server.add(ScriptedResponse(body=BODY, pieces=(1, 5), malformed_after=AFTER_HELLO - 1))
    await openai_agent.prompt("hi")
    last = openai_agent.state.messages[-1]
    assert (last.stop_reason, last.text) == ("error", "Hello")
    assert last.error_message.startswith("malformed JSON in a chunk from openai")


async def test_an_empty_script_answers_500(openai_agent, sse_server, autojump_clock):
    await openai_agent.prompt("hi")
    assert openai_agent.state.error_message == "HTTP 500 from openai: no scripted response"
    assert len(sse_server.requests) == 3  # retried twice
"""

FAILING = """
import pytest

from trio_agent import AssistantMessage, ToolCall, UserMessage
from trio_agent.testing import check_event_grammar

BROKEN = [
    UserMessage.text("hi"),
    AssistantMessage(content=(ToolCall("call_1", "echo", {}),), stop_reason="toolUse"),
]


async def test_a_failing_check(agent, scripted_model, event_recorder):
    scripted_model.add("Hello")
    await agent.prompt("hi")
    agent.replace_messages(BROKEN)  # not checked again: the test fails first
    check_event_grammar(event_recorder.events[1:])


def test_a_broken_transcript(agent):
    agent.replace_messages(BROKEN)


@pytest.mark.no_agent_checks
def test_a_broken_transcript_on_purpose(agent):
    agent.replace_messages(BROKEN)
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini(INI)
    return pytester


def test_the_scripted_fixtures(project: pytest.Pytester) -> None:
    project.makepyfile(SCRIPTED)
    result = project.runpytest(*PLUGIN_ARGS)
    result.assert_outcomes(passed=9)


def test_the_sse_server_fixture_with_a_real_provider_and_faults(project: pytest.Pytester) -> None:
    project.makepyfile(SERVER)
    result = project.runpytest(*PLUGIN_ARGS)
    result.assert_outcomes(passed=8)


def test_failures_read_well_and_the_agents_are_checked_at_teardown(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(FAILING)
    result = project.runpytest(*PLUGIN_ARGS)
    result.assert_outcomes(passed=2, failed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_a_broken_transcript*",
            "trio_agent checks at teardown: agent #1 (model 'faux'), transcript: "
            "message #1 calls ['call_1'], but the messages after it answer []",
            "  around it: user assistant[toolUse](call_1)",
            "(@pytest.mark.no_agent_checks turns these checks off)",
            "*_ test_a_failing_check _*",
            "*AssertionError: event #0 (turn_start): the first event must be agent_start",
            "FAILED *test_a_failing_check*",
            "ERROR *test_a_broken_transcript*",
        ]
    )
    result.stdout.no_fnmatch_line("*During handling*")


def test_the_plugin_is_opt_in(project: pytest.Pytester) -> None:
    project.makepyfile("def test_it(agent):\n    pass\n")
    result = project.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'agent' not found*"])


def test_a_conftest_enables_it_with_nothing_else_than_pytest_trio(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    project.makeconftest('pytest_plugins = ["trio_agent.testing.pytest_plugin"]\n')
    project.makepyfile(
        """
        async def test_it(agent, scripted_model, sse_server, autojump_clock):
            scripted_model.add("ok")
            await agent.prompt("hi")
            assert agent.state.messages[-1].text == "ok"
            assert sse_server.url.startswith("http://127.0.0.1:")
        """
    )
    result = project.runpytest_subprocess("-p", "trio")
    result.assert_outcomes(passed=1)
