"""Kafka's request framing, sans I/O: whole frames out in order, whatever the chunks; sizes
that cannot be refused before a byte is held for them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.kafka.framing import FrameError, FrameReader, frame


@given(
    payloads=st.lists(st.binary(max_size=300), max_size=8),
    cuts=st.lists(st.integers(1, 50), min_size=1, max_size=40),
)
def test_frames_come_out_whole_and_in_order_however_the_bytes_arrive(
    payloads: list[bytes], cuts: list[int]
) -> None:
    stream = b"".join(frame(p) for p in payloads)
    reader = FrameReader(max_frame_bytes=1000)
    out: list[bytes] = []
    pos, i = 0, 0
    while pos < len(stream):
        step = cuts[i % len(cuts)]
        out += reader.feed(stream[pos : pos + step])
        pos += step
        i += 1
    assert out == payloads
    assert reader.buffered == 0


def test_a_negative_size_is_refused() -> None:
    with pytest.raises(FrameError, match="negative"):
        FrameReader(1000).feed(b"\xff\xff\xff\xfe")


def test_a_size_over_the_limit_is_refused_before_any_of_it_is_held() -> None:
    reader = FrameReader(max_frame_bytes=1000)
    with pytest.raises(FrameError, match="socket.request.max.bytes"):
        reader.feed((1001).to_bytes(4, "big") + b"x" * 10)


def test_a_large_announced_frame_holds_only_what_arrived() -> None:
    reader = FrameReader(max_frame_bytes=100 << 20)
    assert reader.feed((100_000_000).to_bytes(4, "big") + b"x" * 10) == []
    assert reader.buffered == 10  # nothing reserved for the 100 MB it announced


def test_an_empty_frame_is_a_frame() -> None:
    assert FrameReader(10).feed(frame(b"") + frame(b"a")) == [b"", b"a"]
