"""What importing trio_agent loads: the core and the scripted model need no HTTP client; the
provider modules are imported when a run first asks for their api."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import trio_agent.providers as providers
from trio_agent import (
    AssistantMessage,
    LlmContext,
    Model,
    StreamOptions,
    TextContent,
    UnknownApiError,
)
from trio_agent.providers import Emit, faux

ROOT = Path(__file__).resolve().parent.parent
HTTP_PROVIDERS = [
    "trio_agent.providers.anthropic",
    "trio_agent.providers.google",
    "trio_agent.providers.openai_chat",
    "trio_agent.providers.openai_responses",
]


def _run(code: str) -> str:
    """Run ``code`` in a fresh interpreter (nothing imported yet); what it prints."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_importing_trio_agent_imports_no_http_client_and_no_http_provider() -> None:
    printed = _run(f"""
        import sys
        import trio_agent

        print(sorted(m for m in ["httpx2", "jiter", *{HTTP_PROVIDERS}] if m in sys.modules))
    """)
    assert printed == "[]\n"


def test_the_transcript_functions_are_imported_on_first_use() -> None:
    """``trio_agent.dumps`` and its kin (cattrs, and hooks for every message class) are
    imported when first named, not by ``import trio_agent``; then they are trio_agent's."""
    printed = _run("""
        import sys
        import trio_agent

        print("trio_agent._json" in sys.modules, "cattrs" in sys.modules)
        from trio_agent import loads

        print(loads.__module__, trio_agent.dumps is sys.modules["trio_agent._json"].dumps)
        print(sorted(set(trio_agent.__all__) - set(dir(trio_agent))))
        try:
            trio_agent.nothing_of_that_name
        except AttributeError as error:
            print(error)
    """)
    assert printed == (
        "False False\ntrio_agent True\n[]\n"
        "module 'trio_agent' has no attribute 'nothing_of_that_name'\n"
    )


def test_a_run_on_the_scripted_model_imports_no_http_client() -> None:
    printed = _run("""
        import sys
        import trio
        import trio_agent
        from trio_agent.providers import faux

        async def ignore(event):
            pass

        async def main():
            agent = trio_agent.Agent(faux.model(["hello"]))
            await agent.prompt("hi")
            print(agent.state.messages[-1].text)
            messages = await trio_agent.run_agent_loop(
                [trio_agent.UserMessage.text("hi")],
                trio_agent.AgentContext(),
                trio_agent.AgentLoopConfig(model=faux.model(["again"])),
                ignore,
            )
            print(messages[-1].text)

        trio.run(main)
        print("httpx2" in sys.modules, "trio_agent.providers.openai_chat" in sys.modules)
    """)
    assert printed == "hello\nagain\nFalse False\n"


def test_a_provider_module_is_imported_when_its_api_is_first_asked_for() -> None:
    printed = _run("""
        import sys
        import trio_agent.providers as providers

        print("trio_agent.providers.openai_chat" in sys.modules)
        stream_fn = providers.get_stream_fn("openai-chat")
        print("trio_agent.providers.openai_chat" in sys.modules, "httpx2" in sys.modules)
        print(stream_fn is providers.openai_chat.stream is providers.get_stream_fn("openai-chat"))
    """)
    assert printed == "False\nTrue True\nTrue\n"


def test_the_provider_modules_are_attributes_of_the_package() -> None:
    printed = _run("""
        import trio_agent.providers as providers

        print(providers.anthropic.API, providers.google.__name__)
        print(hasattr(providers, "nowhere"))
    """)
    assert printed == "anthropic-messages trio_agent.providers.google\nFalse\n"


@pytest.fixture
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """A registry as at the start: nothing registered, no provider looked up yet."""
    monkeypatch.setattr(providers, "_registry", {})


@pytest.mark.usefixtures("fresh_registry")
def test_a_stream_function_registered_for_a_built_in_api_replaces_the_provider() -> None:
    async def stream_fn(
        model: Model, context: LlmContext, options: StreamOptions, emit: Emit
    ) -> AssistantMessage:
        return AssistantMessage(content=(TextContent("mine"),))

    providers.register("faux", stream_fn)
    assert providers.get_stream_fn("faux") is stream_fn


@pytest.mark.usefixtures("fresh_registry")
def test_the_built_in_apis_are_registered_before_their_modules_are_imported() -> None:
    assert providers.registered_apis() == [
        "anthropic-messages",
        "faux",
        "google-generative-ai",
        "openai-chat",
        "openai-responses",
    ]
    assert providers.get_stream_fn("faux") is faux.stream
    with pytest.raises(UnknownApiError, match=r"registered for api 'nowhere' \(registered: anth"):
        providers.get_stream_fn("nowhere")


def _names(requirements: list[str]) -> set[str]:
    return {
        re.split(r"[\s;<>=!~\[(]", requirement, maxsplit=1)[0].lower()
        for requirement in requirements
    }


def test_trio_agent_and_its_test_extras_need_httpx2_and_never_httpx() -> None:
    """One HTTP stack: trio_agent's, the official SDKs' and the mcp SDK's is httpx2 (with
    httpcore2); neither trio_agent nor its extras ask for httpx 0.28 or httpcore."""
    requirements = importlib.metadata.requires("trio_agent") or []
    core = _names([r for r in requirements if "extra ==" not in r])
    assert {"httpx2", "trio"} <= core
    assert not {"httpx", "httpcore"} & _names(requirements)
    http2 = [r for r in requirements if 'extra == "http2"' in r]
    assert _names(http2) == {"httpx2"}  # httpx2[http2]: h2, at the version httpx2 speaks
