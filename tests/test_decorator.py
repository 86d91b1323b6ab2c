"""Tests of the ``@tool`` decorator (trio_agent/_decorator.py).

This module uses ``from __future__ import annotations``, so every tool below also
checks that string annotations resolve; the types they name live at module level.
"""

from __future__ import annotations

import enum
import functools
import inspect
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal, NewType, NotRequired, Optional, TypedDict

import pytest
import trio
import trio.testing

from trio_agent import AgentContext, AgentEvent, AgentLoopConfig, run_agent_loop
from trio_agent._decorator import tool
from trio_agent._errors import ToolDefinitionError
from trio_agent._messages import TextContent, ToolResult, ToolResultMessage, UserMessage
from trio_agent._tools import AgentTool, ToolUpdate
from trio_agent.providers import faux

if TYPE_CHECKING:
    from pathlib import Path as CheckedPath  # unresolvable at run time, on purpose

    from trio_agent._tools import ToolUpdate as CheckedToolUpdate


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Mixed(enum.Enum):
    ONE = 1
    TWO = "two"


class Point(TypedDict):
    x: int
    y: Annotated[int, "The row."]
    label: NotRequired[str]


class Options(TypedDict, total=False):
    verbose: bool
    color: Color


class Node(TypedDict):
    children: list[Node]


UserId = NewType("UserId", int)


def ignore(partial: ToolResult) -> None:
    """An ``on_update`` that drops the updates."""


def schema_of(properties: dict[str, Any], required: Sequence[str] | None = None) -> dict[str, Any]:
    """The parameters object of a tool; every property is required unless ``required`` says."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else list(required),
        "additionalProperties": False,
    }


# --- the tool and its description -----------------------------------------------


def test_bare_decorator_makes_an_agent_tool_named_after_the_function() -> None:
    @tool
    async def read_file(path: str) -> str:
        """Read a text file."""
        await trio.lowlevel.checkpoint()
        return path

    assert isinstance(read_file, AgentTool)
    assert (read_file.name, read_file.description) == ("read_file", "Read a text file.")


def test_decorator_with_keywords_overrides_name_and_description() -> None:
    @tool(name="grep", description="Search files.", label="Search", execution_mode="sequential")
    def search(pattern: str) -> str:
        """Not this."""
        return pattern

    expected = ("grep", "Search files.", "Search", "sequential")
    assert expected == (search.name, search.description, search.label, search.execution_mode)


def test_tool_called_on_a_function_with_keywords() -> None:
    def shim(arguments: Any) -> Any:
        return arguments

    def search(pattern: str) -> str:
        return pattern

    agent_tool = tool(search, name="grep", prepare_arguments=shim)

    assert (agent_tool.name, agent_tool.prepare_arguments) == ("grep", shim)


def test_a_lambda_with_a_name_is_a_tool() -> None:
    agent_tool = tool(lambda: "pong", name="ping")

    assert agent_tool.name == "ping"


def test_no_docstring_is_an_empty_description() -> None:
    @tool
    def noop() -> None:
        pass

    assert noop.description == ""


def test_description_is_the_docstring_before_its_sections() -> None:
    @tool
    def fetch(url: str) -> str:
        """Fetch a URL.

        Follows redirects.

        Returns:
            The body.
        """
        return url

    assert fetch.description == "Fetch a URL.\n\nFollows redirects."


def test_google_args_describe_the_parameters() -> None:
    @tool
    def copy(source: str, target: str, overwrite: bool = False) -> None:
        """Copy a file.

        Args:
            source (str): The file to copy.
            target: Where to copy it,
                relative to the root.
            overwrite: Replace an existing target.

        Raises:
            OSError: when it fails.
        """

    expected = schema_of(
        {
            "source": {"type": "string", "description": "The file to copy."},
            "target": {"type": "string", "description": "Where to copy it, relative to the root."},
            "overwrite": {
                "type": "boolean",
                "description": "Replace an existing target.",
                "default": False,
            },
        },
        required=["source", "target"],
    )
    assert (copy.description, expected) == ("Copy a file.", copy.parameters)


def test_rest_params_describe_the_parameters() -> None:
    @tool
    def move(source: str, target: str) -> None:
        """Move a file.

        :param source: The file to move.
        :param str target: Where to move it,
            relative to the root.
        :returns: nothing.
        """

    expected = schema_of(
        {
            "source": {"type": "string", "description": "The file to move."},
            "target": {"type": "string", "description": "Where to move it, relative to the root."},
        }
    )
    assert (move.description, expected) == ("Move a file.", move.parameters)


def test_annotated_description_wins_over_the_docstring() -> None:
    @tool
    def find(pattern: Annotated[str, "A regular expression."]) -> None:
        """Find.

        Args:
            pattern: A glob.
        """

    expected = schema_of({"pattern": {"type": "string", "description": "A regular expression."}})
    assert expected == find.parameters


# --- annotations → schema ---------------------------------------------------------


def test_simple_types() -> None:
    @tool
    def f(s: str, i: int, x: float, b: bool, n: None) -> None:
        pass

    expected = schema_of(
        {
            "s": {"type": "string"},
            "i": {"type": "integer"},
            "x": {"type": "number"},
            "b": {"type": "boolean"},
            "n": {"type": "null"},
        }
    )
    assert expected == f.parameters


def test_arrays() -> None:
    @tool
    def f(a: list[str], b: Sequence[int], c: tuple[float, ...], d: list[list[bool]]) -> None:
        pass

    expected = schema_of(
        {
            "a": {"type": "array", "items": {"type": "string"}},
            "b": {"type": "array", "items": {"type": "integer"}},
            "c": {"type": "array", "items": {"type": "number"}},
            "d": {"type": "array", "items": {"type": "array", "items": {"type": "boolean"}}},
        }
    )
    assert expected == f.parameters


def test_objects() -> None:
    @tool
    def f(a: dict[str, int], b: Mapping[str, list[str]], c: dict[str, Any]) -> None:
        pass

    expected = schema_of(
        {
            "a": {"type": "object", "additionalProperties": {"type": "integer"}},
            "b": {
                "type": "object",
                "additionalProperties": {"type": "array", "items": {"type": "string"}},
            },
            "c": {"type": "object", "additionalProperties": {}},
        }
    )
    assert expected == f.parameters


def test_bare_containers() -> None:
    @tool
    def f(a: list, b: dict, c: tuple) -> None:  # type: ignore[type-arg]  # bare on purpose
        pass

    expected = schema_of({"a": {"type": "array"}, "b": {"type": "object"}, "c": {"type": "array"}})
    assert expected == f.parameters


def test_literal_of_one_type_carries_the_type() -> None:
    @tool
    def f(mode: Literal["r", "w"]) -> None:
        pass

    assert schema_of({"mode": {"enum": ["r", "w"], "type": "string"}}) == f.parameters


def test_literal_of_mixed_types_is_a_bare_enum() -> None:
    @tool
    def f(level: Literal[1, "max", None]) -> None:
        pass

    assert schema_of({"level": {"enum": [1, "max", None]}}) == f.parameters


def test_enum_is_an_enum_of_its_values() -> None:
    @tool
    def f(color: Color, mixed: Mixed) -> None:
        pass

    expected = schema_of(
        {"color": {"enum": ["red", "green"], "type": "string"}, "mixed": {"enum": [1, "two"]}}
    )
    assert expected == f.parameters


def test_optional_is_any_of_with_null() -> None:
    @tool
    def f(a: int | None, b: Optional[list[str]]) -> None:  # noqa: UP045  # Optional on purpose
        pass

    expected = schema_of(
        {
            "a": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "b": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]},
        }
    )
    assert expected == f.parameters


def test_union_is_any_of() -> None:
    @tool
    def f(value: int | str) -> None:
        pass

    expected = schema_of({"value": {"anyOf": [{"type": "integer"}, {"type": "string"}]}})
    assert expected == f.parameters


def test_typeddict_is_an_object_of_its_keys() -> None:
    @tool
    def f(point: Point, options: Options) -> None:
        pass

    expected = schema_of(
        {
            "point": {
                "type": "object",
                "properties": {
                    "x": {"type": "integer"},
                    "y": {"type": "integer", "description": "The row."},
                    "label": {"type": "string"},
                },
                "required": ["x", "y"],
                "additionalProperties": False,
            },
            "options": {
                "type": "object",
                "properties": {
                    "verbose": {"type": "boolean"},
                    "color": {"enum": ["red", "green"], "type": "string"},
                },
                "required": [],
                "additionalProperties": False,
            },
        }
    )
    assert expected == f.parameters


def test_any_is_unconstrained() -> None:
    @tool
    def f(value: Any) -> None:
        pass

    assert schema_of({"value": {}}) == f.parameters


def test_newtype_is_its_supertype() -> None:
    @tool
    def f(user: UserId) -> None:
        pass

    assert schema_of({"user": {"type": "integer"}}) == f.parameters


def test_defaults_are_not_required_and_carried_when_json() -> None:
    @tool
    def f(
        path: str,
        limit: int = 10,
        note: str | None = None,
        color: Color = Color.GREEN,
        shape: tuple[int, ...] = (1, 2),
        extra: Any = ignore,  # not JSON: no "default"
    ) -> None:
        pass

    expected = schema_of(
        {
            "path": {"type": "string"},
            "limit": {"type": "integer", "default": 10},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            "color": {"enum": ["red", "green"], "type": "string", "default": "green"},
            "shape": {"type": "array", "items": {"type": "integer"}, "default": [1, 2]},
            "extra": {},
        },
        required=["path"],
    )
    assert expected == f.parameters


def test_injected_parameters_are_not_in_the_schema() -> None:
    @tool
    async def f(text: str, tool_call_id: str, on_update: ToolUpdate) -> None:
        pass

    assert schema_of({"text": {"type": "string"}}) == f.parameters


def test_unannotated_injected_parameters_are_accepted() -> None:
    @tool
    async def f(tool_call_id, on_update) -> None:  # type: ignore[no-untyped-def]  # on purpose
        pass

    assert schema_of({}) == f.parameters


def test_injected_annotations_need_not_resolve_at_run_time() -> None:
    @tool
    def f(text: str, on_update: CheckedToolUpdate) -> CheckedPath:
        raise AssertionError("not called")

    assert schema_of({"text": {"type": "string"}}) == f.parameters


# --- calling ----------------------------------------------------------------------


async def test_arguments_are_passed_by_keyword() -> None:
    @tool
    async def f(a: int, b: str = "b", c: str = "c") -> str:
        await trio.lowlevel.checkpoint()
        return f"{a}{b}{c}"

    assert ToolResult.text("1xc") == await f.execute("call-1", {"b": "x", "a": 1}, ignore)


async def test_the_call_id_is_injected() -> None:
    @tool
    async def f(tool_call_id: str) -> str:
        await trio.lowlevel.checkpoint()
        return tool_call_id

    assert ToolResult.text("call-1") == await f.execute("call-1", {}, ignore)


async def test_an_async_tool_gets_the_loops_on_update() -> None:
    seen: list[ToolResult] = []

    @tool
    async def f(on_update: ToolUpdate) -> str:
        on_update(ToolResult.text("half"))
        await trio.lowlevel.checkpoint()
        return "done"

    await f.execute("call-1", {}, seen.append)

    assert [ToolResult.text("half")] == seen


async def test_enum_values_become_members() -> None:
    @tool
    async def f(color: Color, colors: list[Color], maybe: Color | None, options: Options) -> str:
        await trio.lowlevel.checkpoint()
        return repr((color, colors, maybe, options))

    args = {"color": "red", "colors": ["green"], "maybe": None, "options": {"color": "green"}}
    result = await f.execute("call-1", args, ignore)

    expected = (Color.RED, [Color.GREEN], None, {"color": Color.GREEN})
    assert ToolResult.text(repr(expected)) == result


async def test_a_tuple_parameter_gets_a_tuple() -> None:
    @tool
    async def f(items: tuple[str, ...]) -> str:
        await trio.lowlevel.checkpoint()
        return repr(items)

    assert ToolResult.text("('a', 'b')") == await f.execute("call-1", {"items": ["a", "b"]}, ignore)


@tool
async def find(query: str, limit: int | None = None, height: int = 100) -> str:
    """Find things."""
    await trio.lowlevel.checkpoint()
    return repr((query, limit, height))


async def test_a_null_for_a_parameter_with_a_default_gives_the_default() -> None:
    # `limit` allows None, so its null stays; `height` does not, so its null is dropped.
    args = find.validate_arguments({"query": "q", "limit": None, "height": None})
    assert ToolResult.text("('q', None, 100)") == await find.execute("call-1", args, ignore)


async def test_the_loop_gives_a_tool_its_defaults_for_nulls() -> None:
    call = faux.tool_call("find", {"query": "q", "limit": None, "height": None}, id="t1")

    async def listener(event: AgentEvent) -> None:
        await trio.lowlevel.checkpoint()

    messages = await run_agent_loop(
        [UserMessage.text("go")],
        AgentContext(tools=[find]),
        AgentLoopConfig(model=faux.model([faux.reply(call), "done"])),
        listener,
    )

    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    expected = [(False, (TextContent("('q', None, 100)"),))]
    assert expected == [(m.is_error, m.content) for m in results]


async def test_a_null_for_a_typeddict_key_that_is_not_required_leaves_it_out() -> None:
    @tool
    async def f(point: Point) -> str:
        await trio.lowlevel.checkpoint()
        return repr(point)

    args = f.validate_arguments({"point": {"x": 1, "y": 2, "label": None}})
    assert ToolResult.text(repr({"x": 1, "y": 2})) == await f.execute("call-1", args, ignore)


async def test_a_null_for_a_required_optional_parameter_is_none() -> None:
    @tool
    async def f(maybe: int | None, color: Color | None) -> str:
        await trio.lowlevel.checkpoint()
        return repr((maybe, color))

    args = f.validate_arguments({"maybe": None, "color": None})
    assert ToolResult.text("(None, None)") == await f.execute("call-1", args, ignore)


async def test_an_async_tool_runs_in_the_trio_thread() -> None:
    @tool
    async def f() -> int:
        await trio.lowlevel.checkpoint()
        return threading.get_ident()

    result = await f.execute("call-1", {}, ignore)

    assert threading.get_ident() == result.details


async def test_a_sync_tool_runs_in_a_worker_thread() -> None:
    @tool
    def f() -> int:
        return threading.get_ident()

    result = await f.execute("call-1", {}, ignore)

    assert isinstance(result.details, int)
    assert threading.get_ident() != result.details


async def test_on_update_of_a_sync_tool_runs_in_the_trio_thread() -> None:
    seen: list[tuple[ToolResult, int]] = []

    def on_update(partial: ToolResult) -> None:
        seen.append((partial, threading.get_ident()))

    @tool
    def f(on_update: ToolUpdate) -> str:
        on_update(ToolResult.text("half"))
        return "done"

    await f.execute("call-1", {}, on_update)

    assert [(ToolResult.text("half"), threading.get_ident())] == seen


async def test_exceptions_propagate() -> None:
    @tool
    def f() -> str:
        raise OSError("disk full")

    with pytest.raises(OSError, match=r"^disk full$"):
        await f.execute("call-1", {}, ignore)


def test_the_function_stays_reachable() -> None:
    def f(text: str) -> str:
        return text.upper()

    agent_tool = tool(f)

    assert inspect.unwrap(agent_tool.execute) is f


def test_a_bound_method_is_a_tool() -> None:
    class Store:
        def get(self, key: str) -> str:
            """Get a value."""
            return key

    agent_tool = tool(Store().get)

    expected = ("get", "Get a value.", schema_of({"key": {"type": "string"}}))
    assert expected == (agent_tool.name, agent_tool.description, agent_tool.parameters)


def test_validation_coerces_arguments() -> None:
    @tool
    def f(count: int, ratio: float) -> None:
        pass

    expected = {"count": 7, "ratio": 3}
    assert expected == f.validate_arguments({"count": "7", "ratio": 3})


# --- return values ----------------------------------------------------------------


async def test_a_tool_result_passes_through() -> None:
    expected = ToolResult.text("a chart", details={"n": 1}, terminate=True)

    @tool
    async def f() -> ToolResult:
        await trio.lowlevel.checkpoint()
        return expected

    assert expected == await f.execute("call-1", {}, ignore)


async def test_a_str_is_one_text_block() -> None:
    @tool
    async def f() -> str:
        await trio.lowlevel.checkpoint()
        return "hello"

    assert ToolResult.text("hello") == await f.execute("call-1", {}, ignore)


async def test_none_is_the_text_null() -> None:
    @tool
    async def f() -> None:
        pass

    assert ToolResult.text("null") == await f.execute("call-1", {}, ignore)


async def test_a_json_value_is_its_json_with_the_value_as_details() -> None:
    value = {"name": "café", "sizes": [1, 2.5], "ok": True}

    @tool
    async def f() -> dict[str, Any]:
        await trio.lowlevel.checkpoint()
        return value

    text = '{"name": "café", "sizes": [1, 2.5], "ok": true}'
    expected = ToolResult.text(text, details=value)
    assert expected == await f.execute("call-1", {}, ignore)


async def test_a_value_that_is_not_json_is_a_type_error() -> None:
    @tool
    async def f() -> object:
        await trio.lowlevel.checkpoint()
        return object()

    with pytest.raises(TypeError) as caught:
        await f.execute("call-1", {}, ignore)

    expected = (
        "tool 'f' returned a object, which is not a ToolResult, a str or a JSON-serializable value"
    )
    assert expected == str(caught.value)


# --- definition errors ------------------------------------------------------------


class Callable_:
    def __call__(self, text: str) -> str:
        return text


def plain(text: str) -> str:
    return text


@pytest.mark.parametrize(
    "thing",
    [len, Callable_, Callable_(), functools.partial(plain, "x"), tool(plain)],
    ids=["builtin", "class", "callable object", "partial", "AgentTool"],
)
def test_only_functions_are_tools(thing: Any) -> None:
    with pytest.raises(ToolDefinitionError, match=r"^@tool needs a function \(def or async def\)"):
        tool(thing)


def test_a_lambda_needs_a_name() -> None:
    message = (
        "@tool: test_a_lambda_needs_a_name.<locals>.<lambda>() has no usable name ('<lambda>'); "
        "give one with @tool(name=...)"
    )
    with pytest.raises(ToolDefinitionError) as caught:
        tool(lambda text: text)
    assert message == str(caught.value)


def test_a_generator_is_not_a_tool() -> None:
    def lines(path: str) -> Any:
        yield path

    with pytest.raises(ToolDefinitionError, match=r"a generator cannot return a result$"):
        tool(lines)


def error_of(fn: Any) -> str:
    """The message of the ToolDefinitionError that ``tool(fn)`` raises."""
    with pytest.raises(ToolDefinitionError) as caught:
        tool(fn)
    return str(caught.value)


def test_positional_only_parameter() -> None:
    def f(path: str, /) -> None:
        pass

    expected = (
        "@tool test_positional_only_parameter.<locals>.f(): parameter 'path' is positional-only; "
        "tools take keyword arguments"
    )
    assert expected == error_of(f)


def test_var_positional_parameter() -> None:
    def f(*paths: str) -> None:
        pass

    expected = (
        "@tool test_var_positional_parameter.<locals>.f(): parameter 'paths' (*paths: 'str') "
        "has no JSON Schema form"
    )
    assert expected == error_of(f)


def test_var_keyword_parameter() -> None:
    def f(**options: str) -> None:
        pass

    expected = (
        "@tool test_var_keyword_parameter.<locals>.f(): parameter 'options' (**options: 'str') "
        "has no JSON Schema form"
    )
    assert expected == error_of(f)


def test_missing_annotation() -> None:
    def f(path) -> None:  # type: ignore[no-untyped-def]  # on purpose
        pass

    expected = "@tool test_missing_annotation.<locals>.f(): parameter 'path' has no annotation"
    assert expected == error_of(f)


def test_unmappable_annotation() -> None:
    def f(tags: set[str]) -> None:
        pass

    expected = (
        "@tool test_unmappable_annotation.<locals>.f(): parameter 'tags' is annotated set[str], "
        "which @tool cannot describe: set[str] has no JSON Schema form"
    )
    assert expected == error_of(f)


def test_unmappable_nested_annotation() -> None:
    def f(tags: list[set[str]]) -> None:
        pass

    expected = (
        "@tool test_unmappable_nested_annotation.<locals>.f(): parameter 'tags' is annotated "
        "list[set[str]], which @tool cannot describe: set[str] has no JSON Schema form"
    )
    assert expected == error_of(f)


def test_mapping_keys_must_be_str() -> None:
    def f(counts: dict[int, str]) -> None:
        pass

    expected = (
        "@tool test_mapping_keys_must_be_str.<locals>.f(): parameter 'counts' is annotated "
        "dict[int, str], which @tool cannot describe: dict[int, str] has int keys; "
        "JSON object keys are str"
    )
    assert expected == error_of(f)


def test_fixed_length_tuple() -> None:
    def f(pair: tuple[int, str]) -> None:
        pass

    expected = (
        "@tool test_fixed_length_tuple.<locals>.f(): parameter 'pair' is annotated "
        "tuple[int, str], which @tool cannot describe: tuple[int, str] is a fixed-length tuple; "
        "only tuple[T, ...] is supported"
    )
    assert expected == error_of(f)


def test_recursive_typeddict() -> None:
    def f(tree: Node) -> None:
        pass

    expected = (
        "@tool test_recursive_typeddict.<locals>.f(): parameter 'tree' is annotated Node, "
        "which @tool cannot describe: Node is recursive"
    )
    assert expected == error_of(f)


def test_unresolvable_annotation() -> None:
    def f(path: CheckedPath) -> None:
        pass

    expected = (
        "@tool test_unresolvable_annotation.<locals>.f(): parameter 'path': cannot resolve "
        "annotation 'CheckedPath' (NameError: name 'CheckedPath' is not defined)"
    )
    assert expected == error_of(f)


def test_tool_call_id_must_be_a_str() -> None:
    def f(tool_call_id: int) -> None:
        pass

    expected = (
        "@tool test_tool_call_id_must_be_a_str.<locals>.f(): parameter 'tool_call_id' is "
        "injected and must be annotated str (or not at all), not int"
    )
    assert expected == error_of(f)


def test_on_update_must_be_a_callable() -> None:
    def f(on_update: str) -> None:
        pass

    expected = (
        "@tool test_on_update_must_be_a_callable.<locals>.f(): parameter 'on_update' is "
        "injected and must be annotated ToolUpdate (or not at all), not str"
    )
    assert expected == error_of(f)


# --- cancellation -----------------------------------------------------------------


async def test_a_cancelled_sync_tool_waits_for_its_thread_by_default() -> None:
    started = trio.Event()
    release = threading.Event()
    ended: list[str] = []

    @tool
    def f() -> str:
        trio.from_thread.run_sync(started.set)
        release.wait()
        return "done"

    async def call(cancel_scope: trio.CancelScope) -> None:
        with cancel_scope:
            await f.execute("call-1", {}, ignore)
        ended.append("call")

    cancel_scope = trio.CancelScope()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(call, cancel_scope)
        await started.wait()
        cancel_scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert ended == []
        release.set()
    assert ended == ["call"]


async def test_an_abandoning_sync_tool_returns_at_once_when_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    release = threading.Event()
    finished = threading.Event()

    @tool(abandon_on_cancel=True)
    def f() -> str:
        try:
            release.wait()
            return "done"
        finally:
            finished.set()

    async def release_late() -> None:
        # A safety net: if the call did not end at its deadline, it ends here (in virtual
        # time) and the assertion fails, rather than the test hanging.
        await trio.sleep(60)
        release.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(release_late)
        with trio.move_on_after(5) as scope:
            await f.execute("call-1", {}, ignore)
        outcome = (scope.cancelled_caught, trio.current_time(), finished.is_set())
        release.set()
        nursery.cancel_scope.cancel()
    await trio.to_thread.run_sync(finished.wait)  # no thread outlives the test

    assert outcome == (True, 5.0, False)
