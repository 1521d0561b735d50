"""Wait for a condition with a deadline: the only way tests and the demo synchronise."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(TimeoutError):
    pass


def wait_until(
    condition: Callable[[], T | None],
    *,
    timeout_s: float,
    what: str,
    interval_s: float = 0.05,
) -> T:
    """Poll `condition` until it returns something truthy; return that, or raise WaitTimeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(interval_s)
