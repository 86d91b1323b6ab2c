"""Test settings shared by the whole suite."""

from __future__ import annotations

import os

import pytest
import trio.testing
from hypothesis import HealthCheck, settings

from tests._providers import io_clock

# "ci" (the default) runs enough examples to matter, stays inside CI's time
# budget, and draws the same examples on every run: a change is judged on the
# same 1,000 scenarios as the one before it. "explore" draws new ones each run
# (a failure it finds is kept in .hypothesis/ and replayed first next time);
# "dev" is for quick local runs: HYPOTHESIS_PROFILE=dev pytest.
settings.register_profile(
    "ci",
    max_examples=1000,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "explore", max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def clock() -> trio.testing.MockClock:
    """The clock of a test that asks for ``clock``: virtual time for real loopback I/O
    (see ``io_clock``)."""
    return io_clock()
