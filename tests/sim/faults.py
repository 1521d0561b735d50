"""The nemesis: random faults during the fault phase, all healed at its end (then the cluster
has a quiet period, still checked, to elect, catch up and expand ISRs).

Faults: process kills (page cache survives) and power losses (unflushed bytes lost) of brokers,
a power cut of every broker at once, controller kills, cuts between two nodes or between a node
and ZooKeeper, a node isolated from everyone, loss storms, and idle periods of the producer.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING

from tests.sim.config import CONSUMER_ID, CONTROLLER_IDS, PRODUCER_ID
from tests.sim.kernel import ZK_NODE

if TYPE_CHECKING:
    from tests.sim.runner import Cluster


class Nemesis:
    def __init__(self, cluster: Cluster) -> None:
        self.c = cluster
        self.cfg = cluster.cfg
        self.rng = random.Random(f"faults-{cluster.cfg.seed}")
        self.faults: list[tuple[int, Callable[[], None]]] = [
            (6, self._crash_broker),
            (1, self._power_cut_all),
            (2, self._crash_controller),
            (5, self._cut_pair),
            (3, self._cut_from_zk),
            (2, self._isolate),
            (1, self._storm),
            (2, self._pause_producer),
        ]
        self._total = sum(w for w, _ in self.faults)
        self.base_drop_rate = cluster.net.drop_rate
        self.end_ms = cluster.kernel.start_ms + cluster.cfg.fault_phase_ms

    def start(self) -> None:
        self.c.kernel.after(self._gap(), ZK_NODE, self._next)
        self.c.kernel.at(self.end_ms, ZK_NODE, self._heal_everything)

    def _gap(self) -> int:
        return 1 + int(self.rng.expovariate(1 / self.cfg.fault_interval_ms))

    def _next(self) -> None:
        if self.c.kernel.now >= self.end_ms:
            return
        pick = self.rng.randrange(self._total)
        for weight, fault in self.faults:
            if pick < weight:
                fault()
                break
            pick -= weight
        self.c.kernel.after(self._gap(), ZK_NODE, self._next)

    def _duration(self, low: int, high: int) -> int:
        return low + self.rng.randrange(max(high - low, 1))

    def _until_heal(
        self, ms: int, fn: Callable[..., None], *args: int, node: int = ZK_NODE
    ) -> None:
        """Undo a fault after `ms`, or at the end of the fault phase, whichever comes first.
        A restart runs as an event of the restarted `node`, so the checker looks at it."""
        at = min(self.c.kernel.now + ms, self.end_ms)
        self.c.kernel.at(at, node, fn, *args)

    # ---- processes -------------------------------------------------------------------------

    def _crash_broker(self) -> None:
        live = [b for b in self.cfg.brokers if self.c.brokers[b].alive]
        if not live:
            return
        b = self.rng.choice(live)
        power = self.rng.random() < self.cfg.power_loss_share
        self.c.kernel.note(f"fault: broker {b} {'loses power' if power else 'is killed'}")
        self.c.brokers[b].crash(power_loss=power)
        down = self._duration(50, 3 * self.cfg.session_timeout_ms)
        self._until_heal(down, self._restart_broker, b, node=b)

    def _power_cut_all(self) -> None:
        self.c.kernel.note("fault: power cut of every broker")
        for b in self.cfg.brokers:
            if self.c.brokers[b].alive:
                self.c.brokers[b].crash(power_loss=True)
            down = self._duration(50, 2 * self.cfg.session_timeout_ms)
            self._until_heal(down, self._restart_broker, b, node=b)

    def _restart_broker(self, b: int) -> None:
        if not self.c.brokers[b].alive:
            self.c.kernel.note(f"broker {b} restarts")
            self.c.brokers[b].start()

    def _crash_controller(self) -> None:
        live = [c for c in CONTROLLER_IDS if self.c.controllers[c].alive]
        if not live:
            return
        c = self.rng.choice(live)
        self.c.kernel.note(f"fault: controller {c} is killed")
        self.c.controllers[c].crash()
        down = self._duration(50, 2 * self.cfg.session_timeout_ms)
        self._until_heal(down, self._restart_controller, c, node=c)

    def _restart_controller(self, c: int) -> None:
        if not self.c.controllers[c].alive:
            self.c.controllers[c].start()

    # ---- the network -----------------------------------------------------------------------

    def _servers(self) -> list[int]:
        return [*self.cfg.brokers, *CONTROLLER_IDS]

    def _cut(self, a: int, b: int, ms: int) -> None:
        self.c.kernel.note(f"fault: cut {a} <-> {b} for {ms} ms")
        self.c.net.cut(a, b)
        self._until_heal(ms, self.c.net.heal, a, b)

    def _cut_pair(self) -> None:
        nodes = [*self._servers(), PRODUCER_ID, CONSUMER_ID]
        a, b = self.rng.sample(nodes, 2)
        self._cut(a, b, self._duration(100, 4 * self.cfg.lag_ms))

    def _cut_from_zk(self) -> None:
        a = self.rng.choice(self._servers())
        self._cut(a, ZK_NODE, self._duration(100, 3 * self.cfg.session_timeout_ms))

    def _isolate(self) -> None:
        a = self.rng.choice(self._servers())
        ms = self._duration(100, 3 * max(self.cfg.lag_ms, self.cfg.session_timeout_ms))
        for other in [ZK_NODE, *self._servers(), PRODUCER_ID, CONSUMER_ID]:
            if other != a:
                self._cut(a, other, ms)

    def _storm(self) -> None:
        self.c.kernel.note("fault: loss storm")
        self.c.net.drop_rate = self.rng.choice((0.1, 0.3, 0.6))
        self._until_heal(self._duration(100, 2000), self._calm)

    def _calm(self) -> None:
        self.c.net.drop_rate = self.base_drop_rate

    def _pause_producer(self) -> None:
        ms = self._duration(self.cfg.lag_ms, 3 * self.cfg.lag_ms)
        self.c.kernel.note(f"fault: producer idle for {ms} ms")
        self.c.producer.pause(ms)

    # ---- the end of the fault phase ----------------------------------------------------------

    def _heal_everything(self) -> None:
        self.c.kernel.note("fault phase over: heal every cut, restart every process")
        self.c.net.heal_all()
        self._calm()
        for b in self.cfg.brokers:
            self.c.kernel.after(0, b, self._restart_broker, b)
        for c in CONTROLLER_IDS:
            self.c.kernel.after(0, c, self._restart_controller, c)
