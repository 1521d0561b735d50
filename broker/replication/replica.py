"""The leader's view of one follower: its LEO, log start and fetch times, and the in-sync test
over them (Kafka's cluster/Replica.scala, reference §2.1, §2.4). Pure: times are arguments."""

from __future__ import annotations

from dataclasses import dataclass

UNKNOWN_OFFSET = -1


@dataclass
class RemoteReplica:
    """The leader's view of one follower (Kafka's cluster/Replica.scala, reference §2.1)."""

    broker_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    last_fetch_leader_log_end_offset: int = 0
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = 0

    def update_fetch_state(
        self, fetch_offset: int, log_start_offset: int, fetch_time_ms: int, leader_end_offset: int
    ) -> None:
        """A fetch at `fetch_offset`, handled at `fetch_time_ms` when the leader's LEO (read
        before the read) was `leader_end_offset`."""
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, fetch_time_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            # Caught up to where the leader was at the previous fetch: in sync as of then.
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_start_offset = log_start_offset
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = leader_end_offset
        self.last_fetch_time_ms = fetch_time_ms

    def fetched_at_end(self, fetch_time_ms: int) -> None:
        """update_fetch_state(leo, log_start, fetch_time_ms, leo) for a replica already at the
        leader's LEO, with that log start, after a fetch there (an idle fetch-session
        partition, broker/fetch/idle_followers.py): only its times move. The leader's
        fetches of 10,000 idle partitions call this for each."""
        if fetch_time_ms > self.last_caught_up_time_ms:
            self.last_caught_up_time_ms = fetch_time_ms
        self.last_fetch_time_ms = fetch_time_ms

    def reset_last_caught_up_time(
        self, leader_end_offset: int, now_ms: int, last_caught_up_time_ms: int
    ) -> None:
        self.last_fetch_leader_log_end_offset = leader_end_offset
        self.last_fetch_time_ms = now_ms
        self.last_caught_up_time_ms = last_caught_up_time_ms

    def is_out_of_sync(self, leader_end_offset: int, now_ms: int, lag_ms: int) -> bool:
        """Reference §2.4 and pitfall 1: behind the leader's LEO *and* not caught up for longer
        than the lag. A follower at the leader's LEO is never out of sync, however idle."""
        return (
            self.log_end_offset != leader_end_offset
            and now_ms - self.last_caught_up_time_ms > lag_ms
        )

    def has_not_fetched_for(self, now_ms: int, lag_ms: int) -> bool:
        """PlantedBug.SHRINK_ON_NO_FETCH's wrong rule: no fetch (nor, right after an election,
        the leader's reset) for longer than the lag, whatever the follower's LEO."""
        return now_ms - max(self.last_fetch_time_ms, self.last_caught_up_time_ms) > lag_ms
