"""The kazoo handler's poll()-based select keeps select.select's contract, which kazoo's
connection thread relies on (minibroker/runtime/zk_handler.py)."""

from __future__ import annotations

import os
import resource
import socket
import time
from collections.abc import Iterator

import pytest

from minibroker.runtime.zk_handler import poll_select


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def test_nothing_to_read_times_out_and_a_socket_is_writable(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    a, _b = pair
    started = time.monotonic()
    assert poll_select([a], [], [], 0.05) == ([], [], [])
    assert time.monotonic() - started >= 0.04
    assert poll_select([a], [a], [], 0) == ([], [a], [])


def test_data_and_a_closed_peer_are_readable_and_objects_come_back_as_given(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    a, b = pair
    b.send(b"x")
    assert poll_select([a, b], [], [], 1.0) == ([a], [], [])
    assert poll_select([a.fileno()], [], [], 1.0) == ([a.fileno()], [], [])
    a.recv(1)
    b.close()
    assert poll_select([a], [], [], 1.0)[0] == [a]  # EOF reads as ready, as with select


def test_a_descriptor_above_select_limit_works(pair: tuple[socket.socket, socket.socket]) -> None:
    """select.select refuses descriptors ≥ 1024 (a broker with 10,000 partitions has them)."""
    a, b = pair
    high = 1500
    limits = resource.getrlimit(resource.RLIMIT_NOFILE)
    if limits[0] <= high:  # as bench scale raises it for a 10,000-partition cluster
        resource.setrlimit(resource.RLIMIT_NOFILE, (high + 1, max(limits[1], high + 1)))
    try:
        os.dup2(a.fileno(), high)
        b.send(b"x")
        assert poll_select([high], [], [], 1.0) == ([high], [], [])
    finally:
        os.close(high)
        resource.setrlimit(resource.RLIMIT_NOFILE, limits)


def test_a_negative_timeout_is_refused() -> None:
    with pytest.raises(ValueError):
        poll_select([], [], [], -1)
