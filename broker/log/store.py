"""The files of one partition directory behind a small protocol: real files or memory.

Bytes are durable only after `flush` (or `write_atomic`); the memory store can `crash()` and
lose exactly the bytes a power cut could lose, so recovery is testable without a disk.
"""

from __future__ import annotations

import builtins
import os
from pathlib import Path
from typing import Protocol


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
    """Real files. One O_APPEND descriptor per file serves appends (always at the end, so it
    stays correct after a truncate) and positioned reads (pread)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._fds: dict[str, int] = {}
        # Files created since the directory was last fsynced: a new file's directory entry is
        # not durable until then, so the first flush of such a file also syncs the directory.
        self._new_names: set[str] = set()

    def _path(self, name: str) -> Path:
        return self.directory / name

    def _fd(self, name: str, *, create: bool) -> int | None:
        fd = self._fds.get(name)
        if fd is not None:
            return fd
        path = self._path(name)
        if not create and not path.exists():
            return None
        if not path.exists():
            self._new_names.add(name)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        self._fds[name] = fd
        return fd

    def _forget(self, name: str) -> None:
        fd = self._fds.pop(name, None)
        if fd is not None:
            os.close(fd)

    def list(self) -> builtins.list[str]:
        return sorted(p.name for p in self.directory.iterdir() if p.is_file())

    def size(self, name: str) -> int:
        fd = self._fds.get(name)
        if fd is not None:
            return os.fstat(fd).st_size
        try:
            return self._path(name).stat().st_size
        except FileNotFoundError:
            return 0

    def read(self, name: str, position: int, size: int) -> bytes:
        fd = self._fd(name, create=False)
        if fd is None or size <= 0:
            return b""
        return os.pread(fd, size, position)

    def append(self, name: str, data: bytes) -> None:
        fd = self._fd(name, create=True)
        assert fd is not None
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]

    def truncate(self, name: str, size: int) -> None:
        fd = self._fd(name, create=False)
        if fd is None:
            raise FileNotFoundError(self._path(name))
        if size > os.fstat(fd).st_size:
            raise ValueError(f"truncate would grow {name} to {size} bytes")
        os.ftruncate(fd, size)

    def write_atomic(self, name: str, data: bytes) -> None:
        # The cached descriptor would still point at the replaced inode.
        self._forget(name)
        write_file_atomically(self._path(name), data)
        self._new_names.discard(name)

    def delete(self, name: str) -> None:
        self._forget(name)
        self._new_names.discard(name)
        self._path(name).unlink(missing_ok=True)

    def flush(self, name: str) -> None:
        fd = self._fd(name, create=False)
        if fd is None:
            return
        os.fsync(fd)
        if name in self._new_names:
            _fsync_directory(self.directory)
            self._new_names.clear()

    def close(self) -> None:
        for name in builtins.list(self._fds):
            self._forget(name)


class MemorySegmentStore:
    """Files in memory that remember their durable (flushed) prefix. `crash()` drops every
    byte not flushed; deletes and renames are taken as durable at once."""

    def __init__(self) -> None:
        self._files: dict[str, bytearray] = {}
        self._durable: dict[str, int] = {}

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

    def delete(self, name: str) -> None:
        self._files.pop(name, None)
        self._durable.pop(name, None)

    def flush(self, name: str) -> None:
        f = self._files.get(name)
        if f is not None:
            self._durable[name] = len(f)

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
