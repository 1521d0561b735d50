"""The process's recent events in memory, for the Events gRPC service (`minibroker events`).

Every log line the process writes also lands here with a per-boot sequence number. Logging
happens on the event loop and on other threads (kazoo, `to_thread`), so adding is locked and
followers are woken on their own loop with `call_soon_threadsafe`.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections import deque
from dataclasses import dataclass, field

DEFAULT_CAPACITY = 20_000
# A follower that falls this far behind is cut off (its stream ends; the client reconnects and
# resumes from what is still kept) rather than letting its queue grow without bound.
MAX_FOLLOWER_BACKLOG = 10_000


@dataclass(frozen=True)
class KeptEvent:
    seq: int
    ts_ms: int
    json: str
    routine: bool = False  # a per-request HW move (minibroker.core.event_kinds)


@dataclass(eq=False)
class Follower:
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue[KeptEvent | None] = field(default_factory=asyncio.Queue)
    backlog: int = 0  # events handed to the loop and not yet taken (approximate, for the cap)
    skip_routine: bool = False  # spared the routine events (a timeline that leaves them out)


class EventBuffer:
    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.boot_id = uuid.uuid4().hex[:16]
        self._lock = threading.Lock()
        self._events: deque[KeptEvent] = deque(maxlen=capacity)
        self._seq = 0
        self._followers: set[Follower] = set()

    def add(self, ts_ms: int, line: str, *, routine: bool = False) -> None:
        with self._lock:
            self._seq += 1
            kept = KeptEvent(self._seq, ts_ms, line, routine)
            self._events.append(kept)
            followers = list(self._followers)
        for f in followers:
            if routine and f.skip_routine:
                continue
            f.backlog += 1
            item: KeptEvent | None = kept
            if f.backlog > MAX_FOLLOWER_BACKLOG:
                item = None
                self.unfollow(f)
            with contextlib.suppress(RuntimeError):  # its loop has closed
                f.loop.call_soon_threadsafe(f.queue.put_nowait, item)

    def snapshot(
        self, since_ms: int = 0, after_seq: int = 0, *, skip_routine: bool = False
    ) -> list[KeptEvent]:
        with self._lock:
            return self._matching(since_ms, after_seq, skip_routine)

    def _matching(self, since_ms: int, after_seq: int, skip_routine: bool) -> list[KeptEvent]:
        return [
            e
            for e in self._events
            if e.ts_ms >= since_ms and e.seq > after_seq and not (skip_routine and e.routine)
        ]

    def follow(
        self,
        loop: asyncio.AbstractEventLoop,
        since_ms: int = 0,
        after_seq: int = 0,
        *,
        skip_routine: bool = False,
    ) -> tuple[list[KeptEvent], Follower]:
        """The kept events that match and a follower that gets every later one: taken under
        one lock, so nothing falls between the two and nothing comes twice."""
        follower = Follower(loop, skip_routine=skip_routine)
        with self._lock:
            backlog = self._matching(since_ms, after_seq, skip_routine)
            self._followers.add(follower)
        return backlog, follower

    def unfollow(self, follower: Follower) -> None:
        with self._lock:
            self._followers.discard(follower)
