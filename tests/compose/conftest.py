"""One compose cluster for every test in tests/compose: images built (deploy/build-images.sh),
`up -d`, and `down -v` after the last test, also when one fails."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.compose import engine


@pytest.fixture(scope="session")
def client() -> Any:
    return engine.engine_or_skip()


@pytest.fixture(scope="session")
def up_seconds(client: Any) -> Iterator[float]:
    """The seconds from `up -d` to every service healthy."""
    engine.build_images()
    with engine.cluster_up(client) as took:
        yield took
