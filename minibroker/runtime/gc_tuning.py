"""Keep Python's cyclic garbage collector off a broker's long-lived state.

A broker hosting 10,000 partitions holds millions of objects that live as long as their
partitions. Python's full collections walk all of them: measured on a 10,000-partition broker,
8 full collections during start-up took 1.9 s of CPU, one of them 665 ms just after every
replica served, stalling the event loop (every request, every fetch) for as long. The
generational rules let a full collection run whenever the long-lived objects have grown by a
quarter, so a broker that takes on leaderships (a failover) pays one at the worst moment.

After the broker opened many partitions, gc.freeze() moves every object then alive to the
permanent generation, which collections skip; refcounting still frees them as usual. What a
frozen object can no longer be is collected as part of a garbage *cycle*, so partitions'
removal unfreezes (their cycles, if any, go at the next full collection) and the next growth
freezes again. JVM brokers have a concurrent collector instead; this is the CPython way.
"""

from __future__ import annotations

import gc

# Partitions opened since the last freeze that make the next one worth its while: a few
# partitions' objects are no burden to a full collection.
FREEZE_AFTER_PARTITIONS = 500


class HeapFreezer:
    """Counts partitions opened and removed; freezes the heap after enough growth."""

    def __init__(self, freeze_after: int = FREEZE_AFTER_PARTITIONS) -> None:
        self.freeze_after = freeze_after
        self._opened = 0

    def opened(self, count: int) -> bool:
        """`count` partitions were opened; whether the heap was frozen now."""
        self._opened += count
        if self._opened < self.freeze_after:
            return False
        self._opened = 0
        gc.collect(1)  # the young garbage (cycles included) goes first, not into the freeze
        gc.freeze()
        return True

    def removed(self, count: int) -> None:
        """`count` partitions were removed: let collections see every object again."""
        if count and gc.get_freeze_count():
            gc.unfreeze()
