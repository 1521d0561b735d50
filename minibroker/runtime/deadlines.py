"""Awaiting with a deadline, without Python 3.11's `asyncio.wait_for` race.

On 3.11 `asyncio.wait_for(aw, t)` runs `aw` in a task of its own; when the waiting task is
cancelled in the same loop iteration as `aw` finishes, wait_for returns `aw`'s result and the
cancellation is lost (CPython gh-86296, fixed in 3.12 by building wait_for on
`asyncio.timeout`). A broker whose fetcher loop lost its cancellation that way as a
LeaderAndIsr woke it never stopped, and was SIGKILLed 30 s later. `asyncio.timeout` (3.11)
cancels the awaiting task itself and turns only its own cancellation into TimeoutError, so
every deadline in the programs is written with it; tests/unit/test_structure.py keeps
`asyncio.wait_for` out of them.
"""

from __future__ import annotations

import asyncio


async def wait_set(event: asyncio.Event, timeout_s: float | None) -> bool:
    """Until `event` is set (True) or `timeout_s` passed (False); None waits without a
    deadline. A cancellation is never swallowed."""
    try:
        async with asyncio.timeout(timeout_s):
            await event.wait()
    except TimeoutError:
        return False
    return True
