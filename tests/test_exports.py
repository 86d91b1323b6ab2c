"""The public façade: a sorted, complete __all__ (house rule 1)."""

from __future__ import annotations

import importlib

import pytest

import trio_agent
import trio_agent.models
import trio_agent.providers


@pytest.mark.parametrize("module", [trio_agent, trio_agent.models, trio_agent.providers])
def test_all_is_sorted_and_importable(module: object) -> None:
    names = module.__all__  # type: ignore[attr-defined]
    assert names == sorted(names)
    for name in names:
        assert hasattr(module, name), name


def test_every_public_class_and_function_is_exported() -> None:
    public = {
        name
        for name, value in vars(trio_agent).items()
        if not name.startswith("_") and getattr(value, "__module__", "").startswith("trio_agent._")
    }
    assert public <= set(trio_agent.__all__)


def test_the_implementation_modules_are_private() -> None:
    for name in ("_loop", "_execution", "_messages", "_events", "_json", "_stream", "_tools"):
        assert importlib.import_module(f"trio_agent.{name}")
    assert not [name for name in trio_agent.__all__ if name.startswith("_")]
