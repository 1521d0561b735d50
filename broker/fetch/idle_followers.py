"""What a follower's incremental fetch must read (KIP-227 sessions on the leader).

A session holds thousands of partitions; in a quiet cluster nearly all of them are idle at
every fetch: the follower at the leader's LEO and in the ISR, the HW and log start it was last
sent unchanged. Reading such a partition returns nothing and §2.3's update after the read only
records the fetch (same LEO and log start, caught up now): no ISR expansion, no HW move, and
the session's answer leaves it out. So it is not read; its follower state gets that same
update, through the rule itself (RemoteReplica.update_fetch_state), and it is only watched in
case it changes while the fetch waits. Every partition the request names, and every other one,
is read and updated as usual.
"""

from __future__ import annotations

from broker.fetch.session_cache import FetchSession
from broker.partition_table import PartitionTable
from broker.types import FetchPartitionRequest
from minibroker.core.types import TopicPartition


def partitions_to_read(
    session: FetchSession,
    named: set[TopicPartition],
    partitions: PartitionTable,
    follower_id: int,
    fetch_time_ms: int,
) -> tuple[FetchPartitionRequest, ...]:
    """The session's partitions this fetch reads; the idle ones are counted as fetched. A
    partition found idle stays idle, without being looked at again, until it changes (the
    replica manager reports every LEO, HW, leadership and ISR change, as the purgatory needs)
    or the follower names it."""
    changed, session.changed = session.changed, set()
    out = []
    for tp, cached in session.partitions.items():
        req = cached.request
        replica = cached.idle_replica
        if replica is not None and tp not in changed and tp not in named:
            replica.fetched_at_end(fetch_time_ms)  # at cached.idle_leo, as last time
            continue
        cached.idle_replica = None
        hosted = None if tp in named else partitions.get(tp)
        if hosted is not None:
            p, log = hosted.partition, hosted.log
            leo = log.log_end_offset
            replica = p.remote.get(follower_id)
            if (
                replica is not None
                and req.fetch_offset == leo == replica.log_end_offset
                and req.current_leader_epoch == p.leader_epoch
                and p.high_watermark == cached.sent_high_watermark
                and follower_id in p.isr
                and p.is_leader
                and log.log_start_offset == cached.sent_log_start_offset
            ):
                replica.update_fetch_state(leo, req.log_start_offset, fetch_time_ms, leo)
                cached.idle_replica, cached.idle_leo = replica, leo
                continue
        out.append(req)
    return tuple(out)
