"""/latest_producer_id_block: the last block of producer ids a broker took (Kafka's
ProducerIdBlockZNode; ProducerIdManager hands ids out of it to idempotent producers)."""

from __future__ import annotations

from dataclasses import dataclass

from minibroker.core.zk_layout.json_codec import ZNodeFormatError, dumps, int_field, loads

# Kafka's ProducerIdManager.PidBlockSize.
PRODUCER_ID_BLOCK_SIZE = 1000
INT64_MAX = (1 << 63) - 1


@dataclass(frozen=True)
class ProducerIdBlock:
    broker_id: int
    block_start: int
    block_end: int  # inclusive


def next_block(
    last: ProducerIdBlock | None, broker_id: int, size: int = PRODUCER_ID_BLOCK_SIZE
) -> ProducerIdBlock:
    """The block after `last` (the first block when no broker took one yet)."""
    start = 0 if last is None else last.block_end + 1
    if start + size - 1 > INT64_MAX:
        raise ZNodeFormatError("producer ids are exhausted")
    return ProducerIdBlock(broker_id, start, start + size - 1)


class ProducerIdBlockZNode:
    path = "/latest_producer_id_block"

    @staticmethod
    def encode(block: ProducerIdBlock) -> bytes:
        # Kafka writes the block's bounds as strings.
        return dumps(
            {
                "version": 1,
                "broker": block.broker_id,
                "block_start": str(block.block_start),
                "block_end": str(block.block_end),
            }
        )

    @staticmethod
    def decode(data: bytes | None) -> ProducerIdBlock:
        what = ProducerIdBlockZNode.path
        obj = loads(data, what)
        try:
            start, end = int(obj["block_start"]), int(obj["block_end"])
        except (KeyError, TypeError, ValueError):
            raise ZNodeFormatError(f"{what}: block_start and block_end must be numbers") from None
        if not 0 <= start <= end:
            raise ZNodeFormatError(f"{what}: the block [{start}, {end}] is empty or negative")
        return ProducerIdBlock(int_field(obj, "broker", what), start, end)
