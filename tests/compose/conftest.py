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
