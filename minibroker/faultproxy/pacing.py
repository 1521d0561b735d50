"""Pacing of throttled bytes: a token bucket per link direction, shared by its connections.
Pure: the caller passes the time (seconds on any monotonic clock) and sleeps as told."""

from __future__ import annotations

# A throttled direction sends pieces of about 1/PIECES_PER_S of a second's worth, so a slow
# link trickles evenly instead of bursting a whole read and then going quiet for seconds.
PIECES_PER_S = 20
MIN_PIECE = 512


class TokenBucket:
    """`rate` bytes/s with a burst of one piece. `take(n, now_s)` spends n tokens at once (the
    balance may go negative: a debt) and returns how long to wait before sending them, so
    callers that take in turn are paced in order and together never exceed the rate."""

    def __init__(self, rate: int, now_s: float) -> None:
        assert rate > 0
        self.rate = rate
        self.burst = float(piece_size(rate))
        self.tokens = self.burst
        self.updated_s = now_s

    def take(self, n: int, now_s: float) -> float:
        elapsed = max(0.0, now_s - self.updated_s)
        self.tokens = min(self.burst, self.tokens + elapsed * self.rate)
        self.updated_s = max(self.updated_s, now_s)
        self.tokens -= n
        return 0.0 if self.tokens >= 0 else -self.tokens / self.rate


def piece_size(rate: int) -> int:
    """The most bytes a direction throttled to `rate` bytes/s sends in one go."""
    return max(MIN_PIECE, rate // PIECES_PER_S)


def pieces(data: bytes, rate: int) -> list[memoryview]:
    """`data` cut into pieces of at most piece_size(rate) bytes (views: no copies)."""
    size = piece_size(rate)
    view = memoryview(data)
    return [view[i : i + size] for i in range(0, len(data), size)]
