"""The files of one partition directory behind a small protocol: real files or memory.

Bytes are durable only after `flush` (or `write_atomic`); the memory store can `crash()` and
lose exactly the bytes a power cut could lose, so recovery is testable without a disk.
"""

from __future__ import annotations

import builtins
import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, suppress
from pathlib import Path
from typing import Protocol

from broker.log.file_pool import Borrowed, FilePool

# A file renamed for deletion (Kafka's Log.DeletedFileSuffix): removed from disk
# file.delete.delay.ms later, off the event loop, and by recovery if the broker stops first.
DELETED_SUFFIX = ".deleted"

# The pool of a store made without one (tests, tools): a few descriptors of its own.
PRIVATE_POOL_CAPACITY = 8


class SegmentStore(Protocol):
    """The files of ONE partition directory, addressed by bare file name."""

    def list(self) -> builtins.list[str]:
        """File names in the directory, sorted."""
        ...

    def size(self, name: str) -> int:
        """Bytes in `name`; 0 if it does not exist."""
        ...

    def read(self, name: str, position: int, size: int) -> bytes:
        """Up to `size` bytes from `position`; fewer at the end of the file."""
        ...

    def append(self, name: str, data: bytes) -> None:
        """Add `data` at the end of `name`, creating it if missing. Not durable until flush."""
        ...

    def truncate(self, name: str, size: int) -> None:
        """Cut `name` to `size` bytes (never grows a file)."""
        ...

    def write_atomic(self, name: str, data: bytes) -> None:
        """Replace the whole file, durably: write name.tmp, fsync, rename."""
        ...

    def delete(self, name: str) -> None:
        """Remove `name`; no error if it is missing."""
        ...

    def flush(self, name: str) -> None:
        """Make the appended bytes of `name` durable (fsync)."""
        ...

    def retire(self, name: str) -> None:
        """Rename `name` to `name` + ".deleted" (Kafka's asynchronous delete, first step),
        giving back its descriptor; no error if it is missing. On the loop."""
        ...

    def unlink(self, name: str) -> None:
        """Remove a retired file; no error if it is missing. Safe in a worker thread."""
        ...

    def mtime_ms(self, name: str) -> int:
        """When `name` was last written (wall ms); 0 if it does not exist."""
        ...

    def rename(self, name: str, new_name: str) -> None:
        """Rename a file (replacing `new_name`), giving back both names' descriptors. On the
        loop."""
        ...

    # ---- for a worker thread (the log cleaner): no shared descriptors ----

    def read_unpooled(self, name: str, position: int, size: int) -> bytes:
        """As `read`, with a descriptor of its own."""
        ...

    def write_new(self, name: str, data: bytes) -> None:
        """Create (or replace) `name` holding `data`, fsynced; for files no reader has open."""
        ...

    def append_unpooled(self, name: str, data: bytes) -> None:
        """Add `data` at the end of a file no reader has open (creating it)."""
        ...

    def sync_unpooled(self, name: str) -> None:
        """fsync a file written with append_unpooled."""
        ...

    def rename_unpooled(self, name: str, new_name: str) -> None:
        """Rename a file no reader has open (the cleaner's *.cleaned to *.swap)."""
        ...

    def set_mtime(self, name: str, mtime_ms: int) -> None:
        """Set a file's modification time (a cleaned segment keeps its originals')."""
        ...

    def close(self) -> None:
        """Give back any open descriptors (the store may be used again: they reopen)."""
        ...


def write_file_atomically(path: Path, data: bytes) -> None:
    """Kafka's checkpoint write (reference §3.5): `<file>.tmp`, flush + fsync, atomic rename,
    then fsync the directory so the rename itself survives a crash."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_directory(path.parent)


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class FileSegmentStore:
    """Real files. Descriptors (O_APPEND: appends always go to the end, so they stay correct
    after a truncate; reads are positioned, pread) come from a FilePool shared by the broker's
    partitions, which keeps at most its capacity open."""

    def __init__(self, directory: Path, pool: FilePool | None = None) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._pool = pool if pool is not None else FilePool(PRIVATE_POOL_CAPACITY)
        # Files created since the directory was last fsynced: a new file's directory entry is
        # not durable until then, so the first flush of such a file also syncs the directory.
        self._new_names: set[str] = set()
        self._paths: dict[str, str] = {}

    def _path(self, name: str) -> str:
        # Cached: building a Path per read and append showed in the profiles (~8% of the loop).
        path = self._paths.get(name)
        if path is None:
            path = self._paths[name] = str(self.directory / name)
        return path

    def _borrow(self, name: str, *, create: bool) -> AbstractContextManager[Borrowed | None]:
        return self._pool.borrow(self._path(name), create=create)

    def list(self) -> builtins.list[str]:
        return sorted(p.name for p in self.directory.iterdir() if p.is_file())

    def size(self, name: str) -> int:
        try:
            return os.stat(self._path(name)).st_size
        except FileNotFoundError:
            return 0

    def read(self, name: str, position: int, size: int) -> bytes:
        if size <= 0:
            return b""
        with self._borrow(name, create=False) as f:
            return b"" if f is None else os.pread(f.fd, size, position)

    def append(self, name: str, data: bytes) -> None:
        with self._borrow(name, create=True) as f:
            assert f is not None
            if f.created:
                self._new_names.add(name)
            view = memoryview(data)
            while view:
                view = view[os.write(f.fd, view) :]

    def truncate(self, name: str, size: int) -> None:
        with self._borrow(name, create=False) as f:
            if f is None:
                raise FileNotFoundError(self._path(name))
            if size > os.fstat(f.fd).st_size:
                raise ValueError(f"truncate would grow {name} to {size} bytes")
            os.ftruncate(f.fd, size)

    def write_atomic(self, name: str, data: bytes) -> None:
        # A pooled descriptor would still point at the replaced inode.
        self._pool.forget(self._path(name))
        write_file_atomically(Path(self._path(name)), data)
        self._new_names.discard(name)

    def delete(self, name: str) -> None:
        path = self._path(name)
        self._pool.forget(path)
        self._new_names.discard(name)
        self._paths.pop(name, None)
        Path(path).unlink(missing_ok=True)

    def flush(self, name: str) -> None:
        with self._borrow(name, create=False) as f:
            if f is None:
                return
            os.fsync(f.fd)
        if name in self._new_names:
            _fsync_directory(self.directory)
            self._new_names.clear()

    def retire(self, name: str) -> None:
        path = self._path(name)
        self._pool.forget(path)
        self._new_names.discard(name)
        self._paths.pop(name, None)
        with suppress(FileNotFoundError):
            os.replace(path, path + DELETED_SUFFIX)

    def unlink(self, name: str) -> None:
        # No pool, no cache: a worker thread calls this.
        Path(self.directory, name).unlink(missing_ok=True)

    def mtime_ms(self, name: str) -> int:
        try:
            return os.stat(self._path(name)).st_mtime_ns // 1_000_000
        except FileNotFoundError:
            return 0

    def rename(self, name: str, new_name: str) -> None:
        for n in (name, new_name):
            self._pool.forget(self._path(n))
            self._paths.pop(n, None)
        self.rename_unpooled(name, new_name)

    def read_unpooled(self, name: str, position: int, size: int) -> bytes:
        fd = os.open(self.directory / name, os.O_RDONLY)
        try:
            return os.pread(fd, size, position)
        finally:
            os.close(fd)

    def write_new(self, name: str, data: bytes) -> None:
        with open(self.directory / name, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())

    def append_unpooled(self, name: str, data: bytes) -> None:
        with open(self.directory / name, "ab") as fh:
            fh.write(data)

    def sync_unpooled(self, name: str) -> None:
        fd = os.open(self.directory / name, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def rename_unpooled(self, name: str, new_name: str) -> None:
        os.replace(self.directory / name, self.directory / new_name)
        _fsync_directory(self.directory)

    def set_mtime(self, name: str, mtime_ms: int) -> None:
        os.utime(self.directory / name, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))

    def close(self) -> None:
        try:
            names = self.list()
        except FileNotFoundError:
            return
        for name in names:
            self._pool.forget(self._path(name))


class MemorySegmentStore:
    """Files in memory that remember their durable (flushed) prefix. `crash()` drops every
    byte not flushed; deletes and renames are taken as durable at once."""

    def __init__(self, clock: Callable[[], int] | None = None) -> None:
        self._files: dict[str, bytearray] = {}
        self._durable: dict[str, int] = {}
        self._mtimes: dict[str, int] = {}
        self._clock = clock or (lambda: time.time_ns() // 1_000_000)

    def list(self) -> builtins.list[str]:
        return sorted(self._files)

    def size(self, name: str) -> int:
        f = self._files.get(name)
        return 0 if f is None else len(f)

    def read(self, name: str, position: int, size: int) -> bytes:
        f = self._files.get(name)
        if f is None or size <= 0:
            return b""
        return bytes(f[position : position + size])

    def append(self, name: str, data: bytes) -> None:
        self._files.setdefault(name, bytearray()).extend(data)
        self._durable.setdefault(name, 0)
        self._mtimes[name] = self._clock()

    def truncate(self, name: str, size: int) -> None:
        f = self._files.get(name)
        if f is None:
            raise FileNotFoundError(name)
        if size > len(f):
            raise ValueError(f"truncate would grow {name} to {size} bytes")
        del f[size:]
        self._durable[name] = min(self._durable[name], size)

    def write_atomic(self, name: str, data: bytes) -> None:
        self._files[name] = bytearray(data)
        self._durable[name] = len(data)
        self._mtimes[name] = self._clock()

    def delete(self, name: str) -> None:
        self._files.pop(name, None)
        self._durable.pop(name, None)
        self._mtimes.pop(name, None)

    def retire(self, name: str) -> None:
        if name in self._files:
            retired = name + DELETED_SUFFIX
            self._files[retired] = self._files.pop(name)
            self._durable[retired] = self._durable.pop(name)
            self._mtimes[retired] = self._mtimes.pop(name, 0)

    def unlink(self, name: str) -> None:
        self.delete(name)

    def mtime_ms(self, name: str) -> int:
        return self._mtimes.get(name, 0) if name in self._files else 0

    def rename(self, name: str, new_name: str) -> None:
        self.rename_unpooled(name, new_name)

    def read_unpooled(self, name: str, position: int, size: int) -> bytes:
        return self.read(name, position, size)

    def write_new(self, name: str, data: bytes) -> None:
        self.write_atomic(name, data)

    def append_unpooled(self, name: str, data: bytes) -> None:
        self.append(name, data)

    def sync_unpooled(self, name: str) -> None:
        self.flush(name)

    def rename_unpooled(self, name: str, new_name: str) -> None:
        if name not in self._files:
            raise FileNotFoundError(name)
        self._files[new_name] = self._files.pop(name)
        self._durable[new_name] = self._durable.pop(name)
        self._mtimes[new_name] = self._mtimes.pop(name, 0)

    def set_mtime(self, name: str, mtime_ms: int) -> None:
        """Tests: as os.utime."""
        self._mtimes[name] = mtime_ms

    def flush(self, name: str) -> None:
        f = self._files.get(name)
        if f is not None:
            self._durable[name] = len(f)

    def close(self) -> None:
        pass

    # ---- test helpers ----

    def crash(self) -> None:
        """A power cut: every file keeps only its flushed prefix."""
        for name, f in self._files.items():
            del f[self._durable[name] :]

    def corrupt(self, name: str, position: int) -> None:
        """Flip every bit of one byte, as a bad disk sector would."""
        self._files[name][position] ^= 0xFF

    def data(self, name: str) -> bytes:
        return bytes(self._files[name])

    def durable_size(self, name: str) -> int:
        return self._durable.get(name, 0)
