"""/latest_producer_id_block: Kafka's bytes, and the next block's bounds."""

from __future__ import annotations

import pytest

from minibroker.core.zk_layout import (
    PRODUCER_ID_BLOCK_SIZE,
    ProducerIdBlock,
    ProducerIdBlockZNode,
    ZNodeFormatError,
    next_block,
)


def test_kafkas_json_with_the_bounds_as_strings() -> None:
    block = ProducerIdBlock(broker_id=2, block_start=1000, block_end=1999)
    encoded = ProducerIdBlockZNode.encode(block)
    assert encoded == b'{"version":1,"broker":2,"block_start":"1000","block_end":"1999"}'
    assert ProducerIdBlockZNode.decode(encoded) == block


def test_blocks_follow_each_other_from_zero() -> None:
    first = next_block(None, broker_id=1)
    assert (first.block_start, first.block_end) == (0, PRODUCER_ID_BLOCK_SIZE - 1)
    second = next_block(first, broker_id=3)
    assert (second.broker_id, second.block_start) == (3, PRODUCER_ID_BLOCK_SIZE)
    assert second.block_end - second.block_start + 1 == PRODUCER_ID_BLOCK_SIZE


@pytest.mark.parametrize(
    "data",
    [
        b'{"version":1,"broker":1,"block_start":"x","block_end":"9"}',
        b'{"version":1,"broker":1,"block_start":"9","block_end":"1"}',
        b'{"version":1,"broker":1}',
    ],
)
def test_a_damaged_block_is_a_format_error(data: bytes) -> None:
    with pytest.raises(ZNodeFormatError):
        ProducerIdBlockZNode.decode(data)
