"""The public façade: a sorted, complete __all__ (house rule 1)."""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

import trio_agent
import trio_agent.models
import trio_agent.providers


@pytest.mark.parametrize("module", [trio_agent, trio_agent.models, trio_agent.providers])
def test_all_is_sorted_and_importable(module: ModuleType) -> None:
    names = module.__all__
    assert names == sorted(names)
    for name in names:
        assert hasattr(module, name), name


def _ours(module: str) -> bool:
    """Defined in a private module of trio_agent (which reports it as ``trio_agent``)."""
    return module == "trio_agent" or module.startswith("trio_agent._")


def test_every_public_class_and_function_is_exported() -> None:
    public = {
        name
        for name, value in vars(trio_agent).items()
        if not name.startswith("_") and _ours(getattr(value, "__module__", ""))
    }
    assert public <= set(trio_agent.__all__)


def test_the_implementation_modules_are_private() -> None:
    for name in ("_loop", "_execution", "_messages", "_events", "_json", "_stream", "_tools"):
        assert importlib.import_module(f"trio_agent.{name}")
    assert not [name for name in trio_agent.__all__ if name.startswith("_")]
