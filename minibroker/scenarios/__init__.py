"""Fault scenarios on a real process-mode cluster with an independent checker: a verifying
producer and consumer, ZooKeeper's history, the leaders' HW and every replica's files, checked
against eight invariants after each run (`minibroker scenario list|run`)."""

from minibroker.scenarios.catalog import SCENARIOS, UnknownScenario, scenario_or_raise
from minibroker.scenarios.context import Check, ScenarioContext, ScenarioStepFailed
from minibroker.scenarios.history import History
from minibroker.scenarios.invariants import INVARIANTS, Violation, check_all
from minibroker.scenarios.report import Report
from minibroker.scenarios.runner import (
    FAST_PROFILE,
    PLANTED_BUG_PROPERTY,
    RunOptions,
    ScenarioUnavailable,
    run,
)
from minibroker.scenarios.scenario import Scenario

__all__ = [
    "FAST_PROFILE",
    "INVARIANTS",
    "PLANTED_BUG_PROPERTY",
    "SCENARIOS",
    "Check",
    "History",
    "Report",
    "RunOptions",
    "Scenario",
    "ScenarioContext",
    "ScenarioStepFailed",
    "ScenarioUnavailable",
    "UnknownScenario",
    "Violation",
    "check_all",
    "run",
    "scenario_or_raise",
]
