"""One compose cluster for every test in tests/compose, made by deploy/README.md's walkthrough
blocks: `build`, `up`, and `down` after the last test of this package, also when one fails.

Package scope, not session scope: the cluster (ZooKeeper, three brokers, two controllers, the
dashboard, a Spark master and worker: ~40% of a core and 1.1 GB) must not stay up beside the
timing-sensitive tests of the packages that run after this one (issue 26)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.compose import engine


@pytest.fixture(scope="package")
def client() -> Any:
    return engine.engine_or_skip()


@pytest.fixture(scope="package")
def block_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment deploy/README.md's walkthrough blocks run in."""
    return engine.block_env(tmp_path_factory.mktemp("shims"))


@pytest.fixture(scope="package")
def up_seconds(client: Any, block_env: dict[str, str]) -> Iterator[float]:
    """The seconds from the walkthrough's `up` to every service healthy."""
    with engine.cluster_up(client, block_env) as took:
        yield took


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.stash[_FAILED] = report.failed
    return report


_FAILED = pytest.StashKey[bool]()


@pytest.fixture(autouse=True)
def _restore_after_a_failure(
    request: pytest.FixtureRequest, client: Any, block_env: dict[str, str], up_seconds: float
) -> Iterator[None]:
    """A test that fails midway may leave a broker killed, paused or cut off: bring every
    service back before the next test, which would otherwise fail for the first one's reason."""
    yield
    if request.node.stash.get(_FAILED, False):
        engine.restore(client, block_env)
