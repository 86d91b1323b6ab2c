"""The model catalog: what is known of each provider's models, from pi-ai's.

pi-ai publishes a generated catalog of the models of each provider: wire API,
base URL, whether the model reasons, what input it takes, its context window
and output limit, its prices per million tokens, and the rules a request to it
must follow (``thinkingLevelMap``, ``compat``). ``_catalog.json`` holds the
part of it trio_agent can use: the chat models served over the four APIs it
speaks (``anthropic-messages``, ``openai-chat`` — pi's ``openai-completions``
—, ``openai-responses``, ``google-generative-ai``), of every provider that
serves one, with pi's other fields as pi writes them (``promptCache``,
``inputLimits``). ``scripts/update_models.py`` regenerates it from a pi-ai
release (the shipped file is pi-ai 1.6.0's).

The file is read, once, on the first lookup, not on import: most programs
that import trio_agent never look a model up, and parsing 670 kB of JSON
would cost each of them several milliseconds.

An entry is found by provider label and model id; the same id is often
served by several providers (``claude-sonnet-4-5`` by Anthropic, OpenRouter,
Vercel, ...), at different prices and URLs, so the provider is part of the
key. When the provider serves the model over another API than the one asked
for (OpenAI lists its models under ``openai-responses`` only, and
``openai_chat.model("gpt-4.1")`` is on ``openai-chat``), the model's own
facts (limits, prices, input, reasoning) are taken from that entry, and the
wire details (base URL, headers, request rules) are not.
"""

from __future__ import annotations

import difflib
import functools
import json
from collections.abc import Mapping
from typing import Any

from ._errors import UnknownModelError
from ._model import Model, ModelCost, ModelCostTier

__all__ = [
    "base_url_of",
    "describe",
    "find",
    "list_models",
    "nearest_ids",
    "provider_at",
    "providers",
    "source",
    "unknown_model",
]

_FILE = "_catalog.json"

_WIRE_FIELDS = ("base_url", "headers", "thinking_levels", "compat_flags")
"""Fields that belong to an entry's API, not to the model: not carried to another API."""


@functools.cache
def _data() -> Mapping[str, Any]:
    from importlib import resources  # here: importing it would slow every ``import trio_agent``

    text = resources.files(__package__ or "trio_agent").joinpath(_FILE).read_text("utf-8")
    data: Mapping[str, Any] = json.loads(text)
    return data


def _models() -> Mapping[str, Mapping[str, Mapping[str, Mapping[str, Any]]]]:
    """provider → api → id → pi's entry."""
    models: Mapping[str, Mapping[str, Mapping[str, Mapping[str, Any]]]] = _data()["models"]
    return models


def source() -> str:
    """The pi-ai release the catalog was made from (``"@earendil-works/pi-ai@1.6.0"``)."""
    return str(_data()["source"])


def providers() -> list[str]:
    """The provider labels of the catalog, sorted."""
    return sorted(_models())


def _fields(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The :class:`Model` fields of one of pi's entries."""
    cost = entry["cost"]
    fields: dict[str, Any] = {
        "name": entry.get("name", ""),
        "base_url": entry["baseUrl"],
        "reasoning": bool(entry["reasoning"]),
        "input": tuple(entry["input"]),
        "context_window": int(entry["contextWindow"]),
        "max_tokens": int(entry["maxTokens"]),
        "cost": ModelCost(
            input=float(cost["input"]),
            output=float(cost["output"]),
            cache_read=float(cost["cacheRead"]),
            cache_write=float(cost["cacheWrite"]),
            tiers=tuple(
                ModelCostTier(
                    input_tokens_above=int(tier["inputTokensAbove"]),
                    input=float(tier["input"]),
                    output=float(tier["output"]),
                    cache_read=float(tier["cacheRead"]),
                    cache_write=float(tier["cacheWrite"]),
                )
                for tier in cost.get("tiers") or ()
            ),
        ),
        "headers": dict(entry.get("headers") or {}),
        "thinking_levels": entry.get("thinkingLevelMap") or {},
        "compat_flags": entry.get("compat") or {},
    }
    return fields


def _entry(api: str, provider: str, id: str) -> tuple[str, Mapping[str, Any]] | None:
    """The entry of ``id`` at ``provider``: on ``api`` if it is served there, else on the
    first other API that serves it (in sorted order, so always the same one)."""
    by_api = _models().get(provider, {})
    if id in by_api.get(api, {}):
        return api, by_api[api][id]
    for other in sorted(by_api):
        if id in by_api[other]:
            return other, by_api[other][id]
    return None


def _known(api: str, provider: str, id: str) -> tuple[dict[str, Any], str] | None:
    """What the catalog knows of ``id`` at ``provider`` as a model served over ``api``,
    and the URL it is served at there: the entry's own fields on ``api``; else, from
    an entry on another API, its facts without that API's wire fields, at the URL of
    ``provider``'s models on ``api`` (or none)."""
    found = _entry(api, provider, id)
    if found is None:
        return None
    fields = _fields(found[1])
    if found[0] == api:
        return fields, found[1]["baseUrl"]
    for name in _WIRE_FIELDS:
        del fields[name]
    return fields, base_url_of(api, provider) or ""


def find(provider: str, id: str, api: str | None = None) -> Model | None:
    """The catalog's model ``id`` of ``provider``, or None if it does not know it.

    With ``api``, the model as served over that API; a model its provider
    serves over another API only is then described by its facts (limits,
    prices, input, reasoning) with the API's defaults for the rest. Without
    ``api``, the entry of the first API that serves it.
    """
    if api is None:
        by_api = _models().get(provider, {})
        api = next((name for name in sorted(by_api) if id in by_api[name]), None)
        if api is None:
            return None
    known = _known(api, provider, id)
    if known is None:
        return None
    return Model(id=id, api=api, provider=provider, **known[0])


def list_models(*, provider: str | None = None, api: str | None = None) -> list[Model]:
    """Every model of the catalog, or those of ``provider`` and / or ``api``, sorted by
    provider, API and id. An unknown provider or API gives an empty list."""
    out: list[Model] = []
    models = _models()
    for label in sorted(models) if provider is None else [provider]:
        for wire in sorted(models.get(label, {})) if api is None else [api]:
            for model_id in sorted(models.get(label, {}).get(wire, {})):
                out.append(
                    Model(
                        id=model_id,
                        api=wire,
                        provider=label,
                        **_fields(models[label][wire][model_id]),
                    )
                )
    return out


def _normal(url: str) -> str:
    return url.rstrip("/").lower()


def provider_at(api: str, base_url: str) -> str | None:
    """The provider whose catalog entries on ``api`` are served at ``base_url``, if one is."""
    wanted = _normal(base_url)
    for label, by_api in sorted(_models().items()):
        for entry in by_api.get(api, {}).values():
            if _normal(entry["baseUrl"]) == wanted:
                return label
    return None


def base_url_of(api: str, provider: str) -> str | None:
    """The base URL of ``provider``'s models on ``api`` (its first, by id), if it has any."""
    entries = _models().get(provider, {}).get(api, {})
    if not entries:
        return None
    url: str = entries[min(entries)]["baseUrl"]
    return url


_NEAREST = 5
"""How many known ids an :class:`UnknownModelError` lists."""

_SHOWN_ID = 200
"""The most characters of an unknown id a message shows."""


def nearest_ids(provider: str, id: str) -> list[str]:
    """The ids ``provider`` serves (on any API) that look most like ``id``, nearest first."""
    known = {name for entries in _models().get(provider, {}).values() for name in entries}
    return difflib.get_close_matches(id, sorted(known), n=_NEAREST, cutoff=0.5)


def unknown_model(
    api: str,
    provider: str,
    id: str,
    remedy: str = "A model the catalog does not list needs its base_url given",
) -> UnknownModelError:
    """The error for ``id``, which ``provider``'s models in the catalog do not include;
    ``remedy`` ends its message."""
    shown = id if len(id) <= _SHOWN_ID else id[:_SHOWN_ID] + "..."
    nearest = nearest_ids(provider, id)
    hint = (
        f"nearest known: {', '.join(nearest)}"
        if nearest
        else f"`trio-agent models --provider {provider}` lists its models"
    )
    error = UnknownModelError(
        f"{provider} serves no model {shown!r} over {api} in the model catalog "
        f"({source()}); {hint}. {remedy}"
    )
    error.provider, error.api, error.id, error.nearest = provider, api, id, tuple(nearest)
    return error


def describe(
    api: str,
    id: str,
    *,
    provider: str | None,
    fallback_provider: str,
    defaults: Mapping[str, Any],
    **given: Any,
) -> Model:
    """The model a maker returns: ``defaults``, then what the catalog knows of ``id`` at
    ``provider``, then what the caller gave (a value of None in ``given`` is not given).

    ``provider`` None is the provider whose catalog models on ``api`` are served at
    the ``base_url`` given, else ``fallback_provider``.

    Without a ``base_url``, an ``id`` that a catalog provider does not list (on any
    API) is an :class:`UnknownModelError` naming the id, the provider and the API,
    with the provider's nearest known ids: not a model at that provider's URL with
    made-up limits and no prices. That is for the API's own provider
    (``fallback_provider``) and a provider that serves models over ``api``; another
    provider's name is only a label (for ``get_api_key``) on the maker's default URL.

    The catalog describes a model as its provider serves it, at the provider's
    URL. A ``base_url`` given that is not that one names another server (a
    proxy, a local replica, a test server), whose limits and prices are its
    own: the catalog is then not used, and the caller says what it knows
    (or evolves a catalog model: ``attrs.evolve(anthropic.model(id),
    base_url=...)``). Without a ``base_url``, the URL is the catalog entry's,
    else that of the provider's other models on ``api``, else the maker's
    default.
    """
    base_url = given.get("base_url")
    if provider is None:
        provider = (base_url and provider_at(api, base_url)) or fallback_provider
    fields = dict(defaults)
    known = _known(api, provider, id)
    if (
        known is None
        and base_url is None
        and (provider == fallback_provider or base_url_of(api, provider) is not None)
        and provider in _models()
    ):
        raise unknown_model(api, provider, id)
    if known is not None and base_url is not None and _normal(base_url) != _normal(known[1]):
        known = None  # another server's model
    if known is not None:
        fields.update(known[0])
    fields["base_url"] = (known[1] if known else base_url_of(api, provider)) or defaults.get(
        "base_url", ""
    )
    fields.update({name: value for name, value in given.items() if value is not None})
    if "input" in fields:
        fields["input"] = tuple(fields["input"])
    return Model(id=id, api=api, provider=provider, **fields)
