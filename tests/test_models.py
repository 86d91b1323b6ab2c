"""The model catalog: its shipped data, the makers that use it, and the cost of a run."""

from __future__ import annotations

import copy
import importlib.util
import io
import json
import pickle
import re
import subprocess
import sys
import tarfile
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs
import pytest
import trio

from tests._providers import fixture
from trio_agent import Agent, Model, ModelCost, ModelCostTier, models
from trio_agent._catalog import _data
from trio_agent._cli._cost import money, usage_line
from trio_agent.providers import anthropic, google, openai_chat, openai_responses
from trio_agent.providers._common import KEY_VARIABLES
from trio_agent.testing import ScriptedResponse, open_sse_server

ROOT = Path(__file__).resolve().parent.parent


# --- the shipped data --------------------------------------------------------------------------


def test_the_catalog_comes_from_pi_ai_1_6_0() -> None:
    assert models.source() == "@earendil-works/pi-ai@1.6.0"


def test_the_catalog_keeps_pis_other_fields_as_pi_writes_them() -> None:
    """docs/models.md: ``promptCache`` and ``inputLimits`` are kept, unused."""
    sonnet = _data()["models"]["anthropic"]["anthropic-messages"]["claude-sonnet-4-5"]
    assert sonnet["promptCache"] == {"short": 300, "long": 3600}
    assert sonnet["inputLimits"]["images"]["maxPerRequest"] == 100


def test_the_catalog_holds_every_model_of_pi_ai_for_the_apis_trio_agent_speaks() -> None:
    counts: dict[tuple[str, str], int] = {}
    for model in models.list():
        counts[model.provider, model.api] = counts.get((model.provider, model.api), 0) + 1
    assert len(models.list()) == 1343
    assert len(models.providers()) == 37
    assert {api for _, api in counts} == {
        "anthropic-messages",
        "openai-chat",
        "openai-responses",
        "google-generative-ai",
    }
    expected = {
        ("anthropic", "anthropic-messages"): 18,
        ("openai", "openai-responses"): 47,
        ("google", "google-generative-ai"): 26,
        ("groq", "openai-chat"): 7,
        ("cerebras", "openai-chat"): 2,
        ("deepseek", "openai-chat"): 2,
        ("xai", "openai-responses"): 4,
        ("together", "openai-chat"): 16,
        ("fireworks", "openai-chat"): 11,
        ("fireworks", "anthropic-messages"): 16,
        ("openrouter", "openai-chat"): 397,
        ("openrouter", "anthropic-messages"): 20,
    }
    assert {key: counts.get(key) for key in expected} == expected


@pytest.mark.parametrize(
    ("provider", "id", "api", "cost", "context_window", "max_tokens", "reasoning", "input"),
    [
        (
            "anthropic",
            "claude-sonnet-4-5",
            "anthropic-messages",
            ModelCost(input=3, output=15, cache_read=0.3, cache_write=3.75),
            200_000,
            64_000,
            True,
            ("text", "image"),
        ),
        (
            "openai",
            "gpt-4.1",
            "openai-responses",
            ModelCost(input=2, output=8, cache_read=0.5, cache_write=0),
            1_047_576,
            32_768,
            False,
            ("text", "image"),
        ),
        (
            "google",
            "gemini-2.5-flash",
            "google-generative-ai",
            ModelCost(input=0.3, output=2.5, cache_read=0.03, cache_write=0),
            1_048_576,
            65_536,
            True,
            ("text", "image"),
        ),
        (
            "groq",
            "llama-3.3-70b-versatile",
            "openai-chat",
            ModelCost(input=0.59, output=0.79, cache_read=0, cache_write=0),
            131_072,
            32_768,
            False,
            ("text",),
        ),
        (
            "deepseek",
            "deepseek-flash",
            "openai-chat",
            ModelCost(input=0.3, output=1.2, cache_read=0.006, cache_write=0),
            1_000_000,
            384_000,
            True,
            ("text", "image"),
        ),
    ],
)
def test_known_models_have_their_exact_prices_and_limits(
    provider: str,
    id: str,
    api: str,
    cost: ModelCost,
    context_window: int,
    max_tokens: int,
    reasoning: bool,
    input: tuple[str, ...],
) -> None:
    model = models.find(provider, id)
    assert model is not None
    assert (model.api, model.cost, model.context_window, model.max_tokens) == (
        api,
        cost,
        context_window,
        max_tokens,
    )
    assert (model.reasoning, model.input) == (reasoning, input)


def test_every_entry_of_the_file_is_a_model_with_its_prices() -> None:
    by_key = {(m.provider, m.api, m.id): m for m in models.list()}
    entries = [
        (provider, api, id, entry)
        for provider, apis in _data()["models"].items()
        for api, ids in apis.items()
        for id, entry in ids.items()
    ]
    assert len(entries) == len(by_key)
    for provider, api, id, entry in entries:
        model = by_key[provider, api, id]
        cost = entry["cost"]
        assert model.cost == ModelCost(
            input=cost["input"],
            output=cost["output"],
            cache_read=cost["cacheRead"],
            cache_write=cost["cacheWrite"],
            tiers=[
                ModelCostTier(
                    input_tokens_above=tier["inputTokensAbove"],
                    input=tier["input"],
                    output=tier["output"],
                    cache_read=tier["cacheRead"],
                    cache_write=tier["cacheWrite"],
                )
                for tier in cost.get("tiers", [])
            ],
        ), (provider, id)
        assert (model.base_url, model.context_window, model.max_tokens) == (
            entry["baseUrl"],
            entry["contextWindow"],
            entry["maxTokens"],
        )


def test_the_request_rules_are_kept_in_pis_spelling() -> None:
    deepseek = models.find("deepseek", "deepseek-flash")
    assert deepseek is not None
    assert deepseek.thinking_levels == {
        "minimal": None,
        "low": "low",
        "medium": None,
        "high": "high",
        "max": "max",
    }
    assert deepseek.compat_flags["thinkingFormat"] == "deepseek"
    assert deepseek.compat_flags["maxTokensField"] == "max_tokens"
    opus = models.find("vercel-ai-gateway", "anthropic/claude-opus-4.7")
    assert opus is not None
    assert opus.compat_flags == {
        "allowEmptySignature": True,
        "forceAdaptiveThinking": True,
        "supportsTemperature": False,
    }


def test_the_request_rules_are_read_only_all_the_way_down() -> None:
    fable = models.find("anthropic", "claude-fable-5")
    assert fable is not None
    fallbacks = fable.compat_flags["allowedFallbackModels"]
    assert isinstance(fallbacks, tuple)
    assert fallbacks[0]["cost"]["input"] == 5
    with pytest.raises(TypeError):
        fallbacks[0]["cost"]["input"] = 0
    with pytest.raises(TypeError):
        fable.thinking_levels["off"] = "none"  # type: ignore[index]  # refused: read-only
    assert hash(fable.compat_flags) == hash(models.FrozenMapping(fable.compat_flags))
    assert pickle.loads(pickle.dumps(fable.compat_flags)) == fable.compat_flags
    assert copy.deepcopy(fable.thinking_levels) == fable.thinking_levels


def test_list_filters_by_provider_and_api() -> None:
    groq = models.list(provider="groq")
    assert [m.id for m in groq] == sorted(m.id for m in groq)
    assert {m.provider for m in groq} == {"groq"}
    fireworks = models.list(provider="fireworks", api="anthropic-messages")
    assert len(fireworks) == 16
    assert {m.api for m in fireworks} == {"anthropic-messages"}
    assert models.list(provider="no-such-provider") == []
    assert models.find("anthropic", "no-such-model") is None


def test_importing_trio_agent_does_not_read_the_catalog() -> None:
    code = (
        "import trio_agent, trio_agent.providers\n"
        "from trio_agent import _catalog\n"
        "print(_catalog._data.cache_info().currsize)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "0"


# --- the makers --------------------------------------------------------------------------------


def test_a_maker_fills_in_what_the_catalog_knows() -> None:
    claude = anthropic.model("claude-sonnet-4-5")
    assert claude == Model(
        id="claude-sonnet-4-5",
        api="anthropic-messages",
        provider="anthropic",
        base_url="https://api.anthropic.com",
        name="Claude Sonnet 4.5 (latest)",
        reasoning=True,
        context_window=200_000,
        max_tokens=64_000,
        input=("text", "image"),
        cost=ModelCost(input=3, output=15, cache_read=0.3, cache_write=3.75),
        compat_flags={"supportsStrictTools": True},
    )
    flash = google.model("gemini-2.5-flash")
    assert (flash.cost.output, flash.max_tokens, flash.reasoning) == (2.5, 65_536, True)
    gpt = openai_responses.model("gpt-4.1")
    assert (gpt.cost.input, gpt.context_window) == (2.0, 1_047_576)


def test_an_explicit_argument_wins_over_the_catalog() -> None:
    claude = anthropic.model(
        "claude-sonnet-4-5", max_tokens=1000, reasoning=False, cost=ModelCost(input=1.0)
    )
    assert (claude.max_tokens, claude.reasoning, claude.cost) == (1000, False, ModelCost(input=1))
    assert claude.context_window == 200_000  # what was not given still comes from the catalog


def test_an_unknown_id_with_a_base_url_gets_the_makers_defaults() -> None:
    assert anthropic.model("claude-next", base_url="https://api.anthropic.com") == Model(
        id="claude-next",
        api="anthropic-messages",
        provider="anthropic",
        base_url="https://api.anthropic.com",
        context_window=200_000,
        max_tokens=32_000,
        input=("text", "image"),
    )
    local = openai_chat.model("llama3.2", base_url="http://localhost:11434/v1")
    assert (local.provider, local.cost, local.context_window) == ("ollama", ModelCost(), 128_000)


@pytest.mark.parametrize(
    ("maker", "id", "provider", "told"),
    [
        # dropped by pi-ai 1.6.0: the nearest ids the provider still serves
        (
            anthropic.model,
            "claude-3-opus",
            None,
            "anthropic serves no model 'claude-3-opus' over anthropic-messages in the model "
            "catalog (@earendil-works/pi-ai@1.6.0); nearest known: claude-opus-5, "
            "claude-opus-5-5, claude-opus-4-8, claude-opus-4-7, claude-opus-4-6. A model the "
            "catalog does not list needs its base_url given",
        ),
        (
            openai_chat.model,
            "deepseek-v4-flash",
            "deepseek",
            "deepseek serves no model 'deepseek-v4-flash' over openai-chat in the model catalog "
            "(@earendil-works/pi-ai@1.6.0); nearest known: deepseek-flash, deepseek-v4-pro. A "
            "model the catalog does not list needs its base_url given",
        ),
        (
            openai_responses.model,
            "gpt-5.2-chat-latest",
            None,
            "openai serves no model 'gpt-5.2-chat-latest' over openai-responses in the model "
            "catalog (@earendil-works/pi-ai@1.6.0); nearest known: gpt-5-chat-latest, "
            "chat-latest, gpt-6.2-astra, gpt-5.6-luna, gpt-daybreak-red-latest. A model the "
            "catalog does not list needs its base_url given",
        ),
        (
            google.model,
            "zzz",
            None,
            "google serves no model 'zzz' over google-generative-ai in the model catalog "
            "(@earendil-works/pi-ai@1.6.0); `trio-agent models --provider google` lists its "
            "models. A model the catalog does not list needs its base_url given",
        ),
    ],
    ids=["anthropic", "openai_chat", "openai_responses", "google"],
)
def test_an_id_its_catalog_provider_does_not_list_is_an_error_naming_the_nearest(
    maker: Any, id: str, provider: str | None, told: str
) -> None:
    """Not a model at the provider's URL with made-up limits and no prices: the id, the
    provider, the API and the ids it might have meant."""
    with pytest.raises(models.UnknownModelError) as caught:
        maker(id, provider=provider)
    assert str(caught.value) == told
    assert isinstance(caught.value, LookupError)
    assert caught.value.id == id
    assert caught.value.nearest == tuple(
        told.partition("nearest known: ")[2].partition(". ")[0].split(", ")
        if "nearest" in told
        else ()
    )
    assert maker(id, provider=provider, base_url="https://llm.example.com/v1").id == id
    assert models.find(provider or caught.value.provider, id) is None  # find: None, as ever


def test_an_unknown_ids_error_shows_a_long_id_cut_and_pickles() -> None:
    with pytest.raises(models.UnknownModelError) as caught:
        anthropic.model("x" * 10_000)
    message = str(caught.value)
    assert f"'{'x' * 200}...'" in message
    assert len(message) < 600
    again = pickle.loads(pickle.dumps(caught.value))
    assert (str(again), again.provider, again.api) == (
        message,
        "anthropic",
        "anthropic-messages",
    )


@pytest.mark.parametrize(
    ("maker", "id", "context_window", "max_tokens"),
    [
        (openai_chat.model, "gpt-4.1", 128_000, 16_384),
        (openai_responses.model, "gpt-5", 400_000, 128_000),
        (google.model, "gemini-2.5-flash", 1_048_576, 65_536),
    ],
    ids=["openai_chat", "openai_responses", "google"],
)
def test_every_maker_describes_another_server_by_its_defaults(
    maker: Any, id: str, context_window: int, max_tokens: int
) -> None:
    """The makers' docstrings: a ``base_url`` other than the catalog's gets the maker's defaults."""
    assert maker(id).cost != ModelCost()
    proxied = maker(id, base_url="https://llm-proxy.example.com/v1")
    assert (proxied.cost, proxied.reasoning) == (ModelCost(), False)
    assert (proxied.context_window, proxied.max_tokens) == (context_window, max_tokens)
    assert (proxied.name, proxied.base_url) == ("", "https://llm-proxy.example.com/v1")


def test_a_base_url_other_than_the_catalogs_is_another_server() -> None:
    proxy = anthropic.model("claude-sonnet-4-5", base_url="http://127.0.0.1:8080")
    assert (proxy.cost, proxy.max_tokens) == (ModelCost(), 32_000)
    same = anthropic.model("claude-sonnet-4-5", base_url="https://api.anthropic.com/")
    assert same.cost.input == 3.0
    evolved = attrs.evolve(anthropic.model("claude-sonnet-4-5"), base_url="http://127.0.0.1:8080")
    assert evolved.cost.input == 3.0


def test_openai_chat_takes_openais_models_facts_from_its_responses_entries() -> None:
    gpt = openai_chat.model("gpt-4.1")
    assert (gpt.api, gpt.provider, gpt.base_url) == (
        "openai-chat",
        "openai",
        "https://api.openai.com/v1",
    )
    assert (gpt.cost.input, gpt.context_window, gpt.max_tokens) == (2.0, 1_047_576, 32_768)
    assert gpt.compat_flags == {}  # the rules of another API are not carried over


def test_openai_chat_finds_the_provider_by_url_and_the_url_by_provider() -> None:
    by_url = openai_chat.model("llama-3.3-70b-versatile", base_url="https://api.groq.com/openai/v1")
    by_provider = openai_chat.model("llama-3.3-70b-versatile", provider="groq")
    assert by_url == by_provider
    assert (by_url.provider, by_url.cost.input) == ("groq", 0.59)
    with pytest.raises(models.UnknownModelError, match=r"^groq serves no model 'brand-new' "):
        openai_chat.model("brand-new", provider="groq")


def test_every_maker_finds_the_provider_by_url() -> None:
    routed = anthropic.model("anthropic/claude-haiku-4.5", base_url="https://openrouter.ai/api")
    listed = models.find("openrouter", "anthropic/claude-haiku-4.5", "anthropic-messages")
    assert listed is not None
    assert (routed.provider, routed.cost) == ("openrouter", listed.cost)
    grok = openai_responses.model("grok-4.3", base_url="https://api.x.ai/v1")
    assert (grok.provider, grok.cost.input > 0) == ("xai", True)
    assert anthropic.model("x", base_url="http://127.0.0.1:9").provider == "anthropic"
    with pytest.raises(models.UnknownModelError, match=r"^google serves no model 'x' "):
        google.model("x")


# --- what a run cost ---------------------------------------------------------------------------


async def test_a_run_costs_what_the_catalog_prices_say() -> None:
    body = fixture("anthropic", "text.sse")  # 25 tokens in, 12 out, 100 cache read
    async with open_sse_server(ScriptedResponse(body=body)) as server:
        model = attrs.evolve(anthropic.model("claude-sonnet-4-5"), base_url=server.url)
        agent = Agent(model, api_key="test-key")
        with trio.fail_after(30):
            await agent.prompt("hi")
    reply = agent.state.messages[-1]
    expected = (25 * 3 + 12 * 15 + 100 * 0.3) / 1e6
    assert reply.usage.cost.total == pytest.approx(expected)  # type: ignore[union-attr]  # an AssistantMessage, here
    line = usage_line(agent.state.messages, model)
    assert line == "  used 25 tokens in, 12 out (100 cache read): $0.0003"


def test_the_usage_line_says_when_the_model_has_no_prices() -> None:
    from trio_agent import AssistantMessage, TextContent, Usage

    reply = AssistantMessage(
        content=(TextContent("hi"),),
        api="openai-chat",
        provider="ollama",
        model="llama3.2",
        usage=Usage(input=1200, output=34, total_tokens=1234),
        stop_reason="stop",
        timestamp=0,
    )
    model = openai_chat.model("llama3.2", base_url="http://localhost:11434/v1")
    assert usage_line([reply], model) == (
        "  used 1,200 tokens in, 34 out; no prices known for llama3.2 at http://localhost:11434/v1"
    )
    assert usage_line([], model) is None


@pytest.mark.parametrize(
    ("amount", "shown"),
    [(0.0, "$0.0000"), (0.00001, "<$0.0001"), (0.01234, "$0.0123"), (12.345, "$12.35")],
)
def test_money_is_shown_to_the_cent_or_four_places(amount: float, shown: str) -> None:
    assert money(amount) == shown


# --- the regeneration script -------------------------------------------------------------------


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "update_models", ROOT / "scripts" / "update_models.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _add(archive: tarfile.TarFile, name: str, value: Any) -> None:
    data = json.dumps(value).encode()
    info = tarfile.TarInfo(name)
    info.size = len(data)
    archive.addfile(info, io.BytesIO(data))


def _entry(provider: str, api: str, id: str) -> dict[str, Any]:
    return {
        "id": id,
        "name": id.upper(),
        "api": api,
        "provider": provider,
        "baseUrl": "https://example.test/v1",
        "reasoning": False,
        "input": ["text"],
        "cost": {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0},
        "contextWindow": 1000,
        "maxTokens": 100,
    }


_ENV_KEYS_JS = """\
export const ANTHROPIC_AUTH_TOKEN_ENV = "ANTHROPIC_AUTH_TOKEN";
export const ANTHROPIC_API_KEY_ENV = "ANTHROPIC_API_KEY";
function getApiKeyEnvVars(provider) {
    if (provider === "github-copilot") {
        return ["COPILOT_GITHUB_TOKEN"];
    }
    // ANTHROPIC_AUTH_TOKEN is sent as Authorization: Bearer.
    if (provider === "anthropic") {
        return [ANTHROPIC_AUTH_TOKEN_ENV, ANTHROPIC_API_KEY_ENV];
    }
    const envMap = {
        "host": ["HOST_TEAM_API_KEY", "HOST_API_KEY"],
        other: "OTHER_API_KEY",
        "not-in-catalog": "ELSEWHERE_API_KEY",
    };
    const envVars = envMap[provider];
    return typeof envVars === "string" ? [envVars] : envVars;
}
"""


def _tarball(path: Path, data: dict[str, Any], env_keys: str = _ENV_KEYS_JS) -> Path:
    """A pi-ai tarball of version 9.9.9 with one provider file, ``data``."""
    with tarfile.open(path, "w:gz") as archive:
        _add(archive, "package/package.json", {"name": "@earendil-works/pi-ai", "version": "9.9.9"})
        folder = "package/dist/providers/data/"
        _add(archive, folder + ".manifest.json", {"files": {}})
        _add(archive, folder + "host.json", data)
        script = env_keys.encode()
        info = tarfile.TarInfo("package/dist/env-api-keys.js")
        info.size = len(script)
        archive.addfile(info, io.BytesIO(script))
    return path


def _kept(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k not in ("id", "api", "provider", "type")}


def _run(tmp_path: Path, tarball: Path, *more: str) -> tuple[int, Path, Path]:
    output, keys = tmp_path / "catalog.json", tmp_path / "_key_variables.py"
    code = _script().main(
        ["--tarball", str(tarball), "--output", str(output), "--keys-output", str(keys), *more]
    )
    return code, output, keys


def test_the_script_keeps_the_apis_trio_agent_speaks_under_its_names(tmp_path: Path) -> None:
    """The 0.x layout: chat models keyed by id."""
    tarball = _tarball(
        tmp_path / "pi-ai.tgz",
        {
            "openai-completions": {"m": _entry("host", "openai-completions", "m")},
            "bedrock-converse-stream": {"b": _entry("host", "bedrock-converse-stream", "b")},
        },
    )
    code, output, _ = _run(tmp_path, tarball)
    assert code == 0
    written = json.loads(output.read_text())
    assert written["source"] == "@earendil-works/pi-ai@9.9.9"
    assert written["models"] == {
        "host": {"openai-chat": {"m": _kept(_entry("host", "openai-completions", "m"))}}
    }
    assert "\n" not in output.read_text().rstrip("\n")  # compact


def test_the_script_reads_the_1x_layout_chat_models_only_with_their_new_fields(
    tmp_path: Path,
) -> None:
    """From pi-ai 1.0 on: keys ``"<type>:<id>"``, image and classifier models beside the chat
    models, and fields such as ``promptCache`` and ``inputLimits``, which are kept."""
    chat = _entry("host", "anthropic-messages", "claude-x") | {
        "type": "chat",
        "promptCache": {"short": 300, "long": 3600},
        "inputLimits": {"images": {"maxPerMessage": 20}},
        "compat": {"supportsMidConvoSystemMessages": True},
    }
    image = _entry("host", "anthropic-messages", "painter") | {"type": "image"}
    tarball = _tarball(
        tmp_path / "pi-ai.tgz",
        {"anthropic-messages": {"chat:claude-x": chat, "image:painter": image}},
    )
    code, output, _ = _run(tmp_path, tarball)
    assert code == 0
    kept = json.loads(output.read_text())["models"]["host"]["anthropic-messages"]
    assert kept == {"claude-x": _kept(chat)}
    assert kept["claude-x"]["promptCache"] == {"short": 300, "long": 3600}
    assert "type" not in kept["claude-x"]


@pytest.mark.parametrize("key", ["claude-x", "chat:claude-y", "image:claude-x"])
def test_the_script_refuses_an_entry_filed_under_another_key(tmp_path: Path, key: str) -> None:
    entry = _entry("host", "anthropic-messages", "claude-x") | {"type": "chat"}
    tarball = _tarball(tmp_path / "pi-ai.tgz", {"anthropic-messages": {key: entry}})
    with pytest.raises(SystemExit, match=f"anthropic-messages/{key} is filed under another key"):
        _run(tmp_path, tarball)


def test_the_script_writes_the_key_variables_of_the_catalogs_providers(tmp_path: Path) -> None:
    """pi's table, read from its JavaScript: string constants, arrays in order, and the
    providers answered by an ``if``; the tokens that are no keys left out, and the
    providers the catalog does not hold."""
    tarball = _tarball(
        tmp_path / "pi-ai.tgz",
        {
            "openai-completions": {
                "m": _entry("host", "openai-completions", "m"),
                "o": _entry("other", "openai-completions", "o"),
            },
            "anthropic-messages": {"c": _entry("anthropic", "anthropic-messages", "c")},
        },
    )
    code, _, keys = _run(tmp_path, tarball)
    assert code == 0
    namespace: dict[str, Any] = {}
    exec(keys.read_text(), namespace)
    assert namespace["KEY_VARIABLES"] == {
        "anthropic": ("ANTHROPIC_API_KEY",),
        "host": ("HOST_TEAM_API_KEY", "HOST_API_KEY"),
        "other": ("OTHER_API_KEY",),
    }
    assert "@earendil-works/pi-ai@9.9.9" in namespace["__doc__"]


def test_the_script_refuses_a_key_table_it_cannot_read(tmp_path: Path) -> None:
    data = {"openai-completions": {"m": _entry("host", "openai-completions", "m")}}
    changed = _ENV_KEYS_JS.replace('other: "OTHER_API_KEY"', "other: OTHER_VARIABLE")
    tarball = _tarball(tmp_path / "a.tgz", data, changed)
    with pytest.raises(SystemExit, match="OTHER_VARIABLE is no string constant"):
        _run(tmp_path, tarball)
    tarball = _tarball(tmp_path / "b.tgz", data, "function other() {}\n")
    with pytest.raises(SystemExit, match=r"no function getApiKeyEnvVars\(provider\)"):
        _run(tmp_path, tarball)


def test_the_scripts_check_mode_tells_a_stale_file_and_writes_nothing(tmp_path: Path) -> None:
    data = {"openai-completions": {"m": _entry("host", "openai-completions", "m")}}
    tarball = _tarball(tmp_path / "pi-ai.tgz", data)
    assert _run(tmp_path, tarball, "--check")[0] == 1  # no files yet
    code, output, keys = _run(tmp_path, tarball)
    assert code == 0
    assert _run(tmp_path, tarball, "--check")[0] == 0
    output.write_text(output.read_text().replace('"input":1', '"input":2'))
    before = output.read_text()
    assert _run(tmp_path, tarball, "--check")[0] == 1
    assert output.read_text() == before
    _run(tmp_path, tarball)
    keys.write_text(keys.read_text() + "\n")
    assert _run(tmp_path, tarball, "--check")[0] == 1


def test_the_script_writes_only_plain_names_into_the_key_table() -> None:
    script = _script()
    models: dict[str, Any] = {"openai": {}, "odd provider": {}}
    assert script.key_variables({"openai": ["OPENAI_API_KEY"]}, models) == {
        "openai": ("OPENAI_API_KEY",)
    }
    with pytest.raises(SystemExit, match="is not an environment variable"):
        script.key_variables({"openai": ['X",) or __import__("os") #']}, models)
    with pytest.raises(SystemExit, match="is not a provider name"):
        script.key_variables({"odd provider": ["ODD_API_KEY"]}, models)


def test_the_shipped_key_variables_were_made_with_the_shipped_catalog() -> None:
    from trio_agent.providers import _key_variables

    assert models.source() in (_key_variables.__doc__ or "")
    assert set(KEY_VARIABLES) <= set(models.providers())
    # each entry names at least one variable, and only names of environment variables
    assert all(
        names and all(re.fullmatch(r"[A-Z][A-Z0-9_]*", name) for name in names)
        for names in _key_variables.KEY_VARIABLES.values()
    )


# --- tiered prices -----------------------------------------------------------------------------


def test_the_catalogs_tiered_prices_are_kept() -> None:
    gpt = openai_responses.model("gpt-5.5")
    assert gpt.cost == ModelCost(
        input=5,
        output=30,
        cache_read=0.5,
        cache_write=0,
        tiers=(
            ModelCostTier(
                input_tokens_above=272_000, input=10, output=45, cache_read=1, cache_write=0
            ),
        ),
    )
    tiered = [model for model in models.list() if model.cost.tiers]
    assert len(tiered) == 226
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        gpt.cost.tiers[0].input = 0  # type: ignore[misc]  # refused: frozen


@pytest.mark.parametrize(
    ("input", "cache_read", "cache_write", "expected"),
    [
        # 272,000 tokens of input is not above the threshold: the base prices
        (200_000, 72_000, 0, (1.0, 0.3, 0.036)),
        # one more, counting cache reads: the tier prices the whole request
        (200_000, 72_001, 0, (2.0, 0.45, 0.072001)),
        # cache writes count too
        (272_000, 0, 1, (2.72, 0.45, 0.0)),
    ],
)
def test_a_long_request_is_priced_by_its_tier(
    input: int, cache_read: int, cache_write: int, expected: tuple[float, float, float]
) -> None:
    from trio_agent import Usage
    from trio_agent.providers._common import priced

    usage = Usage(input=input, output=10_000, cache_read=cache_read, cache_write=cache_write)
    cost = priced(usage, openai_responses.model("gpt-5.5")).cost
    assert (cost.input, cost.output, cost.cache_read) == pytest.approx(expected)
    assert cost.total == pytest.approx(sum(expected) + cost.cache_write)


def test_the_highest_tier_exceeded_applies_whatever_their_order() -> None:
    cost = ModelCost(
        input=1,
        tiers=(
            ModelCostTier(input_tokens_above=1000, input=3),
            ModelCostTier(input_tokens_above=100, input=2),
        ),
    )
    assert [cost.rates(tokens).input for tokens in (100, 101, 1000, 1001)] == [1, 2, 2, 3]


async def test_a_run_is_priced_by_its_tier() -> None:
    body = fixture("anthropic", "text.sse")  # 25 tokens in, 12 out, 100 cache read
    table = ModelCost(
        input=3,
        output=15,
        cache_read=0.3,
        tiers=(ModelCostTier(input_tokens_above=124, input=6, output=22.5, cache_read=0.6),),
    )
    async with open_sse_server(ScriptedResponse(body=body)) as server:
        model = anthropic.model("claude-sonnet-4-5", base_url=server.url, cost=table)
        agent = Agent(model, api_key="test-key")
        with trio.fail_after(30):
            await agent.prompt("hi")
    cost = agent.state.messages[-1].usage.cost  # type: ignore[union-attr]  # an AssistantMessage, here
    assert (cost.input, cost.output, cost.cache_read) == pytest.approx((150e-6, 270e-6, 60e-6))
    assert cost.total == pytest.approx(480e-6)


def test_a_model_given_its_own_catalog_url_keeps_what_the_catalog_knows() -> None:
    # openrouter serves this model over openai-chat only; over anthropic-messages it is
    # at openrouter's URL for that API, and naming that URL is no other server.
    made = anthropic.model("aion-labs/aion-2.0", provider="openrouter")
    again = anthropic.model("aion-labs/aion-2.0", provider="openrouter", base_url=made.base_url)
    assert made.base_url == "https://openrouter.ai/api"
    assert (again.context_window, again.cost) == (made.context_window, made.cost)
    assert made.cost.input > 0
