"""The leader's view of a follower (broker/replication/replica.py): the idle fetch's shortcut
is the full rule's result whenever the replica is already at the leader's LEO."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from broker.replication.replica import RemoteReplica


@given(
    leo=st.integers(0, 10**6),
    log_start=st.integers(0, 10**6),
    caught_up=st.integers(0, 10**9),
    last_fetch=st.integers(0, 10**9),
    now=st.integers(0, 10**9),
)
def test_fetched_at_end_is_update_fetch_state_at_the_leaders_leo(
    leo: int, log_start: int, caught_up: int, last_fetch: int, now: int
) -> None:
    replica = RemoteReplica(
        1,
        log_end_offset=leo,
        log_start_offset=log_start,
        last_fetch_leader_log_end_offset=leo,
        last_fetch_time_ms=last_fetch,
        last_caught_up_time_ms=caught_up,
    )
    full = dataclasses.replace(replica)
    full.update_fetch_state(leo, log_start, now, leo)
    replica.fetched_at_end(now)
    assert replica == full
