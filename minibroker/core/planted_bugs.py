"""TEST ONLY: known-wrong replication rules that can be switched on, to prove the checkers fail.

A checker that never fails proves nothing. Each `PlantedBug` names one rule Kafka deliberately
does not use; the seeded simulation (tests/sim) and the real-process scenarios must report a
violation when one is on. Brokers take it from the setting `minibroker.test.planted.bug` and
hand it to the pure rules as a parameter (broker.replication reads no settings).
"""

from __future__ import annotations

from enum import Enum


class PlantedBug(Enum):
    NONE = ""
    # The HW is the smallest LEO over the replicas caught up within the lag, ISR member or not:
    # an ISR member that stopped fetching no longer holds it back. Kafka counts every ISR
    # member, however stale (reference §2.6); without that, a record can be acknowledged that
    # an electable replica lacks.
    HW_FROM_ALL_REPLICAS = "hw-from-all-replicas"
    # A follower truncates to its own HW on every leader change, as before KIP-101 (§4.1),
    # instead of asking the leader where its epochs diverge (§4.4).
    TRUNCATE_TO_HW = "truncate-to-hw"
    # A follower leaves the ISR when it has not fetched for replica.lag.time.max.ms, instead of
    # when it has not caught up to the leader's LEO for that long (§2.4, pitfall 1): a follower
    # that fetches but never keeps up stays in the ISR.
    SHRINK_ON_NO_FETCH = "shrink-on-no-fetch"

    @classmethod
    def parse(cls, text: str) -> PlantedBug:
        """The bug named `text` ("" = none); ValueError naming the choices otherwise."""
        for bug in cls:
            if bug.value == text.strip():
                return bug
        names = ", ".join(repr(b.value) for b in cls if b is not cls.NONE)
        raise ValueError(f"unknown planted bug {text!r}; known: {names} (or '' for none)")

    @property
    def enabled(self) -> bool:
        return self is not PlantedBug.NONE
