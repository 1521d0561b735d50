"""Fixtures shared by the log tests: the same tests run on the memory and the file store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.log.store import FileSegmentStore, MemorySegmentStore, SegmentStore


@pytest.fixture(params=["memory", "file"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SegmentStore]:
    if request.param == "memory":
        yield MemorySegmentStore()
    else:
        files = FileSegmentStore(tmp_path / "orders-0")
        yield files
        files.close()
