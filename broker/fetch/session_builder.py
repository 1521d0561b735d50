"""The follower's side of an incremental fetch session (KIP-227, Kafka's FetchSessionHandler),
as rules without I/O: which partitions the next Fetch must name, and what to do with the
session after the answer.

The first request names every partition and opens a session (id 0, epoch 0). Later ones carry
the session's id and next epoch, name only partitions whose fetch state (offset, log start,
leader epoch) differs from what the leader holds, and list as forgotten those no longer
fetched. A session error from the leader, or a failed request, starts over with a full one.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from broker.fetch.session_cache import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch
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

    def plan(
        self,
        ready: AbstractSet[TopicPartition],
        state_of: Callable[[TopicPartition], PartitionFetchState],
        maybe_changed: Collection[TopicPartition] | None = None,
    ) -> FetchPlan:
        """The next request for the partitions to fetch now (`ready`, with `state_of` each).
        `maybe_changed` (None: any) are the only ones whose state may differ from what was
        last sent, so a session of 10,000 partitions compares only those."""
        if not self.enabled or self.session_id == INVALID_SESSION_ID:
            epoch = FINAL_EPOCH if not self.enabled else INITIAL_EPOCH
            plan = FetchPlan(INVALID_SESSION_ID, epoch, {tp: state_of(tp) for tp in ready}, [])
        else:
            held = self._held
            candidates: Iterable[TopicPartition] = ready
            if maybe_changed is not None:  # new ones, and those that may have moved
                candidates = (ready - held.keys()) | (ready & set(maybe_changed))
            send = {}
            for tp in candidates:
                state = state_of(tp)
                if held.get(tp) != state:
                    send[tp] = state
            forgotten = list(held.keys() - ready)
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
