"""A group coordinator's state as `__consumer_offsets` holds it, and the rules over it. Pure.

- `replay`: what a coordinator loads when it becomes leader of a partition of the topic
  (GroupMetadataManager.doLoadGroupsAndOffsets): records in log order, later ones win, a null
  value removes the offset or group. A record whose key or value does not decode is skipped and
  reported (Kafka's load stops at it with an IllegalStateException and the partition stays
  unloaded; skipping one record keeps every other group served).
  Offsets a transactional producer committed (TxnOffsetCommit) wait per producer until its
  COMMIT marker makes them committed (unless a later plain commit is already loaded for that
  partition: the newer record wins, CommitRecordMetadataAndOffset.olderThan) or its ABORT marker
  drops them; those still waiting after the load are the groups' pending transactional offsets.
- `expired_offsets`: which committed offsets `offsets.retention.minutes` has expired
  (GroupMetadata.removeExpiredOffsets, KIP-211): for an Empty group, retention counts from when
  it became Empty (or each offset's commit, for an old record without that time); for a consumer
  group with members, only offsets of topics it no longer subscribes to, from their commit; for a
  group without a protocol (standalone consumers committing), from each commit; an offset with
  an old explicit expire timestamp expires then. Offsets with a commit in flight never expire.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from minibroker.core.coordinator_log.group_records import (
    GroupKey,
    GroupValue,
    OffsetKey,
    OffsetValue,
    read_group_value,
    read_key,
    read_offset_value,
)
from minibroker.core.coordinator_log.schema import RecordFormatError
from minibroker.core.types import TopicPartition

CONSUMER_PROTOCOL = "consumer"


@dataclass(frozen=True)
class CommittedOffset:
    """A committed offset and where its record is (Kafka's CommitRecordMetadataAndOffset)."""

    value: OffsetValue
    record_offset: int


NOT_APPENDED = -1  # a pending transactional offset whose record is still being appended


@dataclass
class GroupLog:
    """The groups and committed offsets of one partition of `__consumer_offsets`."""

    groups: dict[str, GroupValue] = field(default_factory=dict)
    offsets: dict[str, dict[TopicPartition, CommittedOffset]] = field(default_factory=dict)
    skipped: list[tuple[int, str]] = field(default_factory=list)  # (record offset, why)
    # producer id -> (group, partition) -> offset, until the producer's marker
    pending_txn: dict[int, dict[tuple[str, TopicPartition], CommittedOffset]] = field(
        default_factory=dict
    )

    def group_ids(self) -> set[str]:
        """Every group with metadata or committed offsets (a group with offsets only is a
        standalone consumers' group, Kafka's protocol-less Empty group)."""
        return set(self.groups) | {g for g, o in self.offsets.items() if o}

    def apply(
        self, key: bytes | None, value: bytes | None, record_offset: int, txn_producer: int = -1
    ) -> None:
        """One record, in log order; `txn_producer`: the producer id of a transactional batch."""
        if key is None:
            self.skipped.append((record_offset, "a record without a key"))
            return
        try:
            parsed = read_key(key)
            if isinstance(parsed, OffsetKey):
                self._offset(parsed, read_offset_value(value), record_offset, txn_producer)
            else:
                self._group(parsed, read_group_value(value))
        except RecordFormatError as exc:
            self.skipped.append((record_offset, str(exc)))

    def prepare_txn_offsets(
        self, producer_id: int, group: str, items: Iterable[tuple[TopicPartition, OffsetValue]]
    ) -> dict[tuple[str, TopicPartition], CommittedOffset]:
        """A TxnOffsetCommit's offsets, pending from before their record is appended
        (GroupMetadata.prepareTxnOffsetCommit): a marker written meanwhile finds them."""
        prepared = {(group, tp): CommittedOffset(v, NOT_APPENDED) for tp, v in items}
        self.pending_txn.setdefault(producer_id, {}).update(prepared)
        return prepared

    def txn_offsets_appended(
        self,
        producer_id: int,
        prepared: dict[tuple[str, TopicPartition], CommittedOffset],
        base_offset: int | None,
    ) -> None:
        """Their append ended: at `base_offset` (onTxnOffsetCommitAppend), or failed (None:
        failPendingTxnOffsetCommit, the client retries). Offsets a marker completed meanwhile,
        or a later commit replaced, are left as they are."""
        waiting = self.pending_txn.get(producer_id)
        if waiting is None:
            return
        for i, (key, c) in enumerate(prepared.items()):
            if waiting.get(key) is not c:
                continue
            if base_offset is None:
                del waiting[key]
            else:
                waiting[key] = CommittedOffset(c.value, base_offset + i)
        if not waiting:
            del self.pending_txn[producer_id]

    def apply_marker(self, producer_id: int, commit: bool) -> None:
        """A transaction marker in the partition: the producer's waiting offsets are committed
        (where no newer record is loaded) or dropped."""
        for (group, tp), c in self.pending_txn.pop(producer_id, {}).items():
            if not commit or c.record_offset == NOT_APPENDED:
                # A commit marker before its offsets were appended: the coordinator answers
                # EndTxn only after TxnOffsetCommit succeeded, so it cannot happen (Kafka
                # throws IllegalStateException); an abort drops them either way.
                continue
            loaded = self.offsets.setdefault(group, {})
            if tp not in loaded or loaded[tp].record_offset < c.record_offset:
                loaded[tp] = c

    def _offset(
        self, key: OffsetKey, value: OffsetValue | None, record_offset: int, txn_producer: int
    ) -> None:
        tp = TopicPartition(key.topic, key.partition)
        if txn_producer >= 0:
            waiting = self.pending_txn.setdefault(txn_producer, {})
            if value is None:
                waiting.pop((key.group, tp), None)
            else:
                waiting[(key.group, tp)] = CommittedOffset(value, record_offset)
            return
        if value is None:
            self.offsets.get(key.group, {}).pop(tp, None)
        else:
            self.offsets.setdefault(key.group, {})[tp] = CommittedOffset(value, record_offset)

    def _group(self, key: GroupKey, value: GroupValue | None) -> None:
        if value is None:
            self.groups.pop(key.group, None)
        else:
            self.groups[key.group] = value


def replay(records: Iterable[tuple[bytes | None, bytes | None, int]]) -> GroupLog:
    """The state after (key, value, record offset) records, in log order."""
    log = GroupLog()
    for key, value, record_offset in records:
        log.apply(key, value, record_offset)
    return log


def expired_offsets(
    offsets: dict[TopicPartition, CommittedOffset],
    *,
    protocol_type: str | None,
    empty: bool,
    subscribed_topics: set[str] | None,
    current_state_timestamp: int | None,
    pending: set[TopicPartition],
    now_ms: int,
    retention_ms: int,
) -> set[TopicPartition]:
    """The partitions whose committed offsets have expired (see the module docstring)."""

    def expired(base: int | None, subscribed: set[str]) -> set[TopicPartition]:
        out = set()
        for tp, c in offsets.items():
            if tp.topic in subscribed or tp in pending:
                continue
            expire = c.value.expire_timestamp
            if expire is not None:
                if now_ms >= expire:
                    out.add(tp)
            elif now_ms - (c.value.commit_timestamp if base is None else base) >= retention_ms:
                out.add(tp)
        return out

    if protocol_type and empty:
        return expired(current_state_timestamp, set())
    if protocol_type == CONSUMER_PROTOCOL and subscribed_topics is not None:
        return expired(None, subscribed_topics)
    if not protocol_type:
        return expired(None, set())
    return set()  # a group of another protocol with members: nothing expires
