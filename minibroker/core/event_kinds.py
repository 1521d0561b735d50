"""Which structured events are routine: the per-request HW moves that flood a timeline under
load (an HW move an ISR change caused is part of the story and is not routine). Pure: the
brokers' event buffers mark them when logged, so followers can ask to be spared them, and the
timelines leave them out unless asked."""

from __future__ import annotations

ROUTINE_HW_CAUSES = frozenset({"append", "follower_fetch", "leader_hw"})
HW_MOVES = frozenset({"hw_advanced", "hw_lowered"})


def is_routine_event(name: object, cause: object) -> bool:
    """An event named `name` with field `cause` is a per-request HW move."""
    return name in HW_MOVES and cause in ROUTINE_HW_CAUSES
