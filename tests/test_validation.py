"""Tests of trio_agent._validation: pi-ai's tool-argument coercion and TypeBox's error text."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import jsonschema  # type: ignore[import-untyped]  # ships no type information
import outcome
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from tests._support import echo, examples
from trio_agent import Agent, AgentMessage, ToolResult, ToolResultMessage, ToolUpdate, _validation
from trio_agent._errors import ToolArgumentsError, ToolDefinitionError
from trio_agent._metered import _METER, Budget, OverBudget, charge, regex
from trio_agent._tools import AgentTool
from trio_agent._validation import (
    BASE_STEPS,
    COMPILE_STEPS,
    MAX_DROPPED_PATTERNS,
    MAX_SCHEMA_CHAIN,
    MAX_SCHEMA_VALUES,
    STEPS_PER_UNIT,
    UNIT_CHARS,
    ArgumentValidator,
    compile_validator,
    step_budget,
    without_unmatchable_patterns,
)
from trio_agent.providers import faux

T = TypeVar("T")

ECHO = {"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]}


def validate(schema: dict[str, Any], arguments: dict[str, Any], tool: str = "t") -> dict[str, Any]:
    return compile_validator(schema, tool_name=tool).validate(tool, arguments)


def failure(schema: dict[str, Any], arguments: dict[str, Any], tool: str = "t") -> str:
    with pytest.raises(ToolArgumentsError) as info:
        validate(schema, arguments, tool)
    return str(info.value)


def error_lines(schema: dict[str, Any], arguments: dict[str, Any]) -> list[str]:
    message = failure(schema, arguments)
    head, _, _ = message.partition("\n\nReceived arguments:\n")
    return head.split("\n")[1:]


def one_property(sub: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {"v": sub}}


def coerced(sub: dict[str, Any], value: Any) -> Any:
    """``value`` coerced as a required property of schema ``sub`` (an optional one drops null)."""
    return validate({**one_property(sub), "required": ["v"]}, {"v": value})["v"]


# ------------------------------------------------------------------ recorded pi outputs


def test_missing_required_property_message_is_pis() -> None:
    expected = (
        'Validation failed for tool "echo":\n'
        "  - value: must have required properties value\n\n"
        "Received arguments:\n{}"
    )
    assert expected == failure(ECHO, {}, tool="echo")


def test_number_is_coerced_to_string_in_a_copy() -> None:
    arguments = {"value": 5}
    result = validate(ECHO, arguments, tool="echo")
    expected = ({"value": "5"}, {"value": 5})
    assert expected == (result, arguments)


def test_numeric_string_is_coerced_to_integer() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    expected = {"n": 7}
    assert expected == validate(schema, {"n": "7"})


# ------------------------------------------------------------------ coercions


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, 0),
        ("  7 ", 7),
        ("1e3", 1000),
        ("0x10", 16),
        ("0b101", 5),
        (".5", 0.5),
        ("-2.5", -2.5),
        ("\ufeff3\u3000", 3),
        (True, 1),
        (False, 0),
        (4.5, 4.5),
    ],
)
def test_number_coercion(value: Any, expected: Any) -> None:
    result = coerced({"type": "number"}, value)
    expected = (expected, type(expected))
    assert expected == (result, type(result))


@pytest.mark.parametrize("value", ["Infinity", "1e400", "1_000", "0x", "-0x10", "", "   ", "nan"])
def test_number_coercion_leaves_non_finite_or_non_js_numbers(value: str) -> None:
    expected = ["  - v: must be number"]
    assert expected == error_lines(one_property({"type": "number"}), {"v": value})


@pytest.mark.parametrize(
    ("value", "number"),
    [(None, 0), ("7", 7), ("7.0", 7), (" 1e3", 1000), ("0x1F", 31), (True, 1), (False, 0)],
)
def test_integer_coercion(value: Any, number: int) -> None:
    result = coerced({"type": "integer"}, value)
    expected = (number, int)
    assert expected == (result, type(result))


def test_integer_coercion_leaves_a_fraction() -> None:
    expected = ["  - v: must be integer"]
    assert expected == error_lines(one_property({"type": "integer"}), {"v": "7.5"})


def test_integral_float_is_an_integer() -> None:
    expected = 7.0
    assert expected == coerced({"type": "integer"}, 7.0)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, False), ("true", True), ("false", False), (1, True), (0, False), (1.0, True)],
)
def test_boolean_coercion(value: Any, expected: bool) -> None:
    assert expected is coerced({"type": "boolean"}, value)


@pytest.mark.parametrize("value", ["True", "yes", 2, "1"])
def test_boolean_coercion_leaves_other_values(value: Any) -> None:
    expected = ["  - v: must be boolean"]
    assert expected == error_lines(one_property({"type": "boolean"}), {"v": value})


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, ""),
        (5, "5"),
        (5.0, "5"),
        (-0.0, "0"),
        (0.1, "0.1"),
        (1.5e-6, "0.0000015"),
        (1e-7, "1e-7"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (123.456, "123.456"),
        (2**60, "1152921504606847000"),
        (True, "true"),
        (False, "false"),
    ],
)
def test_string_coercion_formats_like_javascript(value: Any, expected: str) -> None:
    assert expected == coerced({"type": "string"}, value)


@pytest.mark.parametrize("value", ["", 0, 0.0, False])
def test_null_coercion(value: Any) -> None:
    assert coerced({"type": "null"}, value) is None


def test_value_of_one_listed_type_is_kept() -> None:
    expected = 5
    assert expected == coerced({"type": ["string", "number"]}, 5)


def test_first_type_that_changes_the_value_wins() -> None:
    expected = 0
    assert expected == coerced({"type": ["integer", "string"]}, None)


def test_listed_types_are_tried_in_order() -> None:
    expected = "5.5"
    assert expected == coerced({"type": ["integer", "string"]}, 5.5)


def test_any_of_keeps_the_first_member_that_validates() -> None:
    schema = {"anyOf": [{"type": "integer"}, {"type": "boolean"}]}
    expected = (True, 5)
    assert expected == (coerced(schema, "true"), coerced(schema, "5"))


def test_any_of_keeps_a_value_that_a_later_member_accepts_as_it_is() -> None:
    # pi 0.85: no member coerces a value that some member already accepts.
    expected = (True, 5)
    actual = (
        coerced({"anyOf": [{"type": "integer"}, {"type": "boolean"}]}, True),
        coerced({"anyOf": [{"type": "string"}, {"type": "integer"}]}, 5),
    )
    assert expected == actual


def test_any_of_keeps_null_that_a_null_member_accepts() -> None:
    expected = None
    assert expected == coerced({"anyOf": [{"type": "integer"}, {"type": "null"}]}, None)


def test_one_of_is_coerced_like_any_of() -> None:
    expected = 5
    assert expected == coerced({"oneOf": [{"type": "integer"}, {"type": "null"}]}, "5")


def test_all_of_applies_every_member() -> None:
    expected = 3
    assert expected == coerced({"allOf": [{"type": "integer"}, {"minimum": 1}]}, "3")


def test_nested_properties_items_and_additional_properties_are_coerced() -> None:
    schema = {
        "type": "object",
        "properties": {
            "rows": {
                "type": "array",
                "items": {"type": "object", "properties": {"n": {"type": "integer"}}},
            },
            "extra": {"type": "object", "additionalProperties": {"type": "boolean"}},
        },
    }
    arguments = {"rows": [{"n": "1"}, {"n": "2"}], "extra": {"a": "true", "b": 0}}
    expected = {"rows": [{"n": 1}, {"n": 2}], "extra": {"a": True, "b": False}}
    assert expected == validate(schema, arguments)


def test_properties_are_coerced_only_under_an_object_type() -> None:
    schema = {"properties": {"n": {"type": "integer"}}}
    typed = validate({"type": "object", **schema}, {"n": "7"})
    expected = ({"n": 7}, ["  - n: must be integer"])
    assert expected == (typed, error_lines(schema, {"n": "7"}))


def test_references_are_not_followed_by_coercion() -> None:
    schema = {
        "type": "object",
        "$defs": {"count": {"type": "integer"}},
        "properties": {"n": {"$ref": "#/$defs/count"}},
    }
    expected = ["  - n: must be integer"]
    assert expected == error_lines(schema, {"n": "7"})


def test_nested_input_is_not_mutated() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}}}}
    arguments = {"a": [1, 2]}
    result = validate(schema, arguments)
    expected = ({"a": ["1", "2"]}, {"a": [1, 2]})
    assert expected == (result, arguments)


# ------------------------------------------------------------------ messages and paths


def test_wrong_type_that_cannot_be_coerced() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    expected = (
        'Validation failed for tool "t":\n'
        "  - n: must be integer\n\n"
        'Received arguments:\n{\n  "n": "seven"\n}'
    )
    assert expected == failure(schema, {"n": "seven"})


def test_several_errors_in_typebox_order() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "minLength": 3},
            "b": {"type": "integer", "minimum": 1.5},
        },
        "required": ["a", "b", "c", "d"],
        "additionalProperties": False,
    }
    expected = [
        "  - c: must have required properties c, d",
        "  - root: must not have additional properties",
        "  - a: must not have fewer than 3 characters",
        "  - b: must be >= 1.5",
    ]
    assert expected == error_lines(schema, {"a": "x", "b": 1, "z": 0})


def test_nested_paths_use_dots_and_indices() -> None:
    schema = {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}},
                    "required": ["name"],
                },
            }
        },
    }
    expected = [
        "  - items.1.name: must have required properties name",
        "  - items.2.name: must be string",
    ]
    assert expected == error_lines(schema, {"items": [{"name": "a"}, {}, {"name": []}]})


def test_missing_nested_property_path() -> None:
    schema = {
        "type": "object",
        "properties": {"outer": {"type": "object", "required": ["value"]}},
    }
    expected = ["  - outer.value: must have required properties value"]
    assert expected == error_lines(schema, {"outer": {}})


def test_any_of_failure_lists_members_then_any_of() -> None:
    expected = [
        "  - v: must be integer",
        "  - v: must be boolean",
        "  - v: must match a schema in anyOf",
    ]
    schema = one_property({"anyOf": [{"type": "integer"}, {"type": "boolean"}]})
    assert expected == error_lines(schema, {"v": "x"})


def test_one_of_matching_twice() -> None:
    schema = one_property({"oneOf": [{"type": "integer"}, {"type": "number"}]})
    expected = ["  - v: must match exactly one schema in oneOf"]
    assert expected == error_lines(schema, {"v": 3})


@pytest.mark.parametrize(
    ("sub", "value", "message"),
    [
        ({"type": ["integer", "null"]}, [], "must be either integer or null"),
        ({"minimum": 2}, 1, "must be >= 2"),
        ({"maximum": 2.0}, 3, "must be <= 2"),
        ({"exclusiveMinimum": 2}, 2, "must be > 2"),
        ({"exclusiveMaximum": 2}, 2, "must be < 2"),
        ({"multipleOf": 0.5}, 0.7, "must be multiple of 0.5"),
        ({"minLength": 2}, "a", "must not have fewer than 2 characters"),
        ({"maxLength": 1}, "ab", "must not have more than 1 characters"),
        ({"pattern": "^a"}, "b", 'must match pattern "^a"'),
        ({"format": "date"}, "2020-13-01", 'must match format "date"'),
        ({"enum": [1, 2]}, 3, "must be equal to one of the allowed values"),
        ({"const": 1}, 2, "must be equal to constant"),
        ({"minItems": 2}, [1], "must not have fewer than 2 items"),
        ({"maxItems": 1}, [1, 2], "must not have more than 1 items"),
        ({"uniqueItems": True}, [1, 1], "must not have duplicate items"),
        ({"contains": {"type": "string"}}, [1], "must contain at least 1 valid item"),
        ({"minProperties": 1}, {}, "must not have fewer than 1 properties"),
        ({"maxProperties": 0}, {"a": 1}, "must not have more than 0 properties"),
        ({"not": {"type": "string"}}, "s", "must not be valid"),
        ({"additionalProperties": False}, {"a": 1}, "must not have additional properties"),
        ({"unevaluatedProperties": False}, {"a": 1}, "must not have unevaluated properties"),
        ({"unevaluatedItems": False}, [1], "must not have unevaluated items"),
        ({"propertyNames": {"maxLength": 1}}, {"ab": 1}, "property names ab are invalid"),
        ({"if": {"type": "string"}, "then": {"minLength": 9}}, "s", 'must match "then" schema'),
    ],
)
def test_typebox_message(sub: dict[str, Any], value: Any, message: str) -> None:
    assert f"  - v: {message}" == error_lines(one_property(sub), {"v": value})[-1]


def test_false_subschema() -> None:
    expected = ["  - v: schema is false"]
    assert expected == error_lines(one_property(False), {"v": 1})  # type: ignore[arg-type]  # the point


def test_false_items_report_each_item() -> None:
    schema = one_property({"type": "array", "items": False})
    expected = ["  - v.0: schema is false", "  - v.1: schema is false"]
    assert expected == error_lines(schema, {"v": [1, 2]})


def test_else_branch_lists_its_errors() -> None:
    schema = {"type": "object", "if": {"required": ["a"]}, "else": {"required": ["b"]}}
    expected = ["  - b: must have required properties b", '  - root: must match "else" schema']
    assert expected == error_lines(schema, {})


def test_dependent_required() -> None:
    schema = {"type": "object", "dependentRequired": {"a": ["b"]}}
    expected = ["  - root: must have properties b when property a is present"]
    assert expected == error_lines(schema, {"a": 1})


def test_property_names_report_the_name_then_the_summary() -> None:
    schema = {"type": "object", "propertyNames": {"maxLength": 2}}
    expected = [
        "  - abc: must not have more than 2 characters",
        "  - root: property names abc are invalid",
    ]
    assert expected == error_lines(schema, {"abc": 1, "de": 2})


def test_received_arguments_print_like_json_stringify() -> None:
    message = failure(ECHO, {"value": [], "f": 5.0, "g": 1e-7, "10": 1, "2": None})
    expected = '{\n  "2": null,\n  "10": 1,\n  "value": [],\n  "f": 5,\n  "g": 1e-7\n}'
    assert expected == message.partition("Received arguments:\n")[2]


def test_received_arguments_keep_non_ascii() -> None:
    message = failure(ECHO, {"value": [], "name": "café"})
    assert message.endswith('"name": "café"\n}')


# ------------------------------------------------------------------ schemas


def test_invalid_schema_names_the_tool() -> None:
    with pytest.raises(ToolDefinitionError) as info:
        compile_validator({"type": "objekt"}, tool_name="broken")
    assert "tool 'broken'" in str(info.value)
    assert "$.type" in str(info.value)


def test_non_mapping_schema_names_the_tool() -> None:
    with pytest.raises(ToolDefinitionError, match="tool 'broken'"):
        compile_validator(["object"], tool_name="broken")  # type: ignore[arg-type]  # the bad input


def test_schema_given_is_not_kept_by_reference() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    validator = compile_validator(schema, tool_name="t")
    schema["properties"]["n"]["type"] = "string"  # type: ignore[index]  # a dict, here
    expected = {"n": 7}
    assert expected == validator.validate("t", {"n": "7"})


def test_schema_draft_is_taken_from_dollar_schema() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"p": {"type": "array", "items": [{"type": "integer"}, {"type": "boolean"}]}},
    }
    expected = {"p": [1, True, "x"]}
    assert expected == validate(schema, {"p": ["1", "true", "x"]})


def test_compiled_validator_type() -> None:
    assert isinstance(compile_validator(ECHO, tool_name="echo"), ArgumentValidator)


# ------------------------------------------------------------------ properties

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5)
    | st.sampled_from(["7", "1e3", "true", "false", "", " 2.5", "0x10"]),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=8,
)
MIXED = {
    "type": "object",
    "properties": {
        "s": {"type": "string"},
        "n": {"type": "integer"},
        "f": {"type": "number"},
        "b": {"type": "boolean"},
        "z": {"type": "null"},
        "u": {"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 3}]},
        "w": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]},
        "m": {"type": ["integer", "string"]},
        "a": {"type": "array", "items": {"type": "number"}},
        "o": {
            "type": "object",
            "properties": {"x": {"type": "integer"}},
            "additionalProperties": {"type": "string"},
        },
    },
    "required": ["s"],
}
MIXED_VALIDATOR = compile_validator(MIXED, tool_name="mixed")
MIXED_ARGUMENTS = st.fixed_dictionaries(
    {"s": JSON_VALUES}, optional={key: JSON_VALUES for key in MIXED["properties"] if key != "s"}
) | st.dictionaries(st.text(max_size=2), JSON_VALUES, max_size=3)


@given(MIXED_ARGUMENTS)
def test_validate_never_mutates_and_is_idempotent(arguments: dict[str, Any]) -> None:
    before = copy.deepcopy(arguments)
    try:
        result = MIXED_VALIDATOR.validate("mixed", arguments)
    except ToolArgumentsError:
        result = None
    assert json.dumps(before) == json.dumps(arguments)
    if result is not None:
        assert json.dumps(result) == json.dumps(MIXED_VALIDATOR.validate("mixed", result))


FLAT = {
    "type": "object",
    "properties": {
        "s": {"type": "string", "description": "d"},
        "n": {"type": ["integer", "null"]},
        "f": {"type": "number"},
    },
    "required": ["s"],
    "additionalProperties": False,
}
FLAT_VALIDATOR = compile_validator(FLAT, tool_name="flat")
SLOW_VALIDATOR = compile_validator({**FLAT, "minProperties": 0}, tool_name="flat")  # no fast path
FLAT_ARGUMENTS = st.dictionaries(st.sampled_from(["s", "n", "f", "x"]), JSON_VALUES, max_size=4)


@given(FLAT_ARGUMENTS)
def test_fast_path_agrees_with_jsonschema(arguments: dict[str, Any]) -> None:
    def outcome(validator: ArgumentValidator) -> str:
        try:
            return json.dumps(validator.validate("flat", arguments))
        except ToolArgumentsError as error:
            return str(error)

    assert outcome(SLOW_VALIDATOR) == outcome(FLAT_VALIDATOR)


# Arguments that mostly pass, so that each null rule is met (any JSON value would almost
# always fail on an extra key or a wrong type first).
NULLABLE_ARGUMENTS = st.fixed_dictionaries(
    {"s": st.none() | st.text(max_size=5)},
    optional={
        "n": st.none() | st.integers(-5, 5),
        "f": st.none() | st.floats(allow_nan=False, allow_infinity=False),
    },
)


@given(NULLABLE_ARGUMENTS)
def test_nulls_are_dropped_kept_or_coerced_by_pis_rules(arguments: dict[str, Any]) -> None:
    result = FLAT_VALIDATOR.validate("flat", arguments)
    # "f" (optional, a number) refuses null: dropped. "n" (optional, integer or null) takes it:
    # kept. "s" (required, a string): coerced to "", as pi does.
    assert ("f" in result) == ("f" in arguments and arguments["f"] is not None)
    assert "n" not in arguments or arguments["n"] is not None or result["n"] is None
    assert arguments["s"] is not None or result["s"] == ""


def test_arguments_that_are_not_an_object() -> None:
    expected = (
        'Validation failed for tool "echo":\n  - root: must be object\n\nReceived arguments:\nnull'
    )
    assert expected == failure(ECHO, None, tool="echo")  # type: ignore[arg-type]  # the bad input


# ------------------------------------------------------------------ optional nulls (pi 0.85)

FIND = {
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
        "height": {"type": "integer", "default": 100},
    },
    "required": ["query"],
    "additionalProperties": False,
}


def agent_tool(parameters: dict[str, Any], name: str = "find") -> AgentTool:
    return AgentTool(name=name, description="", parameters=parameters, execute=echo)


def test_agent_tool_drops_a_null_its_optional_property_refuses_and_keeps_one_it_takes() -> None:
    arguments = {"query": "q", "limit": None, "height": None}
    expected = ({"query": "q", "limit": None}, {"query": "q", "limit": None, "height": None})
    assert expected == (agent_tool(FIND).validate_arguments(arguments), arguments)


@pytest.mark.parametrize(
    "sub",
    [
        {"type": "string"},
        {"type": "boolean"},
        {"type": "object"},
        {"enum": ["a", "b"]},
        {"allOf": [{"type": "integer"}]},
        {"anyOf": [{"type": "integer"}, {"type": "string"}]},
    ],
)
def test_null_for_an_optional_property_that_refuses_it_is_dropped(sub: dict[str, Any]) -> None:
    expected: dict[str, Any] = {}
    assert expected == validate(one_property(sub), {"v": None})


@pytest.mark.parametrize(
    "sub", [{}, {"type": ["integer", "null"]}, {"const": None}, {"enum": ["a", None]}]
)
def test_null_for_an_optional_property_that_takes_it_is_kept(sub: dict[str, Any]) -> None:
    expected = {"v": None}
    assert expected == validate(one_property(sub), {"v": None})


def test_null_for_an_optional_property_under_a_reference_is_kept() -> None:
    # pi does not look at a reference's target, so the null meets the validator.
    schema = {
        "type": "object",
        "$defs": {"count": {"type": "integer"}},
        "properties": {"n": {"$ref": "#/$defs/count"}},
    }
    expected = ["  - n: must be integer"]
    assert expected == error_lines(schema, {"n": None})


def test_nulls_are_dropped_in_nested_properties_and_array_items() -> None:
    row = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}
    schema = {
        "type": "object",
        "properties": {"o": row, "rows": {"type": "array", "items": row}},
        "required": ["o"],
    }
    arguments = {"o": {"a": None, "b": "x"}, "rows": [{"a": None}, {"a": 1, "b": None}]}
    expected = {"o": {"b": "x"}, "rows": [{}, {"a": 1}]}
    assert expected == validate(schema, arguments)


def test_nulls_are_dropped_in_tuple_items_of_draft_7() -> None:
    row = {"type": "object", "properties": {"a": {"type": "integer"}}}
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"t": {"type": "array", "items": [row, {"type": "integer"}]}},
    }
    expected = {"t": [{}, 0]}
    assert expected == validate(schema, {"t": [{"a": None}, None]})


def test_nulls_under_additional_properties_or_a_union_are_coerced_as_pi_does() -> None:
    # pi's normalizeOptionalNulls follows `properties` and `items` only.
    schema = {
        "type": "object",
        "properties": {
            "m": {"type": "object", "additionalProperties": {"type": "integer"}},
            "u": {
                "anyOf": [
                    {"type": "object", "properties": {"a": {"type": "integer"}}},
                    {"type": "null"},
                ]
            },
        },
    }
    expected = {"m": {"a": 0}, "u": {"a": 0}}
    assert expected == validate(schema, {"m": {"a": None}, "u": {"a": None}})


def test_null_for_a_required_property_is_coerced_as_pi_does() -> None:
    expected = {"query": ""}
    assert expected == agent_tool(FIND).validate_arguments({"query": None})


# ------------------------------------------------------------------ references


def definition_error(schema: dict[str, Any], name: str = "broken") -> str:
    with pytest.raises(ToolDefinitionError) as info:
        agent_tool(schema, name=name)
    return str(info.value)


def test_unresolvable_reference_is_a_definition_error_naming_the_tool_and_the_ref() -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}
    expected = (
        "tool 'broken': parameters has a $ref that does not resolve: '#/$defs/missing'"
        " (at $.properties.a; the schema has nothing at that pointer)"
    )
    assert expected == definition_error(schema)


@pytest.mark.parametrize(
    ("ref", "reason"),
    [
        ("#nowhere", "the schema has no such anchor"),
        (
            "https://example.com/schema.json",
            "it is not this schema nor a JSON Schema meta-schema, and nothing is fetched",
        ),
        (
            "other.json",
            "it is not this schema nor a JSON Schema meta-schema, and nothing is fetched",
        ),
    ],
)
def test_reference_that_does_not_resolve_here_is_a_definition_error(ref: str, reason: str) -> None:
    schema = {"type": "object", "properties": {"list": {"type": "array", "items": {"$ref": ref}}}}
    expected = (
        f"tool 'broken': parameters has a $ref that does not resolve: {ref!r}"
        f" (at $.properties.list.items; {reason})"
    )
    assert expected == definition_error(schema)


def test_reference_to_something_that_is_not_a_schema_is_a_definition_error() -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "#/required"}}, "required": []}
    expected = (
        "tool 'broken': parameters has a $ref '#/required' (at $.properties.a)"
        " that points at a list, not a schema"
    )
    assert expected == definition_error(schema)


def test_cycle_of_references_in_place_is_a_definition_error() -> None:
    schema = {
        "type": "object",
        "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}},
        "properties": {"x": {"$ref": "#/$defs/a"}},
    }
    expected = (
        "tool 'broken': parameters has a cycle of references that never moves into a property"
        " or an item, so validating a value that reaches it would never end:"
        " $['$defs'].a -> $['$defs'].b -> $['$defs'].b.allOf[0] -> $['$defs'].a"
    )
    assert expected == definition_error(schema)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "dependentSchemas": {"a": {"$ref": "#"}}},
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "dependencies": {"a": {"$ref": "#/definitions/d"}},
            "definitions": {"d": {"allOf": [{"$ref": "#"}]}},
        },
    ],
    ids=["dependentSchemas", "draft-7 dependencies"],
)
def test_a_cycle_through_schemas_of_the_same_object_is_a_definition_error(
    schema: dict[str, Any],
) -> None:
    # dependentSchemas apply to the object itself, as allOf does: a ref back to it loops.
    assert "has a cycle of references" in definition_error(schema)


def test_references_that_resolve_are_accepted() -> None:
    schema = {
        "$id": "https://example.com/tree.json",
        "type": "object",
        "$defs": {
            "n": {"$anchor": "count", "type": "integer"},
            "other": {"$id": "other.json", "type": "string"},
        },
        "properties": {
            "kids": {"type": "array", "items": {"$ref": "#"}},
            "size": {"$ref": "#count"},
            "name": {"$ref": "other.json"},
            "by_pointer": {"$ref": "#/$defs/n"},
            "schema": {"$ref": "https://json-schema.org/draft/2020-12/schema"},
        },
    }
    arguments = {"kids": [{"kids": []}], "size": 3, "name": "x", "by_pointer": 4, "schema": {}}
    expected = dict(arguments)
    assert expected == agent_tool(schema).validate_arguments(arguments)


def test_member_that_refers_to_the_whole_schema_is_checked_without_endless_recursion() -> None:
    # Coercion checks a union's members on their own, where "#" is the member itself.
    schema = {
        "type": "object",
        "properties": {"a": {"anyOf": [{"type": "integer"}, {"$ref": "#"}]}},
    }
    expected = [
        "  - a: must be integer",
        "  - a: must be object",
        "  - a: must match a schema in anyOf",
    ]
    assert expected == error_lines(schema, {"a": "x"})


def test_schema_nested_10000_levels_deep_is_a_definition_error() -> None:
    deep: dict[str, Any] = {}
    for _ in range(10_000):
        deep = {"items": deep}
    expected = "tool 'broken': parameters is nested more than 50 levels deep"
    assert expected == definition_error({"type": "object", "properties": {"a": deep}})


def test_schema_nested_50_levels_deep_compiles_and_51_does_not() -> None:
    deep: dict[str, Any] = {}
    for _ in range(47):  # the root, its properties and "a" are three levels
        deep = {"items": deep}
    assert agent_tool({"type": "object", "properties": {"a": deep}}).validate_arguments({}) == {}
    expected = "tool 'broken': parameters is nested more than 50 levels deep"
    assert expected == definition_error({"type": "object", "properties": {"a": {"items": deep}}})


def test_arguments_nested_past_the_recursion_limit_are_an_argument_error() -> None:
    deep: Any = []
    for _ in range(sys.getrecursionlimit()):
        deep = [deep]
    expected = (
        'Validation failed for tool "echo":\n'
        "  - root: must not be nested so deeply (past Python's recursion limit)\n\n"
        "Received arguments:\n(too deeply nested to show)"
    )
    assert expected == failure(ECHO, {"value": deep}, tool="echo")


# ------------------------------------------------------------------ bounds


def finishes(fn: Callable[[], T]) -> T:
    """``fn()``, run in a thread that must end within 30 s (each call here ran for hours, or
    froze the run, before validation was bounded; it now takes milliseconds)."""
    results: list[outcome.Outcome[T]] = []
    thread = threading.Thread(target=lambda: results.append(outcome.capture(fn)), daemon=True)
    thread.start()
    thread.join(30)
    if thread.is_alive():
        pytest.fail("still running after 30 s")
    return results[0].unwrap()


_IN_A_PROCESS = """
import json, sys
from trio_agent._validation import compile_validator
schema, arguments = json.loads(sys.stdin.read())
try:
    compile_validator(schema, tool_name="t").validate("t", arguments)
except ValueError as error:
    print(str(error), end="")
"""


def failure_in_a_process(schema: dict[str, Any], arguments: dict[str, Any]) -> str:
    """:func:`failure` in a fresh interpreter that must end within 30 s. Python's ``re`` holds
    the GIL while it backtracks, so a thread running it cannot be waited for: a process can be
    stopped."""
    done = subprocess.run(
        [sys.executable, "-c", _IN_A_PROCESS],
        input=json.dumps([schema, arguments]),
        capture_output=True,
        text=True,
        timeout=30,
        cwd=Path(__file__).resolve().parent.parent,
        check=True,
    )
    return done.stdout


def lines_in_a_process(schema: dict[str, Any], arguments: dict[str, Any]) -> list[str]:
    head, _, _ = failure_in_a_process(schema, arguments).partition("\n\nReceived arguments:\n")
    return head.split("\n")[1:]


def doubling(levels: int, leaf: Any, keyword: str = "anyOf") -> dict[str, Any]:
    """``x`` → d0 → keyword[d1, d1], d1 → keyword[d2, d2], ... → leaf: 2**levels paths."""
    defs: dict[str, Any] = {
        f"d{i}": {keyword: [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]}
        for i in range(levels)
    }
    defs[f"d{levels}"] = leaf
    return {
        "type": "object",
        "$defs": defs,
        "properties": {"x": {"$ref": "#/$defs/d0"}},
        "required": ["x"],
    }


def over_budget(arguments: Any, tool: str = "t") -> str:
    return (
        f'Validation failed for tool "{tool}": checking the arguments against the'
        f" tool's schema took more than {step_budget(arguments):,} steps"
    )


def test_the_budget_is_50000_steps_and_200_per_value_of_the_arguments() -> None:
    assert (BASE_STEPS, STEPS_PER_UNIT, UNIT_CHARS) == (50_000, 200, 64)
    assert step_budget({}) == 50_200
    assert step_budget({"x": [1, "a" * 130]}) == 50_000 + 200 * (4 + 2)
    assert step_budget({"k" * 64: None}) == 50_000 + 200 * (2 + 1)


@pytest.mark.parametrize("keyword", ["anyOf", "allOf", "oneOf"])
def test_references_shared_by_a_union_are_stopped_by_the_budget(keyword: str) -> None:
    schema = doubling(30, {"type": "string"}, keyword)
    arguments = {"x": [1]}
    assert over_budget(arguments) == finishes(lambda: failure(schema, arguments))


def test_a_backtracking_pattern_takes_linear_time() -> None:
    schema = {"type": "object", "properties": {"x": {"type": "string", "pattern": "^(a+)+$"}}}
    lines = lines_in_a_process(schema, {"x": "a" * 40 + "!"})
    assert lines == ['  - x: must match pattern "^(a+)+$"']


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        ("^(a+)+$", "aaaa"),
        ("^(a+)+$", "aaab"),
        ("^(a+)+$", ""),
        ("[0-9]{3}-[0-9]{4}", "call 555-1234 now"),
        ("^[a-z_][a-z0-9_]*$", "snake_case"),
        ("^[a-z_][a-z0-9_]*$", "Camel"),
        ("colou?r", "the color red"),
        ("^\\d+$", "123"),
        ("^.{2,3}$", "héé"),
    ],
)
def test_patterns_match_as_pythons_re_does_on_plain_patterns(pattern: str, text: str) -> None:
    schema = {"type": "object", "properties": {"x": {"type": "string", "pattern": pattern}}}
    validator = compile_validator(schema, tool_name="t")
    try:
        validator.validate("t", {"x": text})
    except ToolArgumentsError:
        matched = False
    else:
        matched = True
    assert matched == bool(re.search(pattern, text))


def test_pattern_properties_and_additional_properties_match_with_re2() -> None:
    schema = {
        "type": "object",
        "patternProperties": {"^(a+)+$": {"type": "integer"}},
        "additionalProperties": False,
    }
    long_key = "a" * 40 + "!"
    assert lines_in_a_process(schema, {"aaa": "1x", long_key: 1}) == [
        "  - root: must not have additional properties",
        "  - aaa: must be integer",
    ]


def test_pattern_classes_are_ascii_as_in_javascript() -> None:
    schema = {"type": "object", "properties": {"d": {"type": "string", "pattern": "^\\d$"}}}
    assert error_lines(schema, {"d": "\u0663"}) == ['  - d: must match pattern "^\\d$"']


def test_patterns_read_javascripts_unicode_escapes_and_take_lone_surrogates() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "pattern": "^\\u0041\\u{1F600}$"},
            "b": {"type": "string", "pattern": "^x.y$"},
        },
    }
    expected = {"a": "A\U0001f600", "b": "x\ud800y"}
    assert expected == validate(schema, dict(expected))


def test_a_repetition_of_1000_is_taken_and_one_of_1001_refused() -> None:
    schema = {"type": "object", "properties": {"x": {"type": "string", "pattern": "^a{1000}$"}}}
    assert validate(schema, {"x": "a" * 1000}) == {"x": "a" * 1000}
    assert failure(schema, {"x": "a" * 999}).startswith('Validation failed for tool "t"')
    with pytest.raises(ToolDefinitionError, match=r"invalid repetition size: \{1001\}"):
        compile_validator(
            {"type": "object", "properties": {"x": {"pattern": "a{1001}"}}}, tool_name="t"
        )


def test_a_schema_of_max_schema_values_compiles_and_one_more_is_refused() -> None:
    """The top object holds the values; ``"type"`` is one, the enum and its members more."""
    assert MAX_SCHEMA_VALUES == 100_000
    compile_validator({"type": "object", "enum": [0] * (MAX_SCHEMA_VALUES - 2)}, tool_name="t")
    with pytest.raises(ToolDefinitionError, match=r"is too large: more than 100,000 values"):
        compile_validator({"type": "object", "enum": [0] * (MAX_SCHEMA_VALUES - 1)}, tool_name="t")


def test_compiling_may_take_exactly_compile_steps_and_no_step_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The bound is the constant, whatever the schema: one that needs exactly as many steps
    compiles, and with one step fewer allowed it is refused."""
    assert COMPILE_STEPS == 1_000_000
    schema = doubling(4, {"type": "string", "pattern": "^[a-z]+$"})

    refusals: set[str] = set()

    def compiles(steps: int) -> bool:
        monkeypatch.setattr(_validation, "COMPILE_STEPS", steps)
        try:
            compile_validator(schema, tool_name="t")
        except ToolDefinitionError as error:
            refusals.add(str(error).partition(": checking")[0])
            return False
        return True

    low, high = 0, COMPILE_STEPS
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if compiles(middle) else (middle + 1, high)
    assert low > 0
    assert compiles(low)
    assert not compiles(low - 1)
    assert refusals == {"tool 't': parameters is too large to compile"}


@pytest.mark.parametrize(
    ("sub", "pattern", "where", "reason"),
    [
        ({"pattern": "^(?=a)"}, "^(?=a)", "$.properties.x.pattern", "invalid perl operator: (?="),
        ({"pattern": "(a)\\1"}, "(a)\\1", "$.properties.x.pattern", "invalid escape sequence: \\1"),
        (
            {"patternProperties": {"(?<!a)b": {}}},
            "(?<!a)b",
            "$.properties.x.patternProperties['(?<!a)b']",
            "invalid perl operator: (?<!",
        ),
        (
            {"pattern": "a{1001}"},
            "a{1001}",
            "$.properties.x.pattern",
            "invalid repetition size: {1001}",
        ),
    ],
)
def test_a_pattern_re2_cannot_compile_is_refused_when_the_tool_is_made(
    sub: dict[str, Any], pattern: str, where: str, reason: str
) -> None:
    expected = (
        f"tool 'broken': parameters has a pattern RE2 cannot compile: {pattern!r} (at {where};"
        f" {reason}). Patterns are matched with RE2, in time linear in the text: it has no"
        " backreferences nor lookaround (with which matching can take exponential time), and"
        " no repetition past 1,000"
    )
    assert expected == definition_error({"type": "object", "properties": {"x": sub}})


def test_unique_items_takes_linear_time() -> None:
    schema = {"type": "object", "properties": {"x": {"type": "array", "uniqueItems": True}}}
    items = [{"id": i} for i in range(10_000)]  # objects do not sort: jsonschema compares pairs
    assert finishes(lambda: validate(schema, {"x": items})) == {"x": items}
    assert error_lines(schema, {"x": [*items[:3], items[1]]}) == [
        "  - x: must not have duplicate items"
    ]


@pytest.mark.parametrize(
    ("items", "unique"),
    [
        ([1, 1.0], False),
        ([True, 1], True),
        ([False, 0, None, ""], True),
        ([{"a": 1, "b": [2]}, {"b": [2], "a": 1}], False),
        ([{"a": 1}, {"a": True}], True),
        ([[1, [2]], [1, [2.0]]], False),
        ([[1, 2], [2, 1]], True),
        (["1", 1], True),
    ],
)
def test_unique_items_compares_as_jsonschema_does(items: list[Any], unique: bool) -> None:
    schema = {"type": "object", "properties": {"x": {"uniqueItems": True}}}
    assert jsonschema.Draft202012Validator(schema).is_valid({"x": items}) is unique
    validator = compile_validator(schema, tool_name="t")
    try:
        validator.validate("t", {"x": items})
    except ToolArgumentsError:
        assert not unique
    else:
        assert unique


def test_a_long_run_of_digits_for_an_integer_takes_linear_time() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    digits = "1" * 100_000 + "x"
    assert lines_in_a_process(schema, {"n": digits}) == ["  - n: must be integer"]


def steps_needed(schema: dict[str, Any], arguments: dict[str, Any]) -> int:
    """The fewest steps with which validating ``arguments`` is not stopped by the budget."""
    validator = compile_validator(schema, tool_name="t")

    def enough(steps: int) -> bool:
        try:
            validator.validate("t", arguments, steps=steps)
        except ToolArgumentsError as error:
            return "steps" not in str(error).partition("\n")[0]
        return True

    low, high = 0, BASE_STEPS
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle + 1, high)
    return low


def test_arguments_that_need_exactly_the_budget_pass_and_one_step_more_is_refused() -> None:
    def schema(members: int, entries: int) -> dict[str, Any]:
        # Each member of the enum before the match costs three steps (its share of the enum's
        # size, and a comparison of two); each entry of dependentRequired one (its share).
        return {
            "type": "object",
            "properties": {"x": {"enum": [0] * members + [1]}},
            "dependentRequired": {f"d{i}": [] for i in range(entries)},
        }

    arguments = {"x": 1}
    base = steps_needed(schema(0, 0), arguments)
    assert steps_needed(schema(2, 1), arguments) == base + 7
    members, entries = divmod(step_budget(arguments) - base, 3)
    assert validate(schema(members, entries), arguments) == arguments
    assert over_budget(arguments) == failure(schema(members, entries + 1), arguments)


def test_a_large_realistic_call_takes_less_than_a_third_of_its_budget() -> None:
    item = {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "name": {"type": "string", "maxLength": 200},
            "tags": {"type": "array", "items": {"type": "string"}},
            "kind": {"enum": ["a", "b", "c"]},
            "score": {"anyOf": [{"type": "number"}, {"type": "null"}]},
            "email": {"type": "string", "pattern": "^[^@]+@[^@]+$"},
        },
        "required": ["id", "name"],
        "additionalProperties": False,
    }
    properties: dict[str, Any] = {f"p{i}": {"type": ["string", "null"]} for i in range(48)}
    properties.update(items={"type": "array", "items": item}, mode={"enum": ["fast", "slow"]})
    schema = {"type": "object", "properties": properties, "required": ["items"]}
    objects = [
        {"id": i, "name": f"n{i}", "tags": ["x"], "kind": "b", "score": None, "email": "a@b.c"}
        for i in range(1_000)
    ]
    arguments = {**{f"p{i}": "v" for i in range(48)}, "items": objects, "mode": "fast"}
    validator = compile_validator(schema, tool_name="t")
    assert validator.validate("t", arguments, steps=step_budget(arguments) // 3) == arguments


def test_a_tagged_union_checked_for_each_of_1000_items_is_within_its_budget() -> None:
    """An 8-member ``oneOf`` of objects told apart by a ``const`` tag, for every item of an
    array of 1,000: each item is checked against every member (about 130 steps a unit)."""
    members = [
        {
            "type": "object",
            "properties": {
                "kind": {"const": f"k{i}"},
                "value": {"type": "string"},
                "count": {"type": "integer", "minimum": 0},
            },
            "required": ["kind", "value"],
            "additionalProperties": False,
        }
        for i in range(8)
    ]
    schema = {
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"oneOf": members}}},
        "required": ["items"],
    }
    arguments = {"items": [{"kind": f"k{i % 8}", "value": "v", "count": i} for i in range(1_000)]}
    assert validate(schema, arguments) == arguments


def test_a_run_with_an_exponential_schema_answers_the_call_and_can_still_be_aborted() -> None:
    async def sleep(tool_call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        await trio.sleep(10)
        return ToolResult.text("slept")  # pragma: no cover  (aborted)

    leaf = {"type": "string"}
    slow = AgentTool(name="slow", description="", parameters=doubling(30, leaf), execute=echo)
    sleepy = AgentTool(name="sleepy", description="", parameters={}, execute=sleep)
    arguments = {"x": [1]}
    model = faux.model(
        [
            faux.reply(faux.tool_call("slow", arguments, id="a")),
            faux.reply(faux.tool_call("slow", arguments, id="b"), faux.tool_call("sleepy", {})),
            "never",
        ]
    )

    async def main() -> list[AgentMessage]:
        agent = Agent(model, tools=[slow, sleepy])
        async with trio.open_nursery() as nursery:

            async def abort_soon() -> None:
                await trio.sleep(1)
                agent.abort()

            nursery.start_soon(abort_soon)
            await agent.prompt("go")
        assert trio.current_time() == 1
        return list(agent.state.messages)

    messages = finishes(lambda: trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0)))
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    expected = [
        ("slow", True, over_budget(arguments, "slow")),
        ("slow", True, over_budget(arguments, "slow")),
        ("sleepy", True, "Operation aborted"),
    ]
    assert expected == [(m.tool_name, m.is_error, m.content[0].text) for m in results]  # type: ignore[union-attr]  # text content
    assert messages[-1].stop_reason == "aborted"  # type: ignore[union-attr]  # an AssistantMessage


def test_compiling_the_exponential_schema_is_quick_and_bounded() -> None:
    # Checking which optional properties refuse null validates null against each one: here
    # against a union whose references (resolvable inside the property) double at each level.
    defs: dict[str, Any] = {
        f"d{i}": {"anyOf": [{"$ref": f"urn:p#/$defs/d{i + 1}"}] * 2} for i in range(30)
    }
    defs["d30"] = {"type": "string"}
    optional = {"$id": "urn:p", "$defs": defs, "anyOf": [{"$ref": "urn:p#/$defs/d0"}]}
    expected = (
        "tool 'broken': parameters is too large to compile: checking it took more than"
        f" {COMPILE_STEPS:,} steps"
    )
    assert COMPILE_STEPS == 1_000_000
    assert expected == finishes(
        lambda: definition_error({"type": "object", "properties": {"p": optional}})
    )
    # As the brief's example: required, so only calls are costly, and they are bounded.
    agent_tool(doubling(30, {"type": "string"}))


def test_a_schema_that_shares_its_parts_counts_each_appearance() -> None:
    shared: dict[str, Any] = {"type": "string"}
    for _ in range(8):
        shared = {"anyOf": [shared] * 20}  # 20**8 appearances, a few hundred objects
    expected = (
        "tool 'broken': parameters is too large: more than 100,000 values"
        " (objects, arrays, strings, numbers, ...)"
    )
    assert MAX_SCHEMA_VALUES == 100_000
    assert expected == finishes(
        lambda: definition_error({"type": "object", "properties": {"x": shared}})
    )


def test_a_chain_of_more_than_100_subschemas_for_one_value_is_refused() -> None:
    def chain(links: int) -> dict[str, Any]:
        defs: dict[str, Any] = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(links)}
        defs[f"d{links}"] = {"type": "string"}
        return {"type": "object", "$defs": defs, "properties": {"x": {"$ref": "#/$defs/d0"}}}

    assert MAX_SCHEMA_CHAIN == 100
    assert agent_tool(chain(98)).validate_arguments({"x": "s"}) == {"x": "s"}  # 100 with x's
    expected = (
        "tool 'broken': parameters has a chain of more than 100 subschemas that apply to the"
        " same value (through $ref, allOf, anyOf, ...), from $.properties.x"
    )
    assert expected == definition_error(chain(99))


def test_a_reference_into_data_is_a_definition_error() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"enum": [{"type": "string"}]},
            "b": {"$ref": "#/properties/a/enum/0"},
        },
    }
    expected = (
        "tool 'broken': parameters has a $ref to $.properties.a.enum[0], which is data"
        " (an enum's, a const, a default, an example), not a schema"
    )
    assert expected == definition_error(schema)


def test_a_dollar_schema_below_the_root_is_ignored() -> None:
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "dependencies": {"a": ["b"]}}
    schema = {"type": "object", "properties": {"x": draft7}}
    assert validate(schema, {"x": {"a": 1}}) == {"x": {"a": 1}}  # 2020-12 has no dependencies


def test_a_dollar_schema_below_the_root_does_not_escape_the_budget() -> None:
    schema = doubling(30, {"type": "string"})
    schema["$defs"]["d0"]["$schema"] = "http://json-schema.org/draft-07/schema#"
    arguments = {"x": [1]}
    assert over_budget(arguments) == finishes(lambda: failure(schema, arguments))


def test_a_reference_to_a_meta_schema_is_paid_for_by_the_size_of_the_value() -> None:
    meta = {"$ref": "https://json-schema.org/draft/2020-12/schema"}
    schema = doubling(30, meta)
    arguments = {"x": {"type": 5, "properties": {f"p{i}": {"type": "string"} for i in range(50)}}}
    assert over_budget(arguments) == finishes(lambda: failure(schema, arguments))


EVALUATED_PROPERTIES: dict[str, Any] = {
    "type": "object",
    "properties": {"a": {}, "g": {}},
    "patternProperties": {"^b": {}},
    "allOf": [{"properties": {"c": {}}}, {"anyOf": [{"required": ["d"]}, {}]}],
    "if": {"required": ["e"]},
    "then": {"properties": {"e": {}, "f": {}}},
    "dependentSchemas": {"g": {"properties": {"h": {}}}},
    "unevaluatedProperties": False,
}
"""Every way a property can be evaluated, as unevaluatedProperties looks for them."""


def test_unevaluated_properties_find_what_was_evaluated_as_jsonschema_does() -> None:
    schema = EVALUATED_PROPERTIES
    valid = {"a": 1, "b1": 2, "c": 3, "e": 4, "f": 5, "g": 6, "h": 7}
    assert validate(schema, valid) == valid
    for invalid in ({"a": 1, "f": 5}, {"d": 1, "h": 2}, {"a": 1, "b": 2, "c": 3, "x": 4}):
        assert not jsonschema.Draft202012Validator(schema).is_valid(invalid)
        assert error_lines(schema, invalid) == ["  - root: must not have unevaluated properties"]


def test_looking_for_evaluated_properties_is_counted_and_uses_re2() -> None:
    levels = 30
    defs: dict[str, Any] = {
        f"d{i}": {
            "dependentSchemas": {key: {"$ref": f"#/$defs/d{i + 1}"} for key in ("a", "b")},
            "patternProperties": {"^(a+)+$": {}},
        }
        for i in range(levels)
    }
    defs[f"d{levels}"] = {}
    schema = {"$defs": defs, "$ref": "#/$defs/d0", "unevaluatedProperties": False}
    arguments = {"a": 1, "b": 2, "a" * 40 + "!": 3}
    assert over_budget(arguments) == failure_in_a_process(schema, arguments)


def test_a_budget_is_its_threads_own() -> None:
    schema = doubling(3, {"type": "string"})
    with Budget(0):  # nothing may be spent in this thread
        assert finishes(lambda: validate(schema, {"x": "s"})) == {"x": "s"}
        with pytest.raises(OverBudget):
            charge(1)


AGREEMENT_SCHEMAS: list[dict[str, Any]] = [
    EVALUATED_PROPERTIES,
    {
        "prefixItems": [{}, {"type": "integer"}],
        "contains": {"type": "string"},
        "unevaluatedItems": {"type": "boolean"},
    },
    {
        "$schema": "https://json-schema.org/draft/2019-09/schema",
        "items": [{}, {}],
        "unevaluatedItems": False,
        "properties": {"a": {}},
        "unevaluatedProperties": {"type": "integer"},
    },
    {
        "patternProperties": {"^[a-c]+$": {"type": "integer"}, "d": {"type": "string"}},
        "additionalProperties": {"type": "boolean"},
        "propertyNames": {"pattern": "^[a-z]{1,3}$"},
    },
    {
        "items": {"uniqueItems": True},
        "uniqueItems": True,
        "enum": [[1, {"a": True}], [], [[1], [1.0]]],
    },
    {
        "anyOf": [{"const": {"a": [1, 2]}}, {"const": 1}, {"type": "string", "pattern": "a|b"}],
        "not": {"const": "ab"},
    },
    {"oneOf": [{"type": "array"}, {"type": "array", "maxItems": 2}, False], "minItems": 1},
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "definitions": {"n": {"type": "integer"}},
        "properties": {"a": {"$ref": "#/definitions/n", "type": "string"}},
        "dependencies": {"a": ["b"], "c": {"required": ["d"]}},
    },
    {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "properties": {"a": {"type": "number", "maximum": 3, "exclusiveMaximum": True}},
        "additionalProperties": False,
    },
]
AGREEMENT_VALIDATORS = [compile_validator(schema, tool_name="t") for schema in AGREEMENT_SCHEMAS]
AGREEMENT_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-2, 5)
    | st.sampled_from([1.0, 2.5, "a", "ab", "b", "d"]),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from([*"abcdefghx", "aa", "bb", "dd"]), children, max_size=5)
    ),
    max_leaves=10,
)


@examples(0.2)
@given(st.sampled_from(range(len(AGREEMENT_SCHEMAS))), AGREEMENT_VALUES)
def test_the_counted_validators_agree_with_jsonschema(index: int, value: Any) -> None:
    schema = AGREEMENT_SCHEMAS[index]
    plain = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    with Budget(10**9):
        assert AGREEMENT_VALIDATORS[index]._is_valid(value) == plain(schema).is_valid(value)


# -- compiling patterns is counted ---------------------------------------------------------------


def test_compiling_a_pattern_is_charged_and_a_compiled_one_is_not() -> None:
    pattern = r"[\x{80}-\x{10FFFF}]{77}"  # a program of hundreds of instructions
    with Budget(10), pytest.raises(OverBudget):
        regex(pattern)
    with Budget(1_000_000) as budget:
        compiled = regex(pattern)
        assert budget.steps > _METER.left  # compiled now: charged
        left = _METER.left
        assert regex(pattern) is compiled
        assert _METER.left == left  # kept compiled: free


def test_a_schema_of_many_costly_patterns_is_refused_when_the_tool_is_made() -> None:
    """Each distinct pattern is compiled when the tool is made and again when a call needs it
    and it is no longer kept: 1,000 of them held the run for most of a second per call."""
    schema = {
        "type": "object",
        "properties": {
            f"p{i}": {"type": "string", "pattern": rf"p{i}[\x{{80}}-\x{{10FFFF}}]{{900}}"}
            for i in range(1_000)
        },
    }
    with pytest.raises(ToolDefinitionError, match=r"too large to compile: checking it took"):
        compile_validator(schema, tool_name="t")


def lookaheads(count: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {f"p{i}": {"type": "string", "pattern": f"^(?!x{i})"} for i in range(count)},
    }


def test_at_most_max_dropped_patterns_are_left_out_of_a_schema() -> None:
    schema, dropped = without_unmatchable_patterns(lookaheads(MAX_DROPPED_PATTERNS), tool_name="t")
    assert len(dropped) == MAX_DROPPED_PATTERNS == 16
    assert all("pattern" not in prop for prop in schema["properties"].values())
    compile_validator(schema, tool_name="t")
    with pytest.raises(ToolDefinitionError, match=r"more than 16 patterns RE2 cannot compile"):
        without_unmatchable_patterns(lookaheads(MAX_DROPPED_PATTERNS + 1), tool_name="t")
