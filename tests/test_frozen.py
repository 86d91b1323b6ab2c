"""fast_init: the events it speeds up are the classes attrs made, with the same __init__."""

from __future__ import annotations

import inspect
from typing import Any

import attrs
import pytest

import trio_agent
from trio_agent import _events
from trio_agent._frozen import fast_init

FAST = [
    cls
    for cls in vars(_events).values()
    if isinstance(cls, type)
    and attrs.has(cls)
    and "<fast_init" in cls.__init__.__code__.co_filename
]


def test_the_hot_events_have_it() -> None:
    names = {cls.__name__ for cls in FAST}
    assert {"TextDelta", "ThinkingDelta", "ToolCallDelta", "MessageUpdate"} <= names
    assert {"MessageStart", "MessageEnd", "ToolExecutionStart", "ToolExecutionEnd"} <= names


def twin(cls: type) -> type:
    """The same class as attrs makes it, without fast_init."""
    fields = {field.name: attrs.field(alias=field.alias) for field in attrs.fields(cls)}
    made: type = attrs.make_class(cls.__name__, fields, frozen=True, slots=True)
    return made


def shape(cls: type) -> list[tuple[str, Any, Any]]:
    """The parameters of ``cls(...)``: names, kinds and defaults."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(cls).parameters.values()]


@pytest.mark.parametrize("cls", FAST, ids=lambda cls: cls.__name__)
def test_it_is_the_attrs_class_with_the_same_signature(cls: type) -> None:
    reference = twin(cls)
    assert shape(cls) == shape(reference)
    values = [object() for _ in attrs.fields(cls)]
    by_position, by_name = (
        cls(*values),
        cls(**{f.alias: v for f, v in zip(attrs.fields(cls), values, strict=True)}),
    )
    assert by_position == by_name
    assert hash(by_position) == hash(by_name)
    assert attrs.astuple(by_position, recurse=False) == tuple(values)
    assert attrs.astuple(reference(*values), recurse=False) == tuple(values)
    for field in attrs.fields(cls):
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            setattr(by_position, field.name, None)
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            delattr(by_position, field.name)
    with pytest.raises(TypeError):
        cls(*values, None)  # one too many


def test_it_refuses_a_class_whose_fields_are_not_plain() -> None:
    @attrs.frozen
    class WithDefault:
        value: int = 0

    with pytest.raises(TypeError, match=r"WithDefault\.value is not a plain field"):
        fast_init(WithDefault)


def test_events_still_read_and_write_as_json() -> None:
    message = trio_agent.AssistantMessage(content=(trio_agent.TextContent("hi"),))
    event: Any = trio_agent.MessageEnd(message)
    assert trio_agent.dumps(event) == trio_agent.dumps(_events.MessageEnd(message=message))
    assert '"type": "message_end"' in trio_agent.dumps(event)
