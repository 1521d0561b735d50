"""What a Fetch reads from the leader's logs (reference §2.11, §3.7): every requested partition
within the response's byte budget, and, for a waiting fetch, how much one partition has readable.
Consumers read only below the HW (read_committed ones below the LSO, with the aborted
transactions their records touch: Kafka's Log.read with FetchTxnCommitted); followers up to the
LEO."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from broker.log.log_types import OffsetOutOfRange
from broker.partition_table import PartitionTable
from broker.replication.partition import Partition
from broker.types import FetchParams, FetchPartitionRequest, FetchPartitionResult
from minibroker.core.errors import ErrorCode
from minibroker.core.types import TopicPartition


def read_all(
    partitions: PartitionTable, params: FetchParams, leader_leos: dict[TopicPartition, int]
) -> dict[TopicPartition, FetchPartitionResult]:
    """Every requested partition, in request order, sharing `params.max_bytes` (the first
    partition with data gets at least one whole batch, KIP-74). Fills `leader_leos` with the
    leader's LEO of each partition read without error."""
    results: dict[TopicPartition, FetchPartitionResult] = {}
    _read_in_order(partitions, params, params.partitions, params.max_bytes, results, leader_leos)
    return results


def reread(
    partitions: PartitionTable,
    params: FetchParams,
    previous: dict[TopicPartition, FetchPartitionResult],
    changed: list[FetchPartitionRequest],
) -> dict[TopicPartition, FetchPartitionResult]:
    """A waiting fetch's final answer: `previous` (its own read) with the partitions that
    changed since read again, within what is left of the byte budget. A partition nothing
    happened to reads the same as before (every append, HW move and leadership change is
    reported as a change), so it is not read twice."""
    again = {r.tp for r in changed}
    results = {tp: r for tp, r in previous.items() if tp not in again}
    used = sum(len(r.records) for r in results.values())
    _read_in_order(partitions, params, changed, params.max_bytes - used, results, {})
    return results


def _read_in_order(
    partitions: PartitionTable,
    params: FetchParams,
    requests: Iterable[FetchPartitionRequest],
    budget: int,
    results: dict[TopicPartition, FetchPartitionResult],
    leader_leos: dict[TopicPartition, int],
) -> None:
    """Read `requests` into `results`, sharing `budget`; the first partition with data (if
    `results` has none yet) gets at least one whole batch."""
    any_data = any(r.records for r in results.values())
    for req in requests:
        result = read_partition(
            partitions, req, params.is_follower, budget, not any_data, params.leader_throttle,
            read_committed=params.read_committed,
        )  # fmt: skip
        if result.error is ErrorCode.NONE:
            leader_leos[req.tp] = partitions[req.tp].log.log_end_offset
        results[req.tp] = result
        budget -= len(result.records)
        any_data = any_data or bool(result.records)


def read_partition(
    partitions: PartitionTable,
    req: FetchPartitionRequest,
    is_follower: bool,
    budget: int,
    first_with_data: bool,
    throttle: Callable[[TopicPartition, Partition], bool] | None = None,
    *,
    read_committed: bool = False,
) -> FetchPartitionResult:
    hosted = partitions.get(req.tp)
    if hosted is None:
        return FetchPartitionResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    p, log = hosted.partition, hosted.log
    error = p.check_current_leader_epoch(req.current_leader_epoch)
    if error is ErrorCode.NONE and not p.is_leader:
        error = ErrorCode.NOT_LEADER_OR_FOLLOWER
    if error is not ErrorCode.NONE:
        return FetchPartitionResult(error)
    hw, start = p.high_watermark, log.log_start_offset
    if is_follower:
        lso = -1
    elif read_committed:
        lso = log.last_stable_offset(hw)
    else:
        lso = log.reported_last_stable_offset(hw)
    max_bytes = min(req.max_bytes, budget)
    if max_bytes <= 0 and not first_with_data:
        return FetchPartitionResult(ErrorCode.NONE, hw, start, last_stable_offset=lso)
    if throttle is not None and throttle(req.tp, p):  # throttled: HW and start only
        return FetchPartitionResult(ErrorCode.NONE, hw, start, last_stable_offset=lso)
    limit = None if is_follower else lso if read_committed else hw
    try:
        data = log.read(req.fetch_offset, max(max_bytes, 1), limit)
    except OffsetOutOfRange:
        return FetchPartitionResult(
            ErrorCode.OFFSET_OUT_OF_RANGE, hw, start, last_stable_offset=lso
        )
    aborted = None
    if read_committed:
        found = log.aborted_transactions(req.fetch_offset, data)
        aborted = tuple((a.producer_id, a.first_offset) for a in found)
    return FetchPartitionResult(ErrorCode.NONE, hw, start, data, lso, aborted)


def readable_bytes(
    partitions: PartitionTable,
    req: FetchPartitionRequest,
    is_follower: bool,
    up_to: int,
    throttle: Callable[[TopicPartition, Partition], bool] | None = None,
    *,
    read_committed: bool = False,
) -> int | None:
    """Bytes a waiting fetch could read from `req`'s partition now, counted up to about
    `up_to` (at least one whole batch when there is one); None if reading it would fail, which
    ends the wait. Nothing is read while the partition has nothing new (the idle case)."""
    hosted = partitions.get(req.tp)
    if hosted is None:
        return None
    p, log = hosted.partition, hosted.log
    if is_follower:
        limit = log.log_end_offset
    else:
        limit = log.last_stable_offset(p.high_watermark) if read_committed else p.high_watermark
    if req.fetch_offset == limit and p.is_leader:
        if p.check_current_leader_epoch(req.current_leader_epoch) is not ErrorCode.NONE:
            return None
        return 0
    result = read_partition(
        partitions, req, is_follower, min(up_to, req.max_bytes), True, throttle,
        read_committed=read_committed,
    )  # fmt: skip
    return None if result.error is not ErrorCode.NONE else len(result.records)
