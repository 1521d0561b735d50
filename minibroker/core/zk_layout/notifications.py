"""Sequential notification znodes: ISR changes, log dir events (reference §1.8, §1.9)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from minibroker.core.types import TopicPartition
from minibroker.core.zk_layout.json_codec import ZNodeFormatError, dumps, int_field, loads

# ---- sequential notifications (reference §1.8, §1.9, §1.11) -----------------------------------


def sequence_number(child_name: str, prefix: str) -> int:
    """The 10-digit sequence ZooKeeper appended to a sequential child name."""
    if not child_name.startswith(prefix) or not child_name[len(prefix) :].isdigit():
        raise ZNodeFormatError(f"{child_name!r} is not a {prefix}<seq> node")
    return int(child_name[len(prefix) :])


def partition_list(partitions: Iterable[TopicPartition]) -> list[dict[str, Any]]:
    return [{"topic": tp.topic, "partition": tp.partition} for tp in partitions]


def decode_partition_list(obj: Mapping[str, Any], what: str) -> tuple[TopicPartition, ...]:
    raw = obj.get("partitions")
    if not isinstance(raw, list):
        raise ZNodeFormatError(f"{what}: 'partitions' must be a list")
    out = []
    for entry in raw:
        if not isinstance(entry, dict) or not isinstance(entry.get("topic"), str):
            raise ZNodeFormatError(f"{what}: bad partition entry {entry!r}")
        out.append(TopicPartition(entry["topic"], int_field(entry, "partition", what)))
    return tuple(out)


class IsrChangeNotificationZNode:
    path = "/isr_change_notification"


class IsrChangeNotificationSequenceZNode:
    prefix = "isr_change_"
    path_prefix = f"{IsrChangeNotificationZNode.path}/{prefix}"

    @staticmethod
    def path(seq_child: str) -> str:
        return f"{IsrChangeNotificationZNode.path}/{seq_child}"

    @staticmethod
    def encode(partitions: Iterable[TopicPartition]) -> bytes:
        return dumps({"version": 1, "partitions": partition_list(partitions)})

    @staticmethod
    def decode(data: bytes | None) -> tuple[TopicPartition, ...]:
        return decode_partition_list(loads(data, "isr_change"), "isr_change")

    @staticmethod
    def sequence(child_name: str) -> int:
        return sequence_number(child_name, IsrChangeNotificationSequenceZNode.prefix)


class LogDirEventNotificationZNode:
    path = "/log_dir_event_notification"


class LogDirEventNotificationSequenceZNode:
    prefix = "log_dir_event_"
    path_prefix = f"{LogDirEventNotificationZNode.path}/{prefix}"
    LOG_DIR_FAILURE = 1

    @staticmethod
    def encode(broker_id: int, event: int = 1) -> bytes:
        return dumps({"version": 1, "broker": broker_id, "event": event})

    @staticmethod
    def decode(data: bytes | None) -> tuple[int, int]:
        """(broker id, event type)."""
        obj = loads(data, "log_dir_event")
        return int_field(obj, "broker", "log_dir_event"), int_field(obj, "event", "log_dir_event")
