"""The fault proxy's data path: one listening socket per link, and per connection two pumps
(forward, backward) that move bytes as their link direction's fault allows. The asyncio loop
owns every piece of state; control requests change it between two awaits.

Theory of operation. A pump reads large chunks and, while its direction is clear and nothing is
queued, writes them straight on (the fast path). Otherwise chunks wait in the pump's queue with
their arrival time and leave in order once arrival + delay has passed, the direction is not cut
and the link's token bucket allows. A cut direction neither reads nor writes: the sender's TCP
buffers fill and its calls time out, as in a real partition; nothing is closed. Healing lets
held bytes go on (as TCP retransmission would), except on connections accepted during the cut,
which never reached the target: those are reset, as if their SYN was lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket
import struct
from collections import deque
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from minibroker.faultproxy.model import (
    HOST,
    DirectionFault,
    FaultRequest,
    LinkDirection,
    LinkSpec,
    LinkView,
    parse_link_table,
    select,
)
from minibroker.faultproxy.pacing import TokenBucket, pieces
from minibroker.runtime import logging as slog
from minibroker.runtime.deadlines import wait_set

CHUNK = 256 * 1024
# Bytes a pump may hold read but unwritten (delay, throttle) before it stops reading; beyond
# it the sender feels TCP back-pressure, which a slow real link would give it too.
MAX_QUEUED = 16 << 20
CONNECT_TIMEOUT_S = 5.0


class DirectionState:
    """One direction of a link: its fault, token bucket and byte count, and a signal that
    wakes every pump waiting on it when the fault changes."""

    def __init__(self) -> None:
        self.fault = DirectionFault()
        self.bucket: TokenBucket | None = None
        self.bytes = 0
        self._changed = asyncio.Event()

    def set(self, fault: DirectionFault, now_s: float) -> None:
        if fault.bandwidth != self.fault.bandwidth:
            self.bucket = TokenBucket(fault.bandwidth, now_s) if fault.bandwidth else None
        self.fault = fault
        self._changed.set()
        self._changed = asyncio.Event()

    async def changed(self, timeout_s: float | None = None) -> None:
        """Return when the fault changes next, or after `timeout_s`."""
        await wait_set(self._changed, timeout_s)

    async def until_open(self) -> None:
        while self.fault.cut:
            await self.changed()

    async def until_due(self, arrival_s: float) -> None:
        """Wait until a chunk that arrived at `arrival_s` may leave: not cut, delay passed. A
        later change (heal, a shorter delay) applies to chunks already waiting."""
        loop = asyncio.get_running_loop()
        while True:
            if self.fault.cut:
                await self.changed()
                continue
            wait_s = arrival_s + self.fault.delay_ms / 1000 - loop.time()
            if wait_s <= 0:
                return
            await self.changed(wait_s)


class Link:
    def __init__(self, spec: LinkSpec) -> None:
        self.spec = spec
        self.forward = DirectionState()
        self.backward = DirectionState()
        self.refuse = False
        self.connections: set[Connection] = set()
        self.accepted = 0
        self.server: asyncio.Server | None = None

    def direction(self, which: LinkDirection) -> DirectionState:
        return self.forward if which == "forward" else self.backward

    @property
    def can_connect(self) -> bool:
        """A TCP handshake needs both directions."""
        return not (self.forward.fault.cut or self.backward.fault.cut)

    async def until_can_connect(self) -> None:
        while not self.can_connect:
            waits = [asyncio.ensure_future(d.changed()) for d in (self.forward, self.backward)]
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()

    def view(self) -> LinkView:
        return LinkView(
            spec=self.spec,
            forward=self.forward.fault,
            backward=self.backward.fault,
            refuse=self.refuse,
            connections=len(self.connections),
            accepted=self.accepted,
            forward_bytes=self.forward.bytes,
            backward_bytes=self.backward.bytes,
        )


class Pump:
    """Moves one direction of one connection (see the module's theory of operation)."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, d: DirectionState
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.d = d
        self.queue: deque[tuple[float, bytes]] = deque()
        self.queued = 0
        self._ready = asyncio.Event()
        self._space = asyncio.Event()

    async def run(self) -> None:
        reading = asyncio.ensure_future(self._read())
        sending = asyncio.ensure_future(self._send_queued())
        try:
            # Reading ends at EOF while the sender may still hold queued bytes; either one
            # failing (a reset, a broken pipe) ends the pump at once.
            done, _ = await asyncio.wait({reading, sending}, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                task.result()
            await sending
        finally:
            reading.cancel()
            sending.cancel()

    async def _read(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self.d.until_open()
            while self.queued >= MAX_QUEUED:
                self._space.clear()
                await self._space.wait()
            data = await self.reader.read(CHUNK)
            if data and self.d.fault.clear and not self.queue:
                await self._write(data)
                continue
            self.queue.append((loop.time(), data))
            self.queued += len(data)
            self._ready.set()
            if not data:
                return

    async def _send_queued(self) -> None:
        while True:
            while not self.queue:
                self._ready.clear()
                await self._ready.wait()
            arrival_s, data = self.queue[0]  # stays queued while held: the fast path waits
            await self.d.until_due(arrival_s)
            if not data:
                if self.writer.can_write_eof() and not self.writer.is_closing():
                    self.writer.write_eof()
                return
            await self._write(data)
            self.queue.popleft()
            self.queued -= len(data)
            self._space.set()

    async def _write(self, data: bytes) -> None:
        bucket = self.d.bucket
        if bucket is None:
            self.writer.write(data)
            self.d.bytes += len(data)
            await self.writer.drain()
            return
        loop = asyncio.get_running_loop()
        for piece in pieces(data, bucket.rate):
            current = self.d.bucket  # a new rate (or none) applies from the next piece on
            if current is not None:
                wait_s = current.take(len(piece), loop.time())
                if wait_s > 0:
                    await asyncio.sleep(wait_s)
            await self.d.until_open()
            self.writer.write(piece)
            self.d.bytes += len(piece)
            await self.writer.drain()


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP RST (SO_LINGER 0), as a host that drops a connection does."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class Connection:
    def __init__(self, link: Link, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.link = link
        self.client = (reader, writer)
        self.upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self.task: asyncio.Task[None] | None = None

    async def run(self) -> None:
        link = self.link
        reader, writer = self.client
        if not link.can_connect:
            await link.until_can_connect()
            _reset(writer)  # accepted during a cut: its handshake never got through
            return
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                self.upstream = await asyncio.open_connection(
                    HOST, link.spec.target_port, limit=CHUNK
                )
        except (OSError, TimeoutError):
            _reset(writer)  # the target is down: the client sees its connection refused
            return
        up_reader, up_writer = self.upstream
        pumps = [
            asyncio.ensure_future(Pump(reader, up_writer, link.forward).run()),
            asyncio.ensure_future(Pump(up_reader, writer, link.backward).run()),
        ]
        try:
            for done in asyncio.as_completed(pumps):
                await done
        except OSError:
            self.reset()  # one side reset: so does the other, as it would end to end
        finally:
            for p in pumps:
                p.cancel()
            for w in (writer, up_writer):
                w.close()

    def reset(self) -> None:
        for _, w in [self.client, *([self.upstream] if self.upstream else [])]:
            _reset(w)
        if self.task is not None and self.task is not asyncio.current_task():
            self.task.cancel()


class FaultProxy:
    """Every link of a link table, served from one asyncio loop."""

    def __init__(self, specs: Sequence[LinkSpec]) -> None:
        self.links = {s.name: Link(s) for s in parse_link_table([s.to_json() for s in specs])}

    async def start(self) -> None:
        """Listen on every link's port; OSError (port taken) after closing what was opened."""
        try:
            for link in self.links.values():
                link.server = await asyncio.start_server(
                    functools.partial(self._accept, link),
                    HOST,
                    link.spec.listen_port,
                    limit=CHUNK,
                    reuse_address=True,
                )
        except OSError:
            await self.close()
            raise

    async def _accept(
        self, link: Link, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        link.accepted += 1
        if link.refuse:
            _reset(writer)
            return
        conn = Connection(link, reader, writer)
        conn.task = asyncio.current_task()
        link.connections.add(conn)
        try:
            await conn.run()
        except (asyncio.CancelledError, OSError):
            pass  # reset() by a fault request or the proxy closing; a socket error on the way
        finally:
            link.connections.discard(conn)

    async def close(self) -> None:
        for link in self.links.values():
            if link.server is not None:
                link.server.close()
            for conn in list(link.connections):
                conn.reset()
        await asyncio.sleep(0)  # let cancelled connections run their finally blocks

    @property
    def specs(self) -> list[LinkSpec]:
        return [link.spec for link in self.links.values()]

    def views(self) -> list[LinkView]:
        return [link.view() for link in self.links.values()]

    def fault(self, request: FaultRequest) -> list[str]:
        """Apply `request` (see FaultRequest) at once to every link it selects; their names."""
        request.validate()
        selected = select(self.specs, request)
        now_s = asyncio.get_running_loop().time()
        for spec, directions in selected:
            link = self.links[spec.name]
            for which in directions:
                d = link.direction(which)
                d.set(request.apply(d.fault), now_s)
            if request.refuse is not None:
                link.refuse = request.refuse
            if request.reset:
                for conn in list(link.connections):
                    conn.reset()
        names = [spec.name for spec, _ in selected]
        fields: dict[str, Any] = {k: v for k, v in request.to_json().items() if k != "links"}
        slog.event("net_fault", logging.WARNING, links=names, **fields)
        return names

    def heal(self, request: FaultRequest | None = None) -> list[str]:
        """Clear every fault of the links `request` selects (all directions), or of every link;
        the names of those that had one."""
        if request is None:
            chosen = list(self.links.values())
        else:
            whole = replace(request, direction="both")
            chosen = [self.links[s.name] for s, _ in select(self.specs, whole)]
        now_s = asyncio.get_running_loop().time()
        healed = []
        for link in chosen:
            if link.view().faulted:
                healed.append(link.spec.name)
            link.refuse = False
            for d in (link.forward, link.backward):
                d.set(DirectionFault(), now_s)
        scope: dict[str, Any] = {}
        if request is not None:
            scope = {"node": request.node, "peers": list(request.peers)}
        slog.event("net_heal", links=healed, **scope)
        return healed
