"""The simulated network: every message between two nodes is one event after a random delay.

Faults it models: loss (a drop rate, and any message sent or delivered across a cut), delay
with occasional spikes (which also reorders messages between the same two nodes), partitions
between node pairs (cuts can overlap: a link is up when no cut covers it) and dead nodes.
ZooKeeper is node 0; it is told when a node's link to it goes down or up, since that is what
decides session expiry.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, Protocol

from tests.sim.kernel import ZK_NODE, Kernel


class Node(Protocol):
    alive: bool

    def on_message(self, src: int, msg: Any) -> None: ...


class Network:
    def __init__(
        self,
        kernel: Kernel,
        rng: random.Random,
        *,
        delay_ms: tuple[int, int],
        spike_rate: float,
        spike_ms: int,
        drop_rate: float,
    ) -> None:
        self.kernel = kernel
        self.rng = rng
        self.nodes: dict[int, Node] = {}
        self.delay_min, self.delay_span = delay_ms[0], delay_ms[1] - delay_ms[0] + 1
        self.spike_rate = spike_rate
        self.spike_ms = spike_ms
        self.drop_rate = drop_rate
        self._cuts: dict[tuple[int, int], int] = {}
        # Told (node id) whenever a node's link to ZooKeeper changes.
        self.zk_link_changed: Callable[[int], None] = lambda node: None
        self.sent = 0

    def add(self, node_id: int, node: Node) -> None:
        self.nodes[node_id] = node

    # ---- links ---------------------------------------------------------------------------

    def connected(self, a: int, b: int) -> bool:
        return (a, b) not in self._cuts and (b, a) not in self._cuts

    def cut(self, a: int, b: int) -> None:
        key = (min(a, b), max(a, b))
        self._cuts[key] = self._cuts.get(key, 0) + 1
        if ZK_NODE in key and self._cuts[key] == 1:
            self.zk_link_changed(key[1])

    def heal(self, a: int, b: int) -> None:
        key = (min(a, b), max(a, b))
        left = self._cuts.get(key, 0) - 1
        if left > 0:
            self._cuts[key] = left
            return
        self._cuts.pop(key, None)
        if ZK_NODE in key:
            self.zk_link_changed(key[1])

    def heal_all(self) -> None:
        for a, b in list(self._cuts):
            self._cuts[(a, b)] = 1
            self.heal(a, b)

    def cut_pairs(self) -> list[tuple[int, int]]:
        return sorted(self._cuts)

    # ---- messages ------------------------------------------------------------------------

    def send(self, src: int, dst: int, msg: Any) -> None:
        if not self.connected(src, dst):
            return
        rng = self.rng.random
        if rng() < self.drop_rate:
            return
        delay = self.delay_min + int(rng() * self.delay_span)
        if rng() < self.spike_rate:
            delay += int(rng() * self.spike_ms)
        self.sent += 1
        self.kernel.after(delay, dst, self._deliver, src, dst, msg)

    def _deliver(self, src: int, dst: int, msg: Any) -> None:
        node = self.nodes[dst]
        if node.alive and self.connected(src, dst):
            node.on_message(src, msg)
