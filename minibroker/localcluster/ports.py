"""Free ports for processes that bind them a few seconds later.

A port found free now is only a promise: between the plan and the bind, two things can take it.
- Any process's connect() or bind(0) on the machine takes a port of the kernel's ephemeral
  range (ip_local_port_range), so ours come from just below it, where nothing is handed out.
- Another plan made at the same time (a second pytest worker, a second `cluster up`) finds the
  same free ports. Plans reserve theirs in a file shared by every user of this module on the
  machine, under an exclusive lock, for RESERVED_S; no other plan hands them out meanwhile.
  (A CI run on two workers lost three tests to a broker's metrics port taken between plan and
  bind: docs/notes.md, "Ports".)
"""

from __future__ import annotations

import fcntl
import os
import socket
import tempfile
import time
from pathlib import Path

from minibroker import topology
from minibroker.localcluster.state import HOST

RESERVED_S = 300.0  # a cluster's processes bind their ports within this, also on a busy machine
RESERVATIONS = Path(tempfile.gettempdir()) / "minibroker-ports.reserved"


def free_ports(count: int) -> list[int]:
    """`count` distinct ports that are free now, below the ephemeral range, not published by
    the compose cluster, and not handed to another plan in the last RESERVED_S."""
    low = _ephemeral_low()
    first = max(1024, low - 10_000)
    span = low - first
    start = os.getpid() * 7919 + time.monotonic_ns() // 1000
    with _reservations() as reserved:
        out: list[int] = []
        for i in range(span):
            port = first + (start + i) % span
            if port in reserved or _published_by_compose(port) or not port_free(port):
                continue
            out.append(port)
            if len(out) == count:
                break
        else:
            raise OSError(f"fewer than {count} free ports in {first}-{low - 1}")
        reserved.update(out)
        return out


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _published_by_compose(port: int) -> bool:
    """A host port the compose cluster publishes (its nodes' gRPC and metrics ports): a
    process-mode cluster planned while one runs, or before it starts, must leave them."""
    return any(0 < port - base < 1000 for base in (topology.EXTERNAL_PORT_BASE,
                                                   topology.METRICS_PORT_BASE))  # fmt: skip


class _reservations:
    """The ports reserved in the last RESERVED_S, as a set to add to; written back on exit,
    all under an exclusive lock of the file. Without a writable temp dir: an empty set."""

    def __enter__(self) -> set[int]:
        self._fd: int | None = None
        self._now = time.time()
        self._kept: dict[int, float] = {}
        try:
            self._fd = os.open(RESERVATIONS, os.O_RDWR | os.O_CREAT, 0o666)
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        except OSError:
            if self._fd is not None:
                os.close(self._fd)
            self._fd = None
            self.ports: set[int] = set()
            return self.ports
        with os.fdopen(os.dup(self._fd)) as f:
            for line in f.read().splitlines():
                port, _, until = line.partition(" ")
                try:
                    if float(until) > self._now:
                        self._kept[int(port)] = float(until)
                except ValueError:
                    continue
        self.ports = set(self._kept)
        return self.ports

    def __exit__(self, *exc: object) -> None:
        if self._fd is None:
            return
        try:
            until = self._now + RESERVED_S
            kept = self._kept | {p: until for p in self.ports - set(self._kept)}
            text = "".join(f"{p} {t:.0f}\n" for p, t in sorted(kept.items()))
            os.lseek(self._fd, 0, os.SEEK_SET)
            os.ftruncate(self._fd, 0)
            os.write(self._fd, text.encode())
        except OSError:
            pass
        finally:
            os.close(self._fd)  # releases the lock
