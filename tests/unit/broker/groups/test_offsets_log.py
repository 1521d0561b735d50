"""A group coordinator's load of `__consumer_offsets` and Kafka 2.6's offset expiry
(GroupMetadataManagerTest: testLoadOffsetsWithTombstones, testLoadGroupWithTombstone,
testOffsetExpirationSemantics, testOffsetExpirationOfSimpleConsumer,
testOffsetExpirationOfActiveGroupSemantics, testLoadTransactionalOffsetsWithoutGroup,
testDoNotLoadAbortedTransactionalOffsetCommits, testGroupLoadWithConsumerAndTransactional
OffsetCommitsTransactionWins, testGroupLoadWithConsumerAndTransactionalOffsetCommitsConsumerWins).
"""

from __future__ import annotations

from broker.groups.offsets_log import CommittedOffset, GroupLog, expired_offsets, replay
from minibroker.core.coordinator_log.group_records import (
    GroupKey,
    GroupValue,
    OffsetKey,
    OffsetValue,
    group_key,
    group_value,
    offset_key,
    offset_value,
)
from minibroker.core.types import TopicPartition

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
U0 = TopicPartition("u", 0)
DAY = 86_400_000


def commit(group: str, tp: TopicPartition, offset: int, ts: int = 0) -> tuple[bytes, bytes]:
    return offset_key(OffsetKey(group, tp.topic, tp.partition)), offset_value(
        OffsetValue(offset, "", ts)
    )


def test_later_records_win_and_tombstones_remove() -> None:
    k0, v0 = commit("g", T0, 5)
    _, v0b = commit("g", T0, 9)
    k1, v1 = commit("g", T1, 3)
    gk = group_key(GroupKey("g"))
    gv = group_value(GroupValue("consumer", 1, "range", None, 100))
    log = replay([(k0, v0, 0), (k1, v1, 1), (k0, v0b, 2), (k1, None, 3), (gk, gv, 4)])
    assert {tp: c.value.offset for tp, c in log.offsets["g"].items()} == {T0: 9}
    assert log.offsets["g"][T0].record_offset == 2
    assert log.groups["g"].generation == 1
    gone = replay([(gk, gv, 0), (gk, None, 1), (*commit("h", T0, 1), 2)])
    assert "g" not in gone.groups and gone.group_ids() == {"h"}


def test_transactional_offsets_wait_for_their_marker() -> None:
    log = GroupLog()
    log.apply(*commit("g", T0, 5), 0, txn_producer=7)
    log.apply(*commit("g", T1, 6), 1, txn_producer=8)
    assert log.offsets == {} and set(log.pending_txn) == {7, 8}
    log.apply_marker(7, commit=True)
    log.apply_marker(8, commit=False)  # aborted: never committed
    assert {tp: c.value.offset for tp, c in log.offsets["g"].items()} == {T0: 5}
    assert log.pending_txn == {}


def test_a_marker_during_the_append_of_transactional_offsets_completes_them() -> None:
    """GroupMetadata's prepareTxnOffsetCommit / onTxnOffsetCommitAppend /
    completePendingTxnOffsetCommit: the offsets are pending from before their append, so an
    abort written while the append waits for the ISR (the producer fenced meanwhile) drops
    them, and the append's end does not bring them back; a failed append unpends them."""
    log = GroupLog()
    value = OffsetValue(5, "", 0)
    aborted = log.prepare_txn_offsets(7, "g", [(T0, value)])
    assert set(log.pending_txn[7]) == {("g", T0)}  # OffsetFetch(require_stable): unstable
    log.apply_marker(7, commit=False)
    log.txn_offsets_appended(7, aborted, base_offset=40)
    assert log.pending_txn == {} and log.offsets == {}

    committed = log.prepare_txn_offsets(8, "g", [(T0, value), (T1, value)])
    log.txn_offsets_appended(8, committed, base_offset=50)
    log.apply_marker(8, commit=True)
    assert {tp: c.record_offset for tp, c in log.offsets["g"].items()} == {T0: 50, T1: 51}

    failed = log.prepare_txn_offsets(9, "g", [(T1, value)])
    log.txn_offsets_appended(9, failed, base_offset=None)  # the client retries
    assert log.pending_txn == {}


def test_the_newer_record_wins_between_a_plain_and_a_transactional_commit() -> None:
    txn_wins = GroupLog()
    txn_wins.apply(*commit("g", T0, 1), 0)
    txn_wins.apply(*commit("g", T0, 2), 1, txn_producer=7)
    txn_wins.apply_marker(7, commit=True)
    assert txn_wins.offsets["g"][T0].value.offset == 2
    plain_wins = GroupLog()
    plain_wins.apply(*commit("g", T0, 2), 0, txn_producer=7)
    plain_wins.apply(*commit("g", T0, 1), 1)
    plain_wins.apply_marker(7, commit=True)
    assert plain_wins.offsets["g"][T0].value.offset == 1
    # a transactional tombstone takes back the producer's waiting offset
    gone = GroupLog()
    gone.apply(*commit("g", T0, 3), 0, txn_producer=7)
    gone.apply(commit("g", T0, 0)[0], None, 1, txn_producer=7)
    gone.apply_marker(7, commit=True)
    assert gone.offsets.get("g", {}) == {}


def test_a_record_that_does_not_decode_is_skipped_and_said() -> None:
    k, v = commit("g", T0, 5)
    log = replay([(None, b"x", 0), (b"\x00\x09junk", v, 1), (k, b"\x00\x07", 2), (k, v, 3)])
    assert [o for o, _ in log.skipped] == [0, 1, 2]
    assert log.offsets["g"][T0].value.offset == 5


def offsets(*entries: tuple[TopicPartition, int]) -> dict[TopicPartition, CommittedOffset]:
    return {tp: CommittedOffset(OffsetValue(1, "", ts), 0) for tp, ts in entries}


def expire(**kw: object) -> set[TopicPartition]:
    args: dict[str, object] = dict(
        protocol_type="consumer", empty=True, subscribed_topics=None,
        current_state_timestamp=None, pending=set(), now_ms=10 * DAY, retention_ms=7 * DAY,
    )  # fmt: skip
    args.update(kw)
    return expired_offsets(args.pop("offsets"), **args)  # type: ignore[arg-type]


def test_an_empty_group_expires_from_when_it_became_empty() -> None:
    o = offsets((T0, 0), (T1, 9 * DAY))
    assert expire(offsets=o, current_state_timestamp=3 * DAY) == {T0, T1}
    assert expire(offsets=o, current_state_timestamp=4 * DAY) == set()
    assert expire(offsets=o) == {T0}  # no state time (an old record): each commit's time
    assert expire(offsets=o, current_state_timestamp=3 * DAY, pending={T1}) == {T0}


def test_a_consumer_group_with_members_expires_only_unsubscribed_topics() -> None:
    o = offsets((T0, 0), (U0, 0))
    assert expire(offsets=o, empty=False, subscribed_topics={"t"}) == {U0}
    assert expire(offsets=o, empty=False, subscribed_topics=None) == set()
    assert expire(offsets=o, empty=False, protocol_type="connect", subscribed_topics={"t"}) == set()


def test_standalone_consumers_offsets_expire_from_their_commit() -> None:
    o = offsets((T0, 0), (T1, 5 * DAY))
    assert expire(offsets=o, protocol_type=None, empty=True) == {T0}


def test_an_old_explicit_expire_timestamp_wins() -> None:
    o = {T0: CommittedOffset(OffsetValue(1, "", 0, expire_timestamp=11 * DAY), 0)}
    assert expire(offsets=o, current_state_timestamp=0) == set()
    assert expire(offsets=o, now_ms=11 * DAY) == {T0}
