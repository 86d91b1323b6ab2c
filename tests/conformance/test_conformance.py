"""Every scenario, run with trio_agent, prints the lines the reference loop printed.

``scenarios/`` holds the traces of pi-agent-core 0.85.1, ``scenarios_1_6/`` those of
1.6.0 for the hooks it added (``prepare_request``, ``finish_turn``, messages from
``prepare_next_turn``, ``run_tool_call``, a returned ``is_error``), printed in the 1.6
format (FORMAT.md#the-16-format).

Every scenario is compared line by line, whole, with its own driver (``loop``:
``run_agent_loop``; ``agent``: ``trio_agent.Agent``). The ``agent`` scenarios
also run through the loop driver: they must print the same event and
``#action`` lines (the ``#run_end`` and ``#result`` lines carry the Agent's
state, which the loop does not have), except those that use what only an
Agent has (re-entrant ``prompt`` / ``continue``).

Where trio_agent differs on purpose, ``NN_name.trio.expected.jsonl`` holds
its lines, and README.md says why
(README.md#where-trio_agent-differs-on-purpose,
README.md#where-trio_agent-differs-from-160-on-purpose).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conformance.runner import run_scenario

SCENARIOS = Path(__file__).parent / "scenarios"
SCENARIOS_1_6 = Path(__file__).parent / "scenarios_1_6"


def expected_lines(scenario: Path) -> list[str]:
    ours = scenario.with_name(scenario.stem + ".trio.expected.jsonl")
    path = ours if ours.exists() else scenario.with_name(scenario.stem + ".expected.jsonl")
    return path.read_text(encoding="utf-8").splitlines()


def driver(scenario: Path) -> str:
    return str(json.loads(scenario.read_text(encoding="utf-8")).get("driver", "agent"))


def agent_only(scenario: Path) -> bool:
    """Whether the scenario re-enters the Agent, or has a turn hook fail (the failure
    events are the Agent's: the loop raises)."""
    spec = json.loads(scenario.read_text(encoding="utf-8"))
    actions = spec.get("actions", [])
    config = spec.get("config", {})
    hooks = ("prepareRequest", "finishTurn")
    return any(action["do"] in ("prompt", "continue") for action in actions) or any(
        "throw" in rule for hook in hooks for rule in config.get(hook, [])
    )


ALL = sorted(SCENARIOS.glob("*.json"))
ALL_1_6 = sorted(SCENARIOS_1_6.glob("*.json"))
AGENT_VIA_LOOP = [s for s in ALL + ALL_1_6 if driver(s) == "agent" and not agent_only(s)]


def test_the_scenarios_are_all_here() -> None:
    assert [driver(s) for s in ALL].count("loop") == 3
    assert len(ALL) == 32
    assert [driver(s) for s in ALL_1_6].count("loop") == 7
    assert len(ALL_1_6) == 25
    assert len(AGENT_VIA_LOOP) == 28 + 16


@pytest.mark.parametrize("scenario", ALL, ids=lambda path: path.stem)
def test_scenario(scenario: Path) -> None:
    assert run_scenario(scenario) == expected_lines(scenario)


@pytest.mark.parametrize("scenario", ALL_1_6, ids=lambda path: path.stem)
def test_scenario_1_6(scenario: Path) -> None:
    assert run_scenario(scenario) == expected_lines(scenario)


def event_lines(lines: list[str]) -> list[str]:
    return [
        line for line in lines if '"type":"#run_end"' not in line and '"type":"#result"' not in line
    ]


@pytest.mark.parametrize("scenario", AGENT_VIA_LOOP, ids=lambda path: path.stem)
def test_agent_scenario_events_through_the_loop(scenario: Path) -> None:
    got = event_lines(run_scenario(scenario, driver="loop"))
    assert got == event_lines(expected_lines(scenario))
