"""The follower's backoff after a partition error (reference §3.8, with one deviation)."""

from __future__ import annotations

import pytest

from broker.fetch.follower_state import EPOCH_CATCH_UP_BACKOFF_MS, RETRY_LATER, backoff_ms_for
from minibroker.core.errors import ErrorCode


def test_unknown_leader_epoch_retries_soon_the_leader_is_only_behind() -> None:
    assert backoff_ms_for(ErrorCode.UNKNOWN_LEADER_EPOCH, 1000) == EPOCH_CATCH_UP_BACKOFF_MS
    assert EPOCH_CATCH_UP_BACKOFF_MS < 100


def test_a_shorter_configured_backoff_still_wins() -> None:
    assert backoff_ms_for(ErrorCode.UNKNOWN_LEADER_EPOCH, 5) == 5


@pytest.mark.parametrize("error", sorted(RETRY_LATER - {ErrorCode.UNKNOWN_LEADER_EPOCH}))
def test_every_other_error_waits_the_configured_backoff(error: ErrorCode) -> None:
    assert backoff_ms_for(error, 500) == 500


def test_a_failed_request_waits_the_configured_backoff() -> None:
    assert backoff_ms_for(None, 500) == 500
