"""An example test file for an application's agent and tools, to copy and adapt.

Run it with pytest-trio and the kit's plugin, for instance with this in
``conftest.py``::

    pytest_plugins = ["trio_agent.testing.pytest_plugin"]

and ``trio_mode = true`` in the pytest configuration.
"""

import trio

from trio_agent import Agent, ToolResult, tool
from trio_agent.providers import openai_chat
from trio_agent.testing import (
    ScriptedResponse,
    Trial,
    assert_cancel_safe,
    check_transcript,
    reply,
    scripted_model,
    sse_body,
    tool_call,
)

# --- the application's tool --------------------------------------------------------------------


@tool
async def lookup(order_id: str) -> str:
    """Look an order up in the shop's database."""
    await trio.sleep(0.3)  # the database, on virtual time in tests
    return f"order {order_id}: shipped"


# --- the agent on a scripted model -------------------------------------------------------------


async def test_the_tool_result_reaches_the_model(
    make_agent, scripted_model, event_recorder, autojump_clock
):
    agent = make_agent(
        [reply(tool_call("lookup", {"order_id": "A17"})), "Your order has shipped."],
        tools=[lookup],
    )
    await agent.prompt("Where is order A17?")

    assert agent.state.messages[-1].text == "Your order has shipped."
    second_call = scripted_model.calls[1]
    assert second_call.context.messages[-1].content[0].text == "order A17: shipped"
    assert event_recorder.tool_order("end") == event_recorder.tool_order("start")


async def test_an_abort_during_the_tool_answers_every_call(make_agent, autojump_clock):
    calls = [tool_call("lookup", {"order_id": f"A{i}"}) for i in range(3)]
    agent = make_agent([reply(*calls)], tools=[lookup])

    async with trio.open_nursery() as nursery:
        nursery.start_soon(agent.prompt, "Look up three orders.")
        await trio.sleep(0.1)  # virtual: the three lookups are running
        agent.abort()

    results = [m for m in agent.state.messages if m.role == "toolResult"]
    assert [r.content[0].text for r in results] == ["Operation aborted"] * 3
    check_transcript(agent.state.messages)


# --- every cancellation point ------------------------------------------------------------------


async def test_the_tool_is_cancel_safe(autojump_clock):
    async def scenario(trial: Trial):
        model = scripted_model([reply(tool_call("lookup", {"order_id": "B2"})), "Shipped."])
        agent = trial.watch(Agent(model, tools=[lookup]))
        await agent.prompt("Where is B2?")

    report = await assert_cancel_safe(scenario)
    assert report.points > 0


# --- a real provider against a misbehaving server ----------------------------------------------


def chat_chunks(*texts):
    """An OpenAI chat-completions stream that says ``texts``, then stops."""
    chunks = [{"choices": [{"index": 0, "delta": {"content": text}}]} for text in texts]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return sse_body([(None, chunk) for chunk in chunks], done=True)


async def test_a_rate_limit_is_waited_out(make_agent, sse_server, autojump_clock):
    sse_server.add(
        ScriptedResponse.error(429, {"error": {"message": "Slow down"}}, retry_after=7),
        ScriptedResponse(body=chat_chunks("Hello", " there"), pieces=(1, 5)),
    )
    model = openai_chat.model("gpt-4.1", base_url=sse_server.url + "/v1")
    agent = make_agent(model=model, api_key="test-key")

    start = trio.current_time()
    await agent.prompt("Hi")

    assert agent.state.messages[-1].text == "Hello there"
    assert trio.current_time() - start >= 7  # it waited as the server asked
    assert len(sse_server.requests) == 2


async def test_a_dropped_connection_keeps_what_arrived(make_agent, sse_server, autojump_clock):
    body = chat_chunks("Partial", " answer", " lost")
    sse_server.add(ScriptedResponse(body=body, drop_after=body.index(b"lost") - 20))
    model = openai_chat.model("gpt-4.1", base_url=sse_server.url + "/v1")
    agent = make_agent(model=model, api_key="test-key")

    await agent.prompt("Hi")

    reply_message = agent.state.messages[-1]
    assert reply_message.stop_reason == "error"
    assert reply_message.error_message.startswith("connection to local lost")  # 127.0.0.1
    assert reply_message.text == "Partial answer"


def test_tools_are_plain_values(make_agent):
    agent = make_agent(tools=[lookup])
    assert [t.name for t in agent.state.tools] == ["lookup"]
    assert isinstance(agent, Agent)
    assert ToolResult.text("x").content[0].text == "x"
