"""/admin, /config and /cluster/id (reference §1.10, §1.11)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from minibroker.core.types import TopicPartition
from minibroker.core.zk_layout.json_codec import ZNodeFormatError, dumps, int_field, int_list, loads
from minibroker.core.zk_layout.notifications import decode_partition_list, partition_list

# ---- /admin (reference §1.10) -----------------------------------------------------------------


class DeleteTopicsZNode:
    path = "/admin/delete_topics"


class DeleteTopicsTopicZNode:
    """Existence means "marked for deletion"; the znode has null data."""

    @staticmethod
    def path(topic: str) -> str:
        return f"{DeleteTopicsZNode.path}/{topic}"


class ReassignPartitionsZNode:
    path = "/admin/reassign_partitions"

    @staticmethod
    def encode(reassignment: Mapping[TopicPartition, Sequence[int]]) -> bytes:
        parts = [
            {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas)}
            for tp, replicas in reassignment.items()
        ]
        return dumps({"version": 1, "partitions": parts})

    @staticmethod
    def decode(data: bytes | None) -> dict[TopicPartition, tuple[int, ...]]:
        what = ReassignPartitionsZNode.path
        obj = loads(data, what)
        out: dict[TopicPartition, tuple[int, ...]] = {}
        for entry in obj.get("partitions") or []:
            tp = TopicPartition(str(entry["topic"]), int_field(entry, "partition", what))
            out[tp] = int_list(entry.get("replicas"), what)
        return out


class PreferredReplicaElectionZNode:
    path = "/admin/preferred_replica_election"

    @staticmethod
    def encode(partitions: Iterable[TopicPartition]) -> bytes:
        return dumps({"version": 1, "partitions": partition_list(partitions)})

    @staticmethod
    def decode(data: bytes | None) -> tuple[TopicPartition, ...]:
        what = PreferredReplicaElectionZNode.path
        return decode_partition_list(loads(data, what), what)


# ---- /config (reference §1.11) ----------------------------------------------------------------


class ConfigEntityZNode:
    """/config/<type>/<name>: overrides as string values, e.g. min.insync.replicas."""

    @staticmethod
    def path(entity_type: str, name: str) -> str:
        return f"/config/{entity_type}/{name}"

    @staticmethod
    def encode(config: Mapping[str, str]) -> bytes:
        return dumps({"version": 1, "config": {k: str(v) for k, v in config.items()}})

    @staticmethod
    def decode(data: bytes | None) -> dict[str, str]:
        obj = loads(data, "config entity")
        raw = obj.get("config") or {}
        if not isinstance(raw, dict):
            raise ZNodeFormatError("config entity: 'config' must be an object")
        return {str(k): str(v) for k, v in raw.items()}


class ConfigEntityChangeNotificationZNode:
    path = "/config/changes"


class ConfigEntityChangeNotificationSequenceZNode:
    prefix = "config_change_"
    path_prefix = f"{ConfigEntityChangeNotificationZNode.path}/{prefix}"

    @staticmethod
    def encode(entity_path: str) -> bytes:
        return dumps({"version": 2, "entity_path": entity_path})

    @staticmethod
    def decode(data: bytes | None) -> str:
        obj = loads(data, "config_change")
        entity_path = obj.get("entity_path")
        if not isinstance(entity_path, str):
            raise ZNodeFormatError("config_change: 'entity_path' must be a string")
        return entity_path


# ---- /cluster/id (reference §1.11) ------------------------------------------------------------


class ClusterIdZNode:
    path = "/cluster/id"

    @staticmethod
    def encode(cluster_id: str) -> bytes:
        # "version" is a string here, unlike every other znode (pitfall 29).
        return dumps({"version": "1", "id": cluster_id})

    @staticmethod
    def decode(data: bytes | None) -> str:
        obj = loads(data, ClusterIdZNode.path)
        cid = obj.get("id")
        if not isinstance(cid, str):
            raise ZNodeFormatError("/cluster/id: 'id' must be a string")
        return cid
