"""The model description every stream function receives."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import attrs

__all__ = ["FrozenMapping", "Model", "ModelCost", "ModelCostTier"]


@attrs.frozen(kw_only=True)
class ModelCostTier:
    """The prices per million tokens of a request whose input (``input`` +
    ``cache_read`` + ``cache_write`` tokens) exceeds ``input_tokens_above``.

    Some models (OpenAI's gpt-5.4 and later, Copilot's Grok 4.5 and 4.6) cost more per
    token, for the whole request, once its prompt is long; pi's catalog says so as
    ``cost.tiers``, and :class:`ModelCost` keeps them so the cost of a reply is
    what the provider bills.
    """

    input_tokens_above: int
    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0


def _tiers(value: Iterable[ModelCostTier]) -> tuple[ModelCostTier, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class ModelCost:
    """Prices per million tokens, used to fill :attr:`trio_agent.Usage.cost`.

    ``tiers`` are higher prices for long requests (:class:`ModelCostTier`): the
    tier with the highest ``input_tokens_above`` that the request's input tokens
    exceed prices the whole request, as pi-ai's ``calculateCost`` does; below
    every threshold, the prices here apply.
    """

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    tiers: tuple[ModelCostTier, ...] = attrs.field(default=(), converter=_tiers)

    def rates(self, input_tokens: int) -> ModelCost | ModelCostTier:
        """The prices of a request with ``input_tokens`` tokens of input (cache reads and
        writes included): the highest tier it exceeds, else these."""
        rates: ModelCost | ModelCostTier = self
        above = -1
        for tier in self.tiers:
            if input_tokens > tier.input_tokens_above > above:
                rates, above = tier, tier.input_tokens_above
        return rates


def _frozen_mapping(value: Mapping[str, str]) -> Mapping[str, str]:
    return dict(value)


class FrozenMapping(Mapping[str, Any]):
    """A read-only mapping, hashable, whose nested mappings and lists are frozen too.

    For the catalog's rules on a :class:`Model` (``thinking_levels``,
    ``compat_flags``): they are shared by every model made from one catalog
    entry, so nobody may change them under the others. It equals any mapping
    with the same items, pickles and copies like a dict.
    """

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, Any] | None = None) -> None:
        self._items = {str(key): _freeze(value) for key, value in (items or {}).items()}

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(tuple(self._items.items()))

    def __repr__(self) -> str:
        return f"FrozenMapping({self._items!r})"

    def __reduce__(self) -> tuple[type[FrozenMapping], tuple[dict[str, Any]]]:
        return (FrozenMapping, (self._items,))


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return value if isinstance(value, FrozenMapping) else FrozenMapping(value)
    if isinstance(value, list | tuple):
        return tuple(_freeze(item) for item in value)
    return value


def _frozen_rules(value: Mapping[str, Any]) -> FrozenMapping:
    return value if isinstance(value, FrozenMapping) else FrozenMapping(value)


_NO_RULES = FrozenMapping()


@attrs.frozen(kw_only=True)
class Model:
    """Which model to call, through which wire API, and what it can do.

    ``api`` picks the stream function (``"faux"``, ``"openai-chat"``, ...);
    ``provider`` is a label ("openai", "ollama", ...) passed to
    ``get_api_key``; ``reasoning`` says the model can think; ``input`` is
    ``("text",)`` or ``("text", "image")``; ``compat`` holds
    ``openai_chat.Compat`` switches; ``name`` is the catalog's name for it. Usually made
    by a provider module's ``model()``. Change a model with :func:`attrs.evolve`.

    The makers (``anthropic.model(id)``, ...) fill in what the model catalog
    (:mod:`trio_agent.models`) knows of ``id``; it also brings two mappings of
    the rules a request to the model must follow, in pi-ai's spelling, so that
    a provider can key its behaviour on them:

    ``thinking_levels``
        pi's ``thinkingLevelMap``: a reasoning level (``"off"``,
        ``"minimal"``, ..., ``"xhigh"``, ``"max"``) to the value the API
        takes for it (``{"off": "none", "minimal": None, ...}``). A level
        mapped to ``None`` is one the model does not offer (``"off"``:
        its thinking cannot be turned off); a level absent is sent under
        its own name, except ``"xhigh"`` and ``"max"``, which a model offers
        only where its map names them. A level not offered is asked for as
        the nearest offered one, above it first (pi-ai's
        ``clampThinkingLevel``).
    ``compat_flags``
        pi's per-model ``compat`` record, camelCase keys as pi writes them
        (``forceAdaptiveThinking``, ``supportsTemperature``,
        ``maxTokensField``, ``thinkingFormat``, ...). Not to be confused with
        ``compat``, the typed switches of the OpenAI-compatible provider.

    Both are :class:`FrozenMapping` (empty for a model the catalog does not
    know): the models made from one catalog entry share them, and none can
    change them under the others.
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
    name: str = ""
    """A human name ("Claude Sonnet 4.5"), from the catalog."""
    thinking_levels: Mapping[str, str | None] = attrs.field(
        default=_NO_RULES, converter=_frozen_rules
    )
    compat_flags: Mapping[str, Any] = attrs.field(default=_NO_RULES, converter=_frozen_rules)
