"""fast_init: the classes it speeds up are the classes attrs made, with the same __init__."""

from __future__ import annotations

import copy
import importlib
import inspect
import pickle
import pkgutil
import types
import typing
from collections.abc import Callable
from typing import Any

import attrs
import pytest
from hypothesis import given

import trio_agent
from tests._support import examples
from trio_agent import _events, _messages
from trio_agent._frozen import fast_init, maker
from trio_agent.testing import strategies as ts

FAST = [
    cls
    for module in (_events, _messages)
    for cls in vars(module).values()
    if isinstance(cls, type)
    and attrs.has(cls)
    and "<fast_init" in cls.__init__.__code__.co_filename
]


EVENTS = [cls for cls in FAST if cls.__name__ in _events.__all__]


def test_the_event_made_per_delta_through_its_constructor_has_it() -> None:
    assert "MessageUpdate" in {cls.__name__ for cls in FAST}


def twin(cls: type) -> type:
    """The same class as attrs makes it, without fast_init."""
    fields = {
        field.name: attrs.field(
            default=field.default,
            converter=field.converter,
            kw_only=field.kw_only,
            alias=field.alias,
        )
        for field in attrs.fields(cls)
    }
    made: type = attrs.make_class(cls.__name__, fields, frozen=True, slots=True)
    return made


def shape(cls: type) -> list[tuple[str, Any, Any]]:
    """The parameters of ``cls(...)``: names, kinds and defaults."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(cls).parameters.values()]


def arguments(instance: Any) -> dict[str, Any]:
    """The keyword arguments that make ``instance`` again."""
    return {f.alias: getattr(instance, f.name) for f in attrs.fields(type(instance))}


@pytest.mark.parametrize("cls", FAST, ids=lambda cls: cls.__name__)
def test_it_has_the_signature_attrs_gives(cls: type) -> None:
    assert shape(cls) == shape(twin(cls))


def event_values(cls: type) -> list[Any]:
    """A value for each field of the event class ``cls``, in order."""
    if cls is _events.TurnEnd:  # its converters want sequences
        return [None, ()]
    if cls is _events.AgentEnd:
        return [()]
    return [object() for _ in attrs.fields(cls)]


@pytest.mark.parametrize("cls", EVENTS, ids=lambda cls: cls.__name__)
def test_an_event_is_frozen_hashed_and_compared_as_before(cls: type) -> None:
    values = event_values(cls)
    by_position = cls(*values)
    by_name = cls(**arguments(by_position))
    assert by_position == by_name
    assert hash(by_position) == hash(by_name)
    assert attrs.astuple(by_position, recurse=False) == attrs.astuple(
        twin(cls)(*values), recurse=False
    )
    for field in attrs.fields(cls):
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            setattr(by_position, field.name, None)
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            delattr(by_position, field.name)
    with pytest.raises(TypeError):
        cls(*values, None)  # one too many


@examples(0.2)
@given(ts.messages())
def test_a_message_made_again_is_the_same_with_and_without_fast_init(message: Any) -> None:
    cls = type(message)
    again = cls(**arguments(message))
    assert again == message
    assert attrs.astuple(twin(cls)(**arguments(message)), recurse=False) == attrs.astuple(
        again, recurse=False
    )
    for block in getattr(message, "content", ()):
        if not isinstance(block, str):
            assert type(block)(**arguments(block)) == block


def test_defaults_factories_and_converters_apply_as_attrs_applies_them() -> None:
    message = trio_agent.AssistantMessage(content=[trio_agent.TextContent("hi")])
    assert message.content == (trio_agent.TextContent("hi"),)  # the converter made a tuple
    assert isinstance(message.timestamp, int)  # the factory ran
    assert message.stop_reason == "stop"
    assert trio_agent.AssistantMessage(timestamp=7).timestamp == 7
    call = trio_agent.ToolCall("c1", "f")
    assert call.arguments == {}
    assert call.arguments is not trio_agent.ToolCall("c2", "f").arguments  # a fresh dict each
    with pytest.raises(TypeError):
        trio_agent.AssistantMessage("positional")  # type: ignore[call-arg, arg-type]  # refused
    with pytest.raises(TypeError):
        trio_agent.ToolResultMessage(tool_call_id="c1")  # type: ignore[call-arg]  # refused


@fast_init
@attrs.frozen
class Defaulted:
    """A class with each kind of field fast_init copies: it must build what attrs builds."""

    first: int
    items: tuple[int, ...] = attrs.field(default=[1], converter=tuple)
    table: dict[str, int] = attrs.Factory(dict)
    label: str = attrs.field(default="x", kw_only=True)


def test_a_class_of_defaults_factories_converters_and_keywords_is_built_as_attrs_builds_it() -> (
    None
):
    plain = twin(Defaulted)
    assert shape(Defaulted) == shape(plain)
    assert "<fast_init" in Defaulted.__init__.__code__.co_filename
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((1,), {}),
        ((1, [2, 3]), {}),
        ((1, (), {"k": 2}), {"label": "y"}),
    ]
    for args, kwargs in calls:
        made = Defaulted(*args, **kwargs)
        assert attrs.astuple(made, recurse=False) == attrs.astuple(
            plain(*args, **kwargs), recurse=False
        )
    assert Defaulted(1).items == (1,)  # the converter applies to the default too
    assert Defaulted(1).table is not Defaulted(1).table  # a fresh dict each
    with pytest.raises(TypeError):
        Defaulted()  # type: ignore[call-arg]  # the field without a default is required
    with pytest.raises(TypeError):
        Defaulted(1, (), {}, "y")  # type: ignore[call-arg]  # label is keyword-only
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        Defaulted(1).first = 2  # type: ignore[misc]  # frozen, as attrs made it


@attrs.frozen
class Validated:
    """A class whose constructor checks a field: neither fast_init nor maker copies it."""

    value: int = attrs.field(validator=attrs.validators.instance_of(int))


@attrs.frozen
class Posted:
    """A class whose constructor runs a hook: neither fast_init nor maker copies it."""

    value: int

    def __attrs_post_init__(self) -> None:
        pass


def test_it_refuses_what_it_cannot_copy() -> None:
    with pytest.raises(TypeError, match=r"Validated\.value is not a field fast_init can copy"):
        fast_init(Validated)
    with pytest.raises(TypeError, match=r"Posted has an __attrs_pre_init__ or __attrs_post_init__"):
        fast_init(Posted)


def test_events_and_messages_still_read_and_write_as_json() -> None:
    message = trio_agent.AssistantMessage(content=(trio_agent.TextContent("hi"),), timestamp=1)
    assert trio_agent.loads(trio_agent.dumps([message])) == [message]
    assert '"type": "message_end"' in trio_agent.dumps(_events.MessageEnd(message))


# --- maker ------------------------------------------------------------------------------


def made_again(instance: Any) -> Any:
    """``instance`` made again by the maker of its class, from its fields in order."""
    fields = attrs.fields(type(instance))
    return maker(type(instance))(*(getattr(instance, field.name) for field in fields))


@pytest.mark.parametrize("cls", EVENTS, ids=lambda cls: cls.__name__)
def test_a_maker_makes_the_event_the_class_makes(cls: type) -> None:
    values = event_values(cls)
    expected = cls(*values)
    made = made_again(expected)
    assert type(made) is cls
    assert made == expected
    assert hash(made) == hash(expected)
    assert repr(made) == repr(expected)
    for field in attrs.fields(cls):
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            setattr(made, field.name, None)
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            delattr(made, field.name)


@examples(0.2)
@given(ts.messages())
def test_a_maker_makes_messages_that_copy_pickle_and_serialize_alike(message: Any) -> None:
    made = made_again(message)
    assert type(made) is type(message)
    assert made == message
    assert copy.deepcopy(made) == message
    assert pickle.loads(pickle.dumps(made)) == message
    assert trio_agent.dumps([made]) == trio_agent.dumps([message])
    for block in getattr(message, "content", ()):
        if not isinstance(block, str):
            assert made_again(block) == block


def test_a_maker_takes_every_field_positionally_and_nothing_else() -> None:
    make = maker(trio_agent.ToolCall)
    assert list(inspect.signature(make).parameters) == [
        "id",
        "name",
        "arguments",
        "thought_signature",
        "extra",
    ]
    with pytest.raises(TypeError):
        make("c1", "f", {})  # no defaults
    partial_event = maker(_events.TextDelta)
    assert "partial" in inspect.signature(partial_event).parameters  # the alias of _partial


def test_a_maker_refuses_what_is_not_a_slotted_attrs_class() -> None:
    @attrs.define(slots=False)
    class Dicted:
        value: int

    class Plain:
        __slots__ = ("value",)

    for cls in (Dicted, Plain):
        with pytest.raises(TypeError, match=f"{cls.__name__} is not a slotted attrs class"):
            maker(cls)


def test_a_maker_refuses_a_class_whose_constructor_does_more_than_store() -> None:
    @attrs.frozen
    class Hidden:
        value: int = attrs.field(init=False, default=0)

    @attrs.frozen(cache_hash=True)
    class Cached:
        value: int

    @attrs.frozen
    class Clashing:
        value: int = attrs.field(alias="_twin")

    with pytest.raises(TypeError, match=r"Validated\.value is not a field a maker can store"):
        maker(Validated)
    with pytest.raises(TypeError, match=r"Hidden\.value is not a field a maker can store"):
        maker(Hidden)
    with pytest.raises(TypeError, match="Posted has an __attrs_pre_init__ or __attrs_post_init__"):
        maker(Posted)
    with pytest.raises(TypeError, match="Cached caches its hash"):
        maker(Cached)
    with pytest.raises(TypeError, match=r"Clashing\.value is not a field a maker can store"):
        maker(Clashing)


def test_makers_of_a_class_share_one_twin() -> None:
    maker(trio_agent.ToolCall)
    before = trio_agent.ToolCall.__subclasses__()
    make = maker(trio_agent.ToolCall)
    assert trio_agent.ToolCall.__subclasses__() == before
    assert len(before) == 1
    assert make.__module__ == trio_agent.ToolCall.__module__


def test_a_maker_makes_the_plain_attrs_classes_the_loop_makes_with_it() -> None:
    from trio_agent.providers import faux

    context = trio_agent.LlmContext("system", [trio_agent.UserMessage.text("hi")], ())
    assert made_again(context) == context
    assert type(made_again(context)) is trio_agent.LlmContext
    model = faux.model(["ok"])
    call = faux.ScriptedCall(model=model, context=context, options=trio_agent.StreamOptions())
    assert made_again(call) == call
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        made_again(call).model = model


# --- makers' annotations ----------------------------------------------------------------


def package_makers() -> list[tuple[types.ModuleType, str, Any]]:
    """Every maker held in a global of a module of the package: (module, name, maker)."""
    found: dict[int, tuple[types.ModuleType, str, Any]] = {}
    for info in pkgutil.walk_packages(trio_agent.__path__, "trio_agent."):
        # __main__ runs the CLI; the pytest plugin, once imported here, could no
        # longer be rewritten by a pytest that a test starts with it.
        if info.name.endswith(".__main__") or info.name == "trio_agent.testing.pytest_plugin":
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if getattr(value, "__maker_of__", None) is None:
                continue
            # A maker imported into another module: checked where it is annotated.
            if id(value) not in found or name in module.__annotations__:
                found[id(value)] = (module, name, value)
    return sorted(found.values(), key=lambda entry: (entry[0].__name__, entry[1]))


MAKERS = package_makers()


def hint(annotation: Any, module: types.ModuleType) -> Any:
    """``annotation`` resolved in ``module`` (NameError: a name it cannot import at run time)."""
    holder = types.SimpleNamespace(__annotations__={"value": annotation})
    return typing.get_type_hints(holder, vars(module))["value"]


def members(annotation: Any) -> tuple[Any, ...]:
    """The types of a union, or the annotation alone."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return typing.get_args(annotation)
    return (annotation,)


def narrower(parameter: Any, field: Any) -> bool:
    """Whether a parameter typed ``parameter`` passes only what a field typed ``field`` holds."""
    if field is Any or parameter == field:
        return True
    return all(
        any(
            part == kind
            or (
                isinstance(part, type)
                and isinstance(kind, type)
                and (
                    # A protocol: the parameter's class has its methods.
                    all(hasattr(part, name) for name in vars(kind) if not name.startswith("_"))
                    if getattr(kind, "_is_protocol", False)
                    else issubclass(part, kind)
                )
            )
            for kind in members(field)
        )
        for part in members(parameter)
    )


def spelled(cls: type) -> str:
    """The annotation a maker of ``cls`` wants, as source text."""
    names = [
        field.type
        if isinstance(field.type, str)
        else getattr(field.type, "__name__", str(field.type).replace("typing.", ""))
        for field in attrs.fields(cls)
    ]
    return f"Callable[[{', '.join(names)}], {cls.__name__}]"


def test_the_makers_are_found() -> None:
    names = {f"{module.__name__}.{name}" for module, name, _ in MAKERS}
    assert {"trio_agent._stream._text_delta", "trio_agent._stream._assistant_message"} <= names


@pytest.mark.parametrize(
    ("module", "name", "make"),
    MAKERS,
    ids=[f"{module.__name__}.{name}" for module, name, _ in MAKERS],
)
def test_a_maker_is_annotated_with_its_fields_in_order(
    module: types.ModuleType, name: str, make: Any
) -> None:
    cls = make.__maker_of__
    wanted = f"annotate {module.__name__}.{name} as {spelled(cls)}"
    assert name in module.__annotations__, wanted
    annotation = hint(module.__annotations__[name], module)
    assert typing.get_origin(annotation) is Callable, wanted
    parameters, returned = typing.get_args(annotation)
    assert returned is cls, wanted
    fields = attrs.fields(cls)
    assert len(parameters) == len(fields), wanted
    for parameter, field in zip(parameters, fields, strict=True):
        try:
            field_type = typing.get_type_hints(cls)[field.name]  # in its defining module
        except NameError:  # a name imported only for type checking: the count must do
            continue
        assert narrower(parameter, field_type), f"{field.name}: {parameter} for {field_type}"
