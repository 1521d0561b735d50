"""The broker's heap freezer (minibroker/runtime/gc_tuning.py): frozen after enough partitions
opened, unfrozen when partitions go, with the real collector."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from minibroker.runtime.gc_tuning import HeapFreezer


class Node:
    """An object that can sit in a reference cycle and be watched by a weak reference."""

    other: object = None


@pytest.fixture(autouse=True)
def _thawed() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_the_heap_freezes_once_enough_partitions_opened() -> None:
    freezer = HeapFreezer(freeze_after=100)
    assert not freezer.opened(60) and gc.get_freeze_count() == 0
    assert freezer.opened(40)
    assert gc.get_freeze_count() > 0
    assert not freezer.opened(99)  # the count starts again
    assert freezer.opened(1)


def test_a_frozen_cycle_waits_for_a_removal_to_be_collected() -> None:
    freezer = HeapFreezer(freeze_after=1)
    node = Node()
    node.other = node
    ref = weakref.ref(node)
    assert freezer.opened(1)
    del node
    gc.collect()
    assert ref() is not None  # frozen: full collections skip it
    freezer.removed(0)
    gc.collect()
    assert ref() is not None  # nothing removed, nothing thawed
    freezer.removed(3)
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert ref() is None


def test_young_garbage_cycles_are_collected_before_the_freeze() -> None:
    node = Node()
    node.other = node
    ref = weakref.ref(node)
    del node
    assert HeapFreezer(freeze_after=1).opened(1)
    assert ref() is None
