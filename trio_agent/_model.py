"""The model description every stream function receives."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

__all__ = ["Model", "ModelCost"]


@attrs.frozen(kw_only=True)
class ModelCost:
    """Prices per million tokens, used to fill :attr:`trio_agent.Usage.cost`."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0


def _frozen_mapping(value: Mapping[str, str]) -> Mapping[str, str]:
    return dict(value)


@attrs.frozen(kw_only=True)
class Model:
    """Which model to call, through which wire API, and what it can do.

    ``api`` picks the stream function (``"faux"``, ``"openai-chat"``, ...);
    ``provider`` is a label ("openai", "ollama", ...) passed to
    ``get_api_key``. Change a model with :func:`attrs.evolve`.
    """

    id: str
    api: str
    provider: str = ""
    base_url: str = ""
    reasoning: bool = False
    context_window: int = 128_000
    max_tokens: int = 16_384
    input: tuple[str, ...] = ("text",)
    headers: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_mapping)
    compat: Any = None
    cost: ModelCost = ModelCost()
