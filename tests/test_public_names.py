"""Public names report the package that exports them; the exception tree is complete."""

from __future__ import annotations

import builtins
import importlib
import pickle
import re
import sys
import types
import typing
from types import ModuleType
from typing import Any

import pytest

import trio_agent
import trio_agent.models
import trio_agent.providers
import trio_agent.testing
from trio_agent import _errors

PACKAGES = [trio_agent, trio_agent.providers, trio_agent.testing, trio_agent.models]

# The public modules that may define exceptions a user meets (trio_agent.testing.strategies is
# checked on its own, below). Not trio_agent.testing.pytest_plugin, which defines none: imported
# here, it could not be assertion-rewritten when the plugin's own tests load it.
PUBLIC_MODULES = [
    *PACKAGES,
    *(
        importlib.import_module(f"trio_agent.providers.{name}")
        for name in ("anthropic", "faux", "google", "openai_chat", "openai_responses")
    ),
]


def _exported(package: ModuleType) -> list[tuple[str, Any]]:
    """The classes and functions in ``package.__all__``, with their exported names."""
    names: list[str] = package.__all__
    values = [(name, getattr(package, name)) for name in names]
    return [(name, value) for name, value in values if isinstance(value, type | types.FunctionType)]


def _private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split("."))


@pytest.mark.parametrize("package", PACKAGES, ids=lambda package: package.__name__)
def test_public_classes_and_functions_report_a_public_module(package: ModuleType) -> None:
    for name, value in _exported(package):
        if value.__qualname__ != name:
            continue  # exported under another name (models.list): pickle could not find it there
        assert not _private(value.__module__), (name, value.__module__)
        # What pickle does: the object is found again at module.qualname.
        assert getattr(sys.modules[value.__module__], value.__qualname__) is value, name


@pytest.mark.parametrize(
    ("value", "module", "qualname"),
    [
        (trio_agent.UserMessage, "trio_agent", "UserMessage"),
        (trio_agent.Agent, "trio_agent", "Agent"),
        (trio_agent.AgentBusyError, "trio_agent", "AgentBusyError"),
        (trio_agent.TrioAgentError, "trio_agent", "TrioAgentError"),
        (trio_agent.dumps, "trio_agent", "dumps"),
        (trio_agent.tool, "trio_agent", "tool"),
        # Exported by both: the outer package's name.
        (trio_agent.providers.LlmContext, "trio_agent", "LlmContext"),
        (
            trio_agent.providers.AssistantMessageBuilder,
            "trio_agent.providers",
            "AssistantMessageBuilder",
        ),
        (trio_agent.providers.register, "trio_agent.providers", "register"),
        (trio_agent.testing.EventRecorder, "trio_agent.testing", "EventRecorder"),
        (trio_agent.testing.assert_cancel_safe, "trio_agent.testing", "assert_cancel_safe"),
        (trio_agent.models.find, "trio_agent.models", "find"),
        (trio_agent.models.FrozenMapping, "trio_agent.models", "FrozenMapping"),
        # Defined in a public module, or exported under another name: left alone.
        (trio_agent.testing.ScriptedModel, "trio_agent.providers.faux", "ScriptedModel"),
        (trio_agent.testing.reply, "trio_agent.providers.faux", "reply"),
        (trio_agent.models.list, "trio_agent._catalog", "list_models"),
    ],
    ids=lambda value: getattr(value, "__qualname__", None) or str(value),
)
def test_the_module_is_rewritten_and_the_qualname_kept(
    value: Any, module: str, qualname: str
) -> None:
    assert (value.__module__, value.__qualname__) == (module, qualname)


@pytest.mark.parametrize(
    "value",
    [
        trio_agent.UserMessage.text("hi"),
        trio_agent.ToolCall(id="c1", name="echo", arguments={"text": "hi"}),
        trio_agent.ToolResultMessage(
            tool_call_id="c1", tool_name="echo", content=[trio_agent.TextContent("hi")]
        ),
        trio_agent.AssistantMessage(content=[trio_agent.TextContent("hello")]),
        trio_agent.dumps,
        trio_agent.UserMessage,
    ],
    ids=lambda value: getattr(value, "__qualname__", None) or type(value).__qualname__,
)
def test_pickling_round_trips(value: object) -> None:
    assert pickle.loads(pickle.dumps(value)) == value


def test_pickling_an_exception_round_trips() -> None:
    error = pickle.loads(pickle.dumps(trio_agent.TranscriptError("bad")))
    assert (type(error), error.args) == (trio_agent.TranscriptError, ("bad",))


def test_repr_and_json_are_unaffected() -> None:
    message = trio_agent.UserMessage.text("hi")
    assert repr(message).startswith("UserMessage(content=(TextContent(text='hi', ")
    assert trio_agent.loads(trio_agent.dumps([message])) == [message]


@pytest.mark.parametrize(
    "cls",
    [
        trio_agent.UserMessage,
        trio_agent.TextDelta,
        trio_agent.AgentLoopConfig,
        trio_agent.testing.ScriptedModel,
        trio_agent.testing.ScriptedResponse,
    ],
    ids=lambda cls: cls.__qualname__,
)
def test_annotations_still_resolve(cls: type) -> None:
    # typing.get_type_hints looks string annotations up in the module __module__ names.
    assert typing.get_type_hints(cls)


def _tree() -> dict[str, str]:
    """The classes drawn in ``_errors``'s docstring, each with the builtin it names."""
    doc = _errors.__doc__ or ""
    drawn = re.findall(r"^ {4}(?:[├└]── )?(\w+)\((\w+)\)", doc, flags=re.MULTILINE)
    return dict(drawn)


def _exceptions(module: ModuleType) -> set[type[BaseException]]:
    """The exception classes in ``module.__all__``."""
    values = [getattr(module, name) for name in module.__all__]
    return {
        value for value in values if isinstance(value, type) and issubclass(value, BaseException)
    }


def _public_exceptions() -> set[type[BaseException]]:
    return {cls for module in PUBLIC_MODULES for cls in _exceptions(module)}


def test_the_exception_tree_is_complete_and_accurate() -> None:
    tree = _tree()
    assert tree.pop("TrioAgentError") == "Exception"
    exceptions = _public_exceptions() - {trio_agent.TrioAgentError}
    assert {cls.__name__ for cls in exceptions} == set(tree)
    for cls in exceptions:
        assert cls.__bases__ == (trio_agent.TrioAgentError, getattr(builtins, tree[cls.__name__]))


def test_every_public_exception_derives_from_trio_agent_error() -> None:
    exceptions = _public_exceptions()
    assert trio_agent.AgentBusyError in exceptions
    for cls in exceptions:
        assert issubclass(cls, trio_agent.TrioAgentError), cls


def test_the_strategies_exceptions_are_stand_ins_for_the_users() -> None:
    strategies = importlib.import_module("trio_agent.testing.strategies")
    theirs = _exceptions(strategies)
    assert {cls.__name__ for cls in theirs} == {"BehaviourError", "InjectedFailure"}
    assert not any(issubclass(cls, trio_agent.TrioAgentError) for cls in theirs)
    assert all(cls.__name__ in (_errors.__doc__ or "") for cls in theirs)
