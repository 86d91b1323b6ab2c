"""The model catalog: the known models of each provider, and what each costs.

::

    from trio_agent import models

    models.find("anthropic", "claude-sonnet-4-5")      # a Model, or None
    models.list(provider="groq")                        # every Groq model, as Models
    models.providers()                                  # ["anthropic", "cerebras", ...]

The makers of :mod:`trio_agent.providers` look their model up here, so
``anthropic.model("claude-sonnet-4-5")`` comes with its limits, prices
(which fill :attr:`trio_agent.Usage.cost`) and request rules
(:attr:`~trio_agent.Model.thinking_levels`,
:attr:`~trio_agent.Model.compat_flags`). The data is pi-ai's generated
catalog (:func:`source` says which release) for the APIs trio_agent speaks;
``scripts/update_models.py`` regenerates it. It is read on the first lookup,
not on import.
"""

from __future__ import annotations

from . import _public
from ._catalog import find as find
from ._catalog import list_models as list  # models.list: shadows the builtin only here
from ._catalog import providers as providers
from ._catalog import source as source
from ._errors import UnknownModelError as UnknownModelError
from ._model import FrozenMapping as FrozenMapping

__all__ = ["FrozenMapping", "UnknownModelError", "find", "list", "providers", "source"]

_public.fixup_module_metadata(__name__, globals())
