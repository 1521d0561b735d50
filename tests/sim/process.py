"""What every simulated process shares: life and death, timers that die with the process, and
requests matched to their responses (or to a timeout) by request id."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.sim.kernel import IDLE, Kernel
from tests.sim.network import Network


class Process:
    def __init__(self, kernel: Kernel, net: Network, node_id: int) -> None:
        self.kernel = kernel
        self.net = net
        self.id = node_id
        self.alive = False
        # Bumped at every start: timers and answers meant for an earlier life are ignored.
        self.incarnation = 0
        self._pending: dict[int, Callable[[Any], None]] = {}
        net.add(node_id, self)

    def start(self) -> None:
        self.alive = True
        self.incarnation += 1
        self._pending = {}

    def stop(self) -> None:
        self.alive = False
        self._pending = {}

    # ---- timers --------------------------------------------------------------------------

    def later(self, delay_ms: int, fn: Callable[..., object], *args: Any) -> None:
        """Run `fn(*args)` after `delay_ms` unless this process died or restarted meanwhile."""
        self.kernel.after(delay_ms, self.id, self._fire, self.incarnation, fn, args)

    def every(self, period_ms: int, first_ms: int, fn: Callable[[], object]) -> None:
        def tick() -> None:
            fn()
            self.later(period_ms, tick)

        tick.__qualname__ = f"every {period_ms} ms: {getattr(fn, '__qualname__', 'task')}"
        self.later(first_ms, tick)

    def _fire(self, incarnation: int, fn: Callable[..., object], args: tuple[Any, ...]) -> object:
        if self.alive and incarnation == self.incarnation:
            return fn(*args)
        return IDLE

    # ---- requests ------------------------------------------------------------------------

    def request(self, dst: int, msg: Any, callback: Callable[[Any], None], timeout_ms: int) -> None:
        """Send `msg` (which has a `req_id`); `callback` gets the response, or None on timeout."""
        self._pending[msg.req_id] = callback
        self.net.send(self.id, dst, msg)
        self.later(timeout_ms, self._timed_out, msg.req_id)

    def _timed_out(self, req_id: int) -> object:
        callback = self._pending.pop(req_id, None)
        if callback is None:
            return IDLE  # answered in time
        callback(None)
        return None

    def take_response(self, msg: Any) -> bool:
        """Hand a response to whoever waits for it; False if it is not a response we await."""
        callback = self._pending.pop(getattr(msg, "req_id", -1), None)
        if callback is None:
            return False
        callback(msg)
        return True

    def respond(self, dst: int, msg: Any) -> None:
        self.net.send(self.id, dst, msg)

    def on_message(self, src: int, msg: Any) -> None:
        raise NotImplementedError
