"""How the suite runs on pytest-xdist workers (`bash scripts/test.sh`: `-n 2 --dist loadgroup
--no-loadscope-reorder`; MINIBROKER_TEST_WORKERS=1 for one process), and in what order it runs on
one: which tests must share a worker and in what order they are handed out. scripts/test.sh
runs the compose tests after the rest, alone: beside Spark and process-mode clusters on two
cores their failovers missed deadlines (3 of 11 failed in one such run). Measured on a clean
clone (docs/notes.md, Test suite timings): the rest took 19:18 on two workers against 30:51 on
one (the Spark modules one unit; an earlier try with them on both workers at once, beside the
image build, missed Spark's deadlines).

Tests that start processes wait a lot (session expiry, lag timers, a rebalance delay), but
the suite as a whole keeps the two cores 85-95% busy on one process already: a second worker
fills the gaps (30:51 -> 19:18), it does not double the speed. Every test module
is one unit of work, handed whole to one worker: a module-scoped cluster is started once. The
compose tests are one unit (one cluster on the Docker engine at a time: they publish the same
host ports) and so are the PySpark modules (one ~400 MB JVM at a time).

The units are ours (`GroupScheduling`, through xdist's `pytest_xdist_make_scheduler` hook), not
xdist's `xdist_group` marks: xdist 3.8 names a marked test's group by rewriting its node id,
which pytest 9 no longer reads, so marked groups were silently split across workers.

Order (longest first, so that no long unit starts last): on workers the compose unit, then
the modules that start processes, slowest known first, then the in-process tests (unit, fuzz,
simulation); on one process the in-process tests first (beside the image build), then the
modules that start processes, the compose tests last. A unit's cost is its number of tests,
or SLOW for the modules measured as the slowest (docs/notes.md, Test suite timings).
"""

from __future__ import annotations

from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

from tests.early_image_build import IN_PROCESS, is_compose

# The modules that run PySpark (one ~400 MB JVM at a time): one unit, on one worker.
SPARK = (
    "tests/integration/test_datasource.py",
    "tests/integration/test_loadgen.py",
    "tests/integration/test_retention_soak.py",
    "tests/integration/test_security.py",
)
# Modules measured among the slowest (seconds of wall time for the whole module).
SLOW = {
    "tests/scenarios/test_scenarios.py": 600,
    "tests/scenarios/test_planted_bugs.py": 300,
    "tests/browser/test_dashboard.py": 150,
    "tests/integration/test_retention_soak.py": 120,
    "tests/integration/test_reassignment.py": 120,
    "tests/integration/test_compose_scenario.py": 120,
    "tests/integration/test_security.py": 120,
    "tests/integration/test_exactly_once.py": 90,
    # A virtualenv installed from scratch, then the example's seven tests (issue 39 §5).
    "tests/integration/test_example_app.py": 240,
    "tests/integration/test_log_compaction.py": 90,
}


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: "docker", "spark" or its module's path."""
    path = nodeid.split("::")[0]
    if is_compose(nodeid):
        return "docker"
    if path in SPARK:
        return "spark"
    return path


def _rank(unit: str, tests: int, workers: bool) -> tuple[int, float]:
    if unit == "docker":  # on one process last: its images build meanwhile
        return (0, 0.0) if workers else (3, 0.0)
    if unit.startswith(IN_PROCESS):  # on one process first, beside the image build
        return (2, 0.0) if workers else (0, 0.0)
    if unit == "spark":
        return (1, -float(sum(SLOW.get(p, 60) for p in SPARK)))
    return (1, -float(SLOW.get(unit, 10 * tests)))


def order(config: pytest.Config, items: list[pytest.Item]) -> None:
    """pytest_collection_modifyitems: units longest first, the in-process tests last, each
    unit's tests in their collected order (every worker collects, and orders, the same way)."""
    workers = hasattr(config, "workerinput")
    counts: dict[str, int] = {}
    for item in items:
        unit = unit_of(item.nodeid)
        counts[unit] = counts.get(unit, 0) + 1
    position = {item.nodeid: i for i, item in enumerate(items)}
    first: dict[str, int] = {}
    for item in items:
        first.setdefault(unit_of(item.nodeid), position[item.nodeid])

    def key(item: pytest.Item) -> tuple[int, float, int, int]:
        unit = unit_of(item.nodeid)
        return (*_rank(unit, counts[unit], workers), first[unit], position[item.nodeid])

    items.sort(key=key)


class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
    """xdist's scope scheduling with our units as the scopes."""

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)


def make_scheduler(config: pytest.Config, log: Any) -> GroupScheduling | None:
    """pytest_xdist_make_scheduler: ours for `--dist loadgroup`, xdist's for any other mode."""
    if config.getvalue("dist") != "loadgroup":
        return None
    return GroupScheduling(config, log)
