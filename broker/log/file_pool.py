"""The open descriptors of a broker's segment files, at most `capacity` of them.

Kafka opens a segment's index lazily and relies on a generous `ulimit -n`; 10,000 partitions
with a log and an index file each are 20,000 descriptors on one broker, over the default limit.
Here every FileSegmentStore of a broker borrows descriptors from one pool, which closes the
least recently used when it is full. A descriptor in use (between `borrow` and the end of its
`with`) is never closed under its user: logs are opened (recovered) in worker threads while the
loop reads and appends, so the pool is thread-safe. Closing a descriptor loses nothing: written
bytes are in the page cache and a later fsync on a new descriptor makes them durable (fsync is
per file, not per descriptor).
"""

from __future__ import annotations

import os
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

MIN_CAPACITY = 4


@dataclass(frozen=True)
class Borrowed:
    fd: int
    created: bool  # the file did not exist: its directory entry is not durable yet


class FilePool:
    def __init__(self, capacity: int) -> None:
        if capacity < MIN_CAPACITY:
            raise ValueError(f"a file pool needs at least {MIN_CAPACITY} descriptors")
        self.capacity = capacity
        self._lock = threading.Lock()
        self._fds: OrderedDict[str, int] = OrderedDict()  # least recently used first
        self._in_use: Counter[str] = Counter()
        self.opens = 0  # descriptors opened so far (misses), for tests and metrics

    @contextmanager
    def borrow(self, path: str, *, create: bool) -> Iterator[Borrowed | None]:
        """The file's descriptor (O_RDWR | O_APPEND) for the body of the `with`; None if the
        file does not exist and `create` is false."""
        with self._lock:
            got = self._acquire(path, create)
            if got is not None:
                self._in_use[path] += 1
        if got is None:
            yield None
            return
        try:
            yield got
        finally:
            with self._lock:
                self._in_use[path] -= 1
                if not self._in_use[path]:
                    del self._in_use[path]
                self._evict()

    def _acquire(self, path: str, create: bool) -> Borrowed | None:
        fd = self._fds.get(path)
        if fd is not None:
            self._fds.move_to_end(path)
            return Borrowed(fd, created=False)
        created = False
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND)
        except FileNotFoundError:
            if not create:
                return None
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            created = True
        self.opens += 1
        self._fds[path] = fd
        self._evict()
        return Borrowed(fd, created)

    def _evict(self) -> None:
        """Close least recently used descriptors not in use until the pool fits."""
        excess = len(self._fds) - self.capacity
        if excess <= 0:
            return
        victims = [p for p in self._fds if p not in self._in_use][:excess]
        # Descriptors in use stay open: the pool overflows by at most one per concurrent user.
        for path in victims:
            os.close(self._fds.pop(path))

    def forget(self, path: str) -> None:
        """Close the file's descriptor (before it is deleted or replaced)."""
        with self._lock:
            fd = self._fds.pop(path, None)
            if fd is not None:
                os.close(fd)

    def open_count(self) -> int:
        with self._lock:
            return len(self._fds)

    def close(self) -> None:
        with self._lock:
            for fd in self._fds.values():
                os.close(fd)
            self._fds.clear()
