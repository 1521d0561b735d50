"""Tokens: how the simulation names the batch at each offset without decoding records.

A batch's token is its CRC (which covers its records, each with a unique value) and its leader
epoch (which the CRC does not cover). Two logs hold the same batches at the same offsets iff
their token lists are equal, which makes comparing logs a list comparison.
"""

from __future__ import annotations

import struct

_PREFIX = struct.Struct(">qiibIhi")  # base offset .. last offset delta of a v2 batch header


def batch_tokens(data: bytes, leader_epoch: int | None = None) -> list[int]:
    """One token per offset: the batch's CRC and leader epoch (the CRC does not cover the
    epoch, so both are needed to tell two batches apart). `leader_epoch` overrides the epoch
    in the bytes (a producer's batch before the leader stamps it)."""
    out: list[int] = []
    pos, end = 0, len(data)
    while pos < end:
        _, length, epoch, _, crc, _, last_delta = _PREFIX.unpack_from(data, pos)
        if leader_epoch is not None:
            epoch = leader_epoch
        out.extend([crc | ((epoch + 1) << 32)] * (last_delta + 1))
        pos += length + 12
    return out


def first_offset(data: bytes) -> int:
    """The base offset of the first batch in `data` (which must not be empty)."""
    return int(_PREFIX.unpack_from(data, 0)[0])
