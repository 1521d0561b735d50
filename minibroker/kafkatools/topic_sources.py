"""Where kafka-topics reads and writes topics: through a broker's Kafka listener with the admin
client (`--bootstrap-server`, Kafka's AdminClient path) or in ZooKeeper with minibroker's admin
functions (`--zookeeper`, Kafka's AdminZkClient path). Both answer with the same descriptions,
so the output is written once (minibroker/kafkatools/topics.py)."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from minibroker.client.admin_zk import all_topics, create_topic, live_brokers, read_topic
from minibroker.client.topic_changes_zk import add_partitions, mark_for_deletion
from minibroker.core.errors import ApiError
from minibroker.core.zk_layout import DeleteTopicsZNode
from minibroker.kafkatools.common import ToolError
from minibroker.runtime.zk_store import ZkNoNode, ZkStore

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


@dataclass(frozen=True)
class PartitionDescription:
    partition: int
    leader: int | None
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()


@dataclass(frozen=True)
class TopicDescription:
    """A topic as kafka-topics --describe prints it: `configs` are the non-default ones."""

    name: str
    partitions: tuple[PartitionDescription, ...]
    configs: tuple[tuple[str, str], ...]
    min_insync_replicas: int | None = None
    marked_for_deletion: bool = False
    live_brokers: frozenset[int] = field(default_factory=frozenset)

    @property
    def replication_factor(self) -> int:
        if not self.partitions:
            return 0
        first = self.partitions[0]
        return len(first.replicas) - len(first.adding)


def _error(exc: Exception) -> ToolError:
    return ToolError(getattr(exc, "message", None) or str(exc))


class ZkTopics:
    """--zookeeper: Kafka 2.6's ZooKeeper path, on minibroker's admin functions."""

    zookeeper = True

    def __init__(self, zk: ZkStore) -> None:
        self.zk = zk

    def names(self) -> list[tuple[str, bool]]:
        """Every topic and whether it is marked for deletion."""
        try:
            pending = set(self.zk.children(DeleteTopicsZNode.path))
        except ZkNoNode:
            pending = set()
        return [(t, t in pending) for t in sorted(all_topics(self.zk))]

    def describe(self, names: Sequence[str]) -> list[TopicDescription]:
        live = frozenset(live_brokers(self.zk))
        out = []
        for name in names:
            info = read_topic(self.zk, name)
            if info is None:
                continue
            parts = []
            for p, replicas in sorted(info.assignment.items()):
                s = info.states.get(p)
                leader = s.leader if s is not None and s.leader >= 0 else None
                parts.append(
                    PartitionDescription(p, leader, tuple(replicas), tuple(s.isr) if s else ())
                )
            configs = tuple(info.config.items())
            min_isr = info.config.get("min.insync.replicas")
            out.append(
                TopicDescription(
                    name, tuple(parts), configs, int(min_isr) if min_isr else None,
                    info.marked_for_deletion, live,
                )
            )  # fmt: skip
        return out

    def create(
        self, name: str, partitions: int | None, replication_factor: int | None,
        configs: Mapping[str, str], assignment: Mapping[int, Sequence[int]] | None,
    ) -> None:  # fmt: skip
        try:
            create_topic(
                self.zk, name, partitions or 0, replication_factor or 0, configs, random.Random(),
                replica_assignment=assignment,
            )  # fmt: skip
        except ApiError as exc:
            raise _error(exc) from None

    def add_partitions(
        self, name: str, total: int, assignment: Sequence[Sequence[int]] | None
    ) -> None:
        try:
            add_partitions(self.zk, name, total, assignment)
        except ApiError as exc:
            raise _error(exc) from None

    def delete(self, name: str) -> bool:
        """Marks it for deletion; False if it was marked already."""
        try:
            return mark_for_deletion(self.zk, name)
        except ApiError as exc:
            raise _error(exc) from None


class AdminTopics:
    """--bootstrap-server: Kafka's AdminClient requests, through kafka-python's admin client."""

    zookeeper = False

    def __init__(self, admin: Any) -> None:
        self.admin = admin

    def names(self) -> list[tuple[str, bool]]:
        return [(t, False) for t in sorted(self.admin.list_topics())]

    def describe(self, names: Sequence[str]) -> list[TopicDescription]:
        from kafka.admin import ConfigResource, ConfigResourceType

        if not names:
            return []
        live = frozenset(b["broker_id"] for b in self.admin.describe_cluster()["brokers"])
        found = [t for t in self.admin.describe_topics(list(names)) if t["error_code"] == 0]
        configs = self.admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, t["name"]) for t in found],
            config_filter="all",
        ).get("topic", {})
        moving = self.admin.list_partition_reassignments()
        out = []
        for t in sorted(found, key=lambda t: t["name"]):
            entries = configs.get(t["name"], {})
            shown = tuple(
                (k, "null" if e.get("is_sensitive") else str(e.get("value")))
                for k, e in entries.items()
                if e.get("config_source") != "DEFAULT_CONFIG"
            )
            min_isr = entries.get("min.insync.replicas", {}).get("value")
            parts = []
            for p in sorted(t["partitions"], key=lambda p: p["partition_index"]):
                r = moving.get((t["name"], p["partition_index"])) or {}
                parts.append(
                    PartitionDescription(
                        p["partition_index"], p["leader_id"] if p["leader_id"] >= 0 else None,
                        tuple(p["replica_nodes"]), tuple(p["isr_nodes"]),
                        tuple(r.get("adding_replicas", ())), tuple(r.get("removing_replicas", ())),
                    )
                )  # fmt: skip
            out.append(
                TopicDescription(
                    t["name"], tuple(parts), shown, int(min_isr) if min_isr else None, False, live
                )
            )
        return out

    def create(
        self, name: str, partitions: int | None, replication_factor: int | None,
        configs: Mapping[str, str], assignment: Mapping[int, Sequence[int]] | None,
    ) -> None:  # fmt: skip
        from kafka.admin import NewTopic

        topic = NewTopic(
            name, partitions or -1, replication_factor or -1,
            replica_assignments={p: list(r) for p, r in (assignment or {}).items()},
            topic_configs=dict(configs),
        )  # fmt: skip
        self._raise_errors(self.admin.create_topics([topic], raise_errors=False)["topics"])

    def add_partitions(
        self, name: str, total: int, assignment: Sequence[Sequence[int]] | None
    ) -> None:
        from kafka.admin import NewPartitions

        got = self.admin.create_partitions(
            {name: NewPartitions(total, [list(r) for r in assignment] if assignment else None)},
            raise_errors=False,
        )
        self._raise_errors(
            [{"error_code": r.error_code, "error_message": r.error_message} for r in got.results]
        )

    def delete(self, name: str) -> bool:
        got = self.admin.delete_topics([name], raise_errors=False)
        self._raise_errors(got["topics"])
        return True

    @staticmethod
    def _raise_errors(results: Sequence[Mapping[str, Any]]) -> None:
        from kafka.errors import for_code

        for r in results:
            code = r.get("error_code", 0)
            if code:
                raise ToolError(r.get("error_message") or for_code(code).__name__)
