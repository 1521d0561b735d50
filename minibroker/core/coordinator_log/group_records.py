"""The records of `__consumer_offsets` in Kafka 2.6's formats (`kafka/coordinator/group/
GroupMetadataManager.scala`: offsetCommitKey, groupMetadataKey, offsetCommitValue,
groupMetadataValue, readMessageKey, readOffsetMessageValue, readGroupMessageValue), so that
Kafka's own tools (`kafka-console-consumer --formatter ...OffsetsMessageFormatter`) could read
minibroker's topic and minibroker could read Kafka's. Pure.

Every key and value starts with an int16 schema version:
- key v0/v1 `group, topic, partition`: a committed offset; key v2 `group`: a group's metadata;
- offset value v0 `offset, metadata, timestamp`, v1 `+ expire_timestamp` (written by 2.6 only
  when a commit sets a retention time, OffsetCommit v1-v4), v2 `offset, metadata,
  commit_timestamp`, v3 `offset, leader_epoch, metadata, commit_timestamp` (what 2.6 writes);
- group value v0-v3: protocol type, generation, protocol, leader, (v2+) the time of the group's
  current state, the members (v1+ with rebalance timeout, v3+ with group.instance.id).
A null value is a tombstone: the offset or group is gone. Unlike 2.6.0, the current state's time
is read back from v3 values too (KAFKA-10401, fixed in 2.6.1)."""

from __future__ import annotations

from dataclasses import dataclass

from minibroker.core.coordinator_log.schema import Reader, RecordFormatError, Writer

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3
NO_EPOCH = -1  # RecordBatch.NO_PARTITION_LEADER_EPOCH
NO_TIMESTAMP = -1  # OffsetCommitRequest.DEFAULT_TIMESTAMP


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group: str


@dataclass(frozen=True)
class OffsetValue:
    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = NO_EPOCH
    expire_timestamp: int | None = None  # only from an old commit with a retention time


@dataclass(frozen=True)
class MemberValue:
    member_id: str
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes  # the member's metadata for the group's protocol
    assignment: bytes
    group_instance_id: str | None = None


@dataclass(frozen=True)
class GroupValue:
    protocol_type: str  # "" when the group has none
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int | None
    members: tuple[MemberValue, ...] = ()


# ---- keys ------------------------------------------------------------------------------------


def offset_key(key: OffsetKey) -> bytes:
    w = Writer().int16(OFFSET_KEY_VERSION).string(key.group).string(key.topic)
    return w.int32(key.partition).done()


def group_key(key: GroupKey) -> bytes:
    return Writer().int16(GROUP_KEY_VERSION).string(key.group).done()


def read_key(data: bytes) -> OffsetKey | GroupKey:
    r = Reader(data, "__consumer_offsets key")
    version = r.int16()
    if version in (0, 1):
        return OffsetKey(r.string(), r.string(), r.int32())
    if version == GROUP_KEY_VERSION:
        return GroupKey(r.string())
    raise RecordFormatError(f"unknown __consumer_offsets key version {version}")


# ---- offset values ---------------------------------------------------------------------------


def offset_value(value: OffsetValue) -> bytes:
    """v1 when the commit has an expire timestamp (as 2.6 writes it), else v3."""
    if value.expire_timestamp is not None:
        w = Writer().int16(1).int64(value.offset).string(value.metadata)
        return w.int64(value.commit_timestamp).int64(value.expire_timestamp).done()
    w = Writer().int16(OFFSET_VALUE_VERSION).int64(value.offset).int32(value.leader_epoch)
    return w.string(value.metadata).int64(value.commit_timestamp).done()


def read_offset_value(data: bytes | None) -> OffsetValue | None:
    """None for a tombstone."""
    if data is None:
        return None
    r = Reader(data, "offset commit value")
    version = r.int16()
    if version in (0, 2):
        return OffsetValue(r.int64(), r.string(), r.int64())
    if version == 1:
        offset, metadata, commit, expire = r.int64(), r.string(), r.int64(), r.int64()
        return OffsetValue(offset, metadata, commit, NO_EPOCH, None if expire == -1 else expire)
    if version == 3:
        offset, epoch, metadata, commit = r.int64(), r.int32(), r.string(), r.int64()
        return OffsetValue(offset, metadata, commit, epoch if epoch >= 0 else NO_EPOCH)
    raise RecordFormatError(f"unknown offset commit value version {version}")


# ---- group values ----------------------------------------------------------------------------


def group_value(value: GroupValue) -> bytes:
    """Version 3, as 2.6 writes it (inter.broker.protocol.version 2.3 and later)."""
    w = Writer().int16(GROUP_VALUE_VERSION).string(value.protocol_type).int32(value.generation)
    w.nullable_string(value.protocol).nullable_string(value.leader)
    w.int64(
        NO_TIMESTAMP if value.current_state_timestamp is None else value.current_state_timestamp
    )
    w.int32(len(value.members))
    for m in value.members:
        w.string(m.member_id).nullable_string(m.group_instance_id)
        w.string(m.client_id).string(m.client_host)
        w.int32(m.rebalance_timeout_ms).int32(m.session_timeout_ms)
        w.bytes_(m.subscription).bytes_(m.assignment)
    return w.done()


def read_group_value(data: bytes | None) -> GroupValue | None:
    """None for a tombstone."""
    if data is None:
        return None
    r = Reader(data, "group metadata value")
    version = r.int16()
    if not 0 <= version <= 3:
        raise RecordFormatError(f"unknown group metadata value version {version}")
    protocol_type, generation = r.string(), r.int32()
    protocol, leader = r.nullable_string(), r.nullable_string()
    state_ts = r.int64() if version >= 2 else NO_TIMESTAMP
    members = []
    for _ in range(r.array_length()):
        member_id = r.string()
        instance = r.nullable_string() if version >= 3 else None
        client_id, host = r.string(), r.string()
        rebalance = r.int32() if version >= 1 else None
        session = r.int32()
        members.append(
            MemberValue(
                member_id, client_id, host, session if rebalance is None else rebalance,
                session, r.bytes_(), r.bytes_(), instance,
            )
        )  # fmt: skip
    return GroupValue(
        protocol_type, generation, protocol, leader,
        None if state_ts == NO_TIMESTAMP else state_ts, tuple(members),
    )  # fmt: skip
