"""Committed offsets and the group tools over `__consumer_offsets` (Kafka's GroupCoordinator
handleCommitOffsets / handleFetchOffsets / handleListGroups / handleDescribeGroup /
handleDeleteGroups, GroupMetadataManager.cleanupGroupMetadata), for the groups of the partitions
this broker leads:

- a commit is one acks=all append of the group's offsets; a metadata string longer than
  offset.metadata.max.bytes is OFFSET_METADATA_TOO_LARGE and not written;
- every offsets.retention.check.interval.ms, offsets expired by offsets.retention.minutes
  (offsets_log.expired_offsets) get tombstones, and an Empty group left without offsets its
  own tombstone (it is Dead);
- a deleted topic's offsets get tombstones when UpdateMetadata says it is gone
  (handleDeletedPartitions);
- the offsets earlier minibroker versions kept in ZooKeeper (`/consumers/<group>/offsets`) are
  moved into the group's partition once, by its coordinator when it loads the partition, and
  then removed from ZooKeeper: nothing a user committed is lost across the upgrade."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Iterable, Mapping

from broker.groups.group import Group, GroupState
from broker.groups.offsets_log import expired_offsets
from broker.groups.offsets_manager import OffsetsManager
from broker.groups.offsets_topic import metadata_too_large
from broker.groups.persisted import subscribed_topics
from broker.groups.zk_offsets import ZkOffsets
from broker.log.log_types import wall_clock_ms
from broker.replica_manager import ReplicaManager
from minibroker.client import admin_zk
from minibroker.core.coordinator_log.group_records import NO_EPOCH, OffsetValue
from minibroker.core.errors import ApiError, ErrorCode
from minibroker.core.types import OFFSETS_TOPIC, TopicPartition
from minibroker.runtime import logging as slog
from minibroker.runtime.zk_errors import ZkError

DEAD = "Dead"
Commit = tuple[int, str | None, int]  # (offset, metadata, leader epoch)


class GroupOffsets:
    def __init__(self, rm: ReplicaManager, groups: dict[str, Group], offsets: OffsetsManager):
        self.rm = rm
        self.groups = groups  # the coordinator's
        self.offsets = offsets
        self.zk = ZkOffsets(rm.store)

    # ---- the topic ---------------------------------------------------------------------------

    async def create_offsets_topic(self) -> None:
        """KafkaApis.createInternalTopic: only with offsets.topic.replication.factor brokers
        alive (COORDINATOR_NOT_AVAILABLE until then), never lowered to fewer."""
        spec = self.offsets.spec
        live = len(self.rm.metadata.brokers)
        if spec.creation_error(live) is not ErrorCode.NONE:
            slog.event(
                "offsets_topic_waiting", logging.WARNING, live_brokers=live,
                replication_factor=spec.replication_factor,
            )  # fmt: skip
            return
        try:
            await asyncio.to_thread(
                admin_zk.create_topic, self.rm.store, OFFSETS_TOPIC, spec.partitions,
                spec.replication_factor, spec.configs(), random.Random(),
            )  # fmt: skip
        except ApiError as exc:
            if exc.code is not ErrorCode.TOPIC_ALREADY_EXISTS:
                slog.event("task_failed", logging.ERROR, task="offsets_topic", error=str(exc))
            return
        except ZkError:
            return  # the client asks again
        slog.event(
            "topic_auto_created", topic=OFFSETS_TOPIC, partitions=spec.partitions,
            replication_factor=spec.replication_factor, internal=True,
        )  # fmt: skip

    # ---- commits and fetches (the caller checked the group is served here) -------------------

    async def commit(
        self, group_id: str, offsets: Mapping[TopicPartition, Commit]
    ) -> dict[TopicPartition, ErrorCode]:
        limit = self.rm.settings.get_int("offset.metadata.max.bytes")
        now = wall_clock_ms()
        too_large = {tp for tp, (_, meta, _) in offsets.items() if metadata_too_large(meta, limit)}
        values = {
            tp: OffsetValue(o, meta or "", now, epoch if epoch >= 0 else NO_EPOCH)
            for tp, (o, meta, epoch) in offsets.items()
            if tp not in too_large
        }
        error = await self.offsets.store_offsets(group_id, values) if values else ErrorCode.NONE
        return {
            tp: ErrorCode.OFFSET_METADATA_TOO_LARGE if tp in too_large else error for tp in offsets
        }

    def fetch(
        self, group_id: str, tps: Iterable[TopicPartition] | None
    ) -> dict[TopicPartition, OffsetValue]:
        return self.offsets.committed(group_id, tps)

    # ---- ListGroups, DescribeGroups, DeleteGroups ---------------------------------------------

    def list_groups(self) -> list[tuple[str, str, str]]:
        """The groups of the loaded partitions: (group id, protocol type, state)."""
        out: dict[str, tuple[str, str, str]] = {}
        for log in self.offsets.loaded.values():
            for g in log.group_ids():
                out[g] = (g, self.protocol_type(g), GroupState.EMPTY.value)
        for g, group in self.groups.items():
            if self.offsets.state(g) is ErrorCode.NONE and (
                group.members or group.state is not GroupState.EMPTY or g in out
            ):
                out[g] = (g, group.protocol_type or "", group.state.value)
        return [out[g] for g in sorted(out)]

    def protocol_type(self, group_id: str) -> str:
        log = self.offsets.group_log(group_id)
        value = None if log is None else log.groups.get(group_id)
        return value.protocol_type if value is not None else ""

    def describe(self, group_id: str) -> tuple[str, Group | None]:
        """The group's state name and, when it has members, the group; Dead when unknown."""
        group = self.groups.get(group_id)
        if group is not None and (group.members or group.state is not GroupState.EMPTY):
            return group.state.value, group
        log = self.offsets.group_log(group_id)
        if log is not None and (log.offsets.get(group_id) or group_id in log.groups):
            return GroupState.EMPTY.value, None
        return DEAD, None

    async def delete(self, group_id: str) -> ErrorCode:
        """handleDeleteGroups: only an empty group; its offsets and metadata get tombstones."""
        state, group = self.describe(group_id)
        if state == DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if group is not None and group.members:
            return ErrorCode.NON_EMPTY_GROUP
        committed = self.offsets.committed(group_id, None)
        error = await self.offsets.remove(group_id, committed, whole_group=True)
        if error is ErrorCode.NONE:
            self.groups.pop(group_id, None)
            slog.event("group_deleted", group=group_id)
        return error

    # ---- expiry, deleted topics --------------------------------------------------------------

    async def expire_offsets_forever(self) -> None:
        while True:
            await asyncio.sleep(
                self.rm.settings.get_int("offsets.retention.check.interval.ms") / 1e3
            )
            try:
                await self.expire_offsets()
            except Exception as exc:  # a periodic task survives one bad round
                slog.event("task_failed", logging.ERROR, task="offsets_expiry", error=repr(exc))

    async def expire_offsets(self) -> None:
        """One round of cleanupGroupMetadata over the loaded partitions."""
        retention_ms = self.rm.settings.get_int("offsets.retention.minutes") * 60_000
        now = wall_clock_ms()
        for log in list(self.offsets.loaded.values()):
            for group_id in sorted(log.group_ids()):
                group = self.groups.get(group_id)
                value = log.groups.get(group_id)
                mine = log.offsets.get(group_id, {})
                gone = expired_offsets(
                    mine,
                    protocol_type=(group.protocol_type if group else None)
                    or (value.protocol_type if value else None),
                    empty=group is None or group.state is GroupState.EMPTY,
                    subscribed_topics=None if group is None else subscribed_topics(group),
                    current_state_timestamp=value.current_state_timestamp if value else None,
                    pending=set(self.offsets.pending.get(group_id, ())),
                    now_ms=now,
                    retention_ms=retention_ms,
                )
                # An Empty group left without offsets is Dead: its record goes too.
                empty = group is None or group.state is GroupState.EMPTY
                dead = empty and len(gone) == len(mine)
                if not gone and not (dead and value is not None):
                    continue
                error = await self.offsets.remove(group_id, gone, whole_group=dead)
                if error is ErrorCode.NONE:
                    if dead:
                        self.groups.pop(group_id, None)
                    slog.event(
                        "group_offsets_expired", group=group_id, partitions=len(gone), dead=dead
                    )

    def on_partitions_deleted(self, tps: list[TopicPartition]) -> None:
        """UpdateMetadata removed these partitions (a deleted topic): their offsets go."""
        deleted = set(tps)
        for log in self.offsets.loaded.values():
            for group_id, mine in list(log.offsets.items()):
                gone = deleted & set(mine)
                if gone:
                    asyncio.ensure_future(self.offsets.remove(group_id, gone, whole_group=False))

    # ---- the upgrade from ZooKeeper-stored offsets -------------------------------------------

    async def migrate_from_zookeeper(self, partition: int) -> None:
        try:
            groups = [
                g for g in await self.zk.groups() if self.offsets.partition_of(g) == partition
            ]
            for group_id in groups:
                await self._migrate(group_id)
        except ZkError as exc:  # tried again at the partition's next load
            slog.event("task_failed", logging.WARNING, task="offsets_migration", error=str(exc))

    async def _migrate(self, group_id: str) -> None:
        if self.offsets.committed(group_id, None):
            await self.zk.delete_group(group_id)  # moved before; its removal was interrupted
            return
        found = await self.zk.fetch(group_id, None)
        offsets = {tp: (o, meta, NO_EPOCH) for tp, (o, meta) in found.items() if o >= 0}
        errors = await self.commit(group_id, offsets) if offsets else {}
        if all(e is ErrorCode.NONE for e in errors.values()):
            await self.zk.delete_group(group_id)
            slog.event("group_offsets_migrated", group=group_id, partitions=len(offsets))
