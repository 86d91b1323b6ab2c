"""``trio-agent models``: the model catalog, one model a line.

Each line starts with what ``--model`` takes (``API:ID``), then the
provider, the limits and the prices, so that a line can be found with
``grep`` and its first word pasted into a command line. A model of a
provider other than the API's own (OpenRouter, Groq, ...) is used with
``--provider`` naming it (which brings its URL, shown by ``--json``, and
its key variable).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from .._catalog import list_models, providers
from .._model import Model, ModelCostTier


def _price(value: float) -> str:
    return f"{value:g}"


def line(model: Model) -> str:
    """One model, for a person: ``anthropic-messages:claude-sonnet-4-5  anthropic  ...``."""
    cost = model.cost
    kinds = "+".join(model.input)
    traits = f"{kinds}{', reasoning' if model.reasoning else ''}"
    return (
        f"{model.api}:{model.id}  {model.provider}  "
        f"context {model.context_window:,}, output {model.max_tokens:,}  "
        f"${_price(cost.input)} in / ${_price(cost.output)} out per M tokens  {traits}"
    )


def _tier(tier: ModelCostTier) -> dict[str, float]:
    return {
        "inputTokensAbove": tier.input_tokens_above,
        "input": tier.input,
        "output": tier.output,
        "cacheRead": tier.cache_read,
        "cacheWrite": tier.cache_write,
    }


def as_json(model: Model) -> str:
    """One model, as one line of JSON (pi's names for what pi's catalog holds, with the
    higher prices of long requests as ``cost.tiers``, as pi writes them)."""
    cost = model.cost
    return json.dumps(
        {
            "api": model.api,
            "id": model.id,
            "name": model.name,
            "provider": model.provider,
            "baseUrl": model.base_url,
            "reasoning": model.reasoning,
            "input": list(model.input),
            "contextWindow": model.context_window,
            "maxTokens": model.max_tokens,
            "cost": {
                "input": cost.input,
                "output": cost.output,
                "cacheRead": cost.cache_read,
                "cacheWrite": cost.cache_write,
                **({"tiers": [_tier(tier) for tier in cost.tiers]} if cost.tiers else {}),
            },
        },
        ensure_ascii=False,
    )


def listing(provider: str | None, api: str | None, json_lines: bool) -> Sequence[str]:
    """The lines ``trio-agent models`` prints; ValueError naming an unknown provider."""
    if provider is not None and provider not in providers():
        raise ValueError(
            f"--provider names an unknown provider {provider!r}; known: {', '.join(providers())}"
        )
    models = list_models(provider=provider, api=api)
    return [as_json(m) if json_lines else line(m) for m in models]
