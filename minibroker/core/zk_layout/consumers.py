"""/consumers/<group>/offsets/<topic>/<partition>: a group's committed offset of a partition,
where Kafka 0.8's consumers kept it (ZkUtils' consumer offset dir; the data is the offset in
decimal). Earlier minibroker versions' group coordinators committed here; today's move such
offsets into __consumer_offsets once (broker/groups/group_offsets.py) and remove them.
An OffsetCommit's metadata string, which Kafka 0.8's znode had no room for, follows the offset
after a newline when there is one (the first line stays the bare offset)."""

from __future__ import annotations

from minibroker.core.types import TopicPartition
from minibroker.core.zk_layout.json_codec import ZNodeFormatError


class ConsumerOffsetZNode:
    root = "/consumers"

    @staticmethod
    def group_offsets_path(group_id: str) -> str:
        return f"{ConsumerOffsetZNode.root}/{group_id}/offsets"

    @staticmethod
    def topic_path(group_id: str, topic: str) -> str:
        return f"{ConsumerOffsetZNode.group_offsets_path(group_id)}/{topic}"

    @staticmethod
    def path(group_id: str, tp: TopicPartition) -> str:
        return f"{ConsumerOffsetZNode.topic_path(group_id, tp.topic)}/{tp.partition}"

    @staticmethod
    def encode(offset: int, metadata: str | None = None) -> bytes:
        text = str(offset) if not metadata else f"{offset}\n{metadata}"
        return text.encode("utf-8")

    @staticmethod
    def decode(data: bytes | None) -> int:
        return ConsumerOffsetZNode.decode_with_metadata(data)[0]

    @staticmethod
    def decode_with_metadata(data: bytes | None) -> tuple[int, str]:
        """(offset, metadata); the metadata is "" when none was committed."""
        try:
            first, _, metadata = (data or b"").decode("utf-8").partition("\n")
            return int(first), metadata
        except (UnicodeDecodeError, ValueError):
            raise ZNodeFormatError(
                f"a committed offset must be a decimal number: {data!r}"
            ) from None


def valid_group_id(group_id: str) -> bool:
    """A group id that names a ZooKeeper path segment (not empty, no '/', not '.' or '..')."""
    return bool(group_id) and "/" not in group_id and group_id not in (".", "..")
