"""The dashboard's one view of the cluster, kept current: ZooKeeper through watches (a change
reaches the page as soon as the watch fires), each live broker's DescribeBroker every POLL_S,
or less often on big clusters (LEOs, HWs, the leader's view of its followers), and every
process's events, followed live. Subscribers (the page's event streams) get the changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import deque
from typing import Any

from minibroker.client.admin import BrokerDescription, BrokerUnreachable, describe_broker_async
from minibroker.client.channels import ChannelPool
from minibroker.client.event_text import is_routine, is_story, sentence
from minibroker.client.events import Event, Follower, Source
from minibroker.core.listeners import from_strings, pick
from minibroker.dashboard.model import CAUGHT_UP_GRANULARITY_MS, History, Inputs, StateBuilder, diff
from minibroker.dashboard.zk_mirror import ZkMirror
from minibroker.locate import client_listener, registered_address
from minibroker.runtime.clock import now_ms

POLL_S = 1.0
# At most this share of a core goes to asking the brokers (at 1,000 partitions a round costs
# ~50 ms of CPU, so they are asked every ~2.5 s; ZooKeeper's changes still arrive at once).
POLL_CPU_SHARE = 0.02
DESCRIBE_TIMEOUT_S = 2.0
REBUILD_DELAY_S = 0.05  # a burst of watch callbacks (an election moves many partitions) is one
KEPT_EVENTS = 2000
EVENT_BATCH_S = 0.05
SUBSCRIBER_BACKLOG = 500  # a page that reads slower than this gets a full state instead


def sse(message: dict[str, Any]) -> bytes:
    """`message` as one Server-Sent Events message."""
    return b"data: " + json.dumps(message, separators=(",", ":")).encode() + b"\n\n"


class Collector:
    def __init__(self, zk_connect: str) -> None:
        self.zk_connect = zk_connect
        self.mirror = ZkMirror(zk_connect, self._changed)
        self.reports: dict[int, BrokerDescription | None] = {}
        self.report_errors: dict[int, str] = {}
        self._down_since: dict[int, int] = {}
        self._builder = StateBuilder()
        self.state: dict[str, Any] = self._builder.build(self._inputs())
        self.history = History()
        self.history.record(self.state["partitions"], [], now_ms())
        self.events: deque[Event] = deque(maxlen=KEPT_EVENTS)
        self.subscribers: set[asyncio.Queue[bytes | None]] = set()
        self._pool = ChannelPool()
        self._rebuild: asyncio.TimerHandle | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._stop = asyncio.Event()
        self.poll_interval_s = POLL_S
        self._event_batch: list[Event] = []
        # The partitions to look at in the next rebuild ("topic-p"); None: all of them.
        self._dirty: set[str] | None = set()

    async def start(self) -> None:
        self._tasks = [
            asyncio.ensure_future(self.mirror.run()),
            asyncio.ensure_future(self._poll_brokers()),
            asyncio.ensure_future(
                Follower(
                    self._event_sources, self._on_event, lambda _line: None, skip_routine=True
                ).run(self._stop)
            ),
        ]

    async def close(self) -> None:
        self._stop.set()
        self.mirror.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for q in self.subscribers:
            q.put_nowait(None)
        await self._pool.close()

    # ---- subscribers ---------------------------------------------------------------------------

    def subscribe(self) -> asyncio.Queue[bytes | None]:
        """A queue of Server-Sent Events messages, each already encoded (once for every
        subscriber); None when the collector closes."""
        q: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.subscribers.add(q)
        return q

    def unsubscribe(self, q: asyncio.Queue[bytes | None]) -> None:
        self.subscribers.discard(q)

    def _publish(self, message: dict[str, Any]) -> None:
        if not self.subscribers:
            return
        data = sse(message)
        for q in list(self.subscribers):
            if q.qsize() >= SUBSCRIBER_BACKLOG:
                while not q.empty():
                    q.get_nowait()
                q.put_nowait(sse({"type": "state", "state": self.state}))
            else:
                q.put_nowait(data)

    # ---- the state -------------------------------------------------------------------------------

    def _inputs(self) -> Inputs:
        c = self.mirror.copy
        holding = {b for info in c.topics() for r in info.assignment.values() for b in r}
        now = now_ms()
        for b in holding - set(c.brokers):
            self._down_since.setdefault(b, now)  # first seen missing (or down at our start)
        for b in set(self._down_since) & set(c.brokers):
            del self._down_since[b]
        return Inputs(
            zk_connect=self.zk_connect,
            zk_connected=c.connected,
            zk_error=c.error,
            brokers=dict(c.brokers),
            controller=c.controller,
            controller_epoch=c.controller_epoch,
            controllers=dict(c.controllers),
            topics=c.topics(),
            reports=self.reports,
            report_errors=self.report_errors,
            down_since=dict(self._down_since),
        )

    def _changed(self, partition: str | None = None) -> None:
        if partition is None:
            self._dirty = None
        elif self._dirty is not None:
            self._dirty.add(partition)
        if self._rebuild is None:
            loop = asyncio.get_running_loop()
            self._rebuild = loop.call_later(REBUILD_DELAY_S, self.rebuild)

    def rebuild(self) -> None:
        self._rebuild = None
        dirty, self._dirty = self._dirty, set()
        state = self._builder.build(self._inputs(), dirty)
        patch = diff(self.state, state)
        self.state = state
        if patch is not None:
            changed = patch["full"]["partitions"] if "full" in patch else patch["partitions"]
            self.history.record(changed, patch.get("removed", []), now_ms())
            self._publish({"type": "patch", **patch})

    async def _poll_brokers(self) -> None:
        while True:
            started = time.thread_time()
            brokers = dict(self.mirror.copy.brokers)
            asked = {
                b: address
                for b, (reg, _epoch) in brokers.items()
                if (address := registered_address(reg)) is not None
            }
            answers = await asyncio.gather(*(self._describe(b, a) for b, a in asked.items()))
            reports: dict[int, BrokerDescription | None] = {}
            errors: dict[int, str] = {}
            for b, answer in zip(asked, answers, strict=True):
                if isinstance(answer, str):
                    reports[b] = None
                    errors[b] = answer
                else:
                    reports[b] = answer
            self._note_changes(self.reports, reports)
            self.reports, self.report_errors = reports, errors
            self.rebuild()
            # The loop's CPU for this round (mostly reading the answers and the rebuild): big
            # clusters are asked less often, so that watching them stays cheap.
            spent = time.thread_time() - started
            self.poll_interval_s = max(POLL_S, spent / POLL_CPU_SHARE)
            await asyncio.sleep(self.poll_interval_s)

    def _note_changes(
        self, old: dict[int, BrokerDescription | None], new: dict[int, BrokerDescription | None]
    ) -> None:
        """Mark the partitions whose replicas' reports changed (unchanged ones are the same
        objects); a broker that came, went, or stopped or started answering changes all."""
        if self._dirty is None:
            return
        if old.keys() != new.keys() or any((old[b] is None) != (new[b] is None) for b in new):
            self._dirty = None
            return
        for b, report in new.items():
            before = old[b]
            if report is None or before is None or report is before:
                continue
            for tp, replica in report.partitions.items():
                if before.partitions.get(tp) is not replica:
                    self._dirty.add(f"{tp.topic}-{tp.partition}")
            for tp in before.partitions.keys() - report.partitions.keys():
                self._dirty.add(f"{tp.topic}-{tp.partition}")

    async def _describe(self, broker: int, address: str) -> BrokerDescription | str:
        try:
            return await describe_broker_async(
                self._pool,
                address,
                DESCRIBE_TIMEOUT_S,
                previous=self.reports.get(broker),
                caught_up_granularity_ms=CAUGHT_UP_GRANULARITY_MS,
            )
        except BrokerUnreachable as exc:
            return str(exc).removeprefix(f"broker {address}: ")

    # ---- events ----------------------------------------------------------------------------------

    async def _event_sources(self) -> list[Source]:
        c = self.mirror.copy
        listener = client_listener()
        out = []
        for b, (reg, _epoch) in sorted(c.brokers.items()):
            address = registered_address(reg)
            if address is not None:
                out.append(Source(f"broker {b}", address))
        for cid, endpoints in sorted(c.controllers.items()):
            with contextlib.suppress(ValueError):
                ep = pick(from_strings(endpoints), listener)
                if ep is not None:
                    out.append(Source(f"controller {cid}", ep.address))
        return out

    def _on_event(self, event: Event) -> None:
        if is_routine(event):
            return
        event = {**event, "text": sentence(event), "story": is_story(event)}
        self.events.append(event)
        # A burst (a topic of 1,000 partitions created, a broker's leaderships moved) goes to
        # the pages as a few messages, not thousands.
        self._event_batch.append(event)
        if len(self._event_batch) == 1:
            asyncio.get_running_loop().call_later(EVENT_BATCH_S, self._send_events)

    def _send_events(self) -> None:
        batch, self._event_batch = self._event_batch, []
        if batch:
            self._publish({"type": "events", "events": batch})
