"""Settings for the whole suite.

Hypothesis: no per-example deadline. Its default (200 ms) measures wall time, which on the
project's 2-core machines under a parallel load said more about the machine than about the code
(an 817 ms example of a pure function failed CI, issue 15); the too_slow health check is off for
the same reason. A failure prints the blob to replay it (`@reproduce_failure`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests import early_image_build, parallel

settings.register_profile(
    "minibroker",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.load_profile("minibroker")


_CLIENT_THREAD_PREFIXES = ("kafka-",)  # kafka-python's I/O and sender threads
_CLIENT_THREAD_GRACE_S = 10.0


@pytest.fixture(autouse=True)
def no_kafka_client_outlives_its_test() -> Iterator[None]:
    """A Kafka client left open keeps its threads retrying a cluster that is gone, drawing on
    the process-wide `random` module, which made Hypothesis tests that ran later in the same
    process fail (CI, issue 19). Every test must close its clients; this fails the one that
    did not, naming the threads."""
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + _CLIENT_THREAD_GRACE_S
    while True:
        left = [
            t.name
            for t in threading.enumerate()
            if t not in before and t.is_alive() and t.name.startswith(_CLIENT_THREAD_PREFIXES)
        ]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not left, f"Kafka client threads left running (close every client): {left}"


def pytest_configure(config: pytest.Config) -> None:
    early_image_build.start(config)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    parallel.order(config, items)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    return parallel.make_scheduler(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    early_image_build.wait_before(item)


def pytest_unconfigure(config: pytest.Config) -> None:
    early_image_build.stop(config)
