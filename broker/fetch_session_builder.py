"""The follower's side of an incremental fetch session (KIP-227, Kafka's FetchSessionHandler),
as rules without I/O: which partitions the next Fetch must name, and what to do with the
session after the answer.

The first request names every partition and opens a session (id 0, epoch 0). Later ones carry
the session's id and next epoch, name only partitions whose fetch state (offset, log start,
leader epoch) differs from what the leader holds, and list as forgotten those no longer
fetched. A session error from the leader, or a failed request, starts over with a full one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from broker.fetch_session_cache import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch
from minibroker.core.errors import ErrorCode
from minibroker.core.types import TopicPartition

# What a Fetch tells the leader about one partition: (fetch offset, log start offset, leader
# epoch). A plain tuple: a follower of 10,000 partitions makes one per partition per round.
PartitionFetchState = tuple[int, int, int]


@dataclass(frozen=True)
class FetchPlan:
    session_id: int
    epoch: int
    send: dict[TopicPartition, PartitionFetchState]
    forgotten: list[TopicPartition]

    @property
    def full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)


class FetchSessionBuilder:
    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self._held: dict[TopicPartition, PartitionFetchState] = {}  # what the leader holds
        self._pending: FetchPlan | None = None
        self.full_fetches = 0  # requests that named every partition (tests, metrics)

    def plan(self, wanted: Mapping[TopicPartition, PartitionFetchState]) -> FetchPlan:
        """The next request for the partitions to fetch now, with their states."""
        if not self.enabled:
            plan = FetchPlan(INVALID_SESSION_ID, FINAL_EPOCH, dict(wanted), [])
        elif self.session_id == INVALID_SESSION_ID:
            plan = FetchPlan(INVALID_SESSION_ID, INITIAL_EPOCH, dict(wanted), [])
        else:
            held = self._held
            send = {tp: st for tp, st in wanted.items() if held.get(tp) != st}
            forgotten = [tp for tp in held if tp not in wanted]
            plan = FetchPlan(self.session_id, self.epoch, send, forgotten)
        if plan.full:
            self.full_fetches += 1
        self._pending = plan
        return plan

    def on_response(self, error: ErrorCode, session_id: int) -> bool:
        """The leader answered the last planned request with top-level `error` and
        `session_id`; whether its partition answers are to be used."""
        plan, self._pending = self._pending, None
        if plan is None or not self.enabled:
            return error is ErrorCode.NONE
        if error is not ErrorCode.NONE:
            self.reset()  # FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, ...
            return False
        if plan.full:
            self.session_id = session_id  # 0 when the leader keeps no session for us
            self._held = dict(plan.send)
            self.epoch = next_epoch(INITIAL_EPOCH)
        else:
            for tp in plan.forgotten:
                self._held.pop(tp, None)
            self._held.update(plan.send)
            self.epoch = next_epoch(self.epoch)
        return True

    def on_failure(self) -> None:
        """The request failed (no answer): the leader's view is unknown, start over."""
        self._pending = None
        self.reset()

    def reset(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self._held = {}
