"""The compose cluster with its secure profile (deploy/docker-compose.secure.yml), made by
deploy/README.md's secure walkthrough blocks: `build`, `secure-up`, and `secure-down` after the
last test of this package, also when one fails. A package of its own: it runs after
tests/compose has taken its plain cluster down (the two publish the same ports)."""

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
    return engine.block_env(tmp_path_factory.mktemp("shims"))


@pytest.fixture(scope="package")
def secure_up(client: Any, block_env: dict[str, str]) -> Iterator[float]:
    """The seconds from the walkthrough's `secure-up` to every service healthy."""
    with engine.cluster_up(client, block_env, secure=True) as took:
        yield took
