"""How `minibroker events` words the replication story, and its --since forms."""

from __future__ import annotations

from datetime import datetime

import pytest

from minibroker.client.event_text import clock, is_routine, parse_since, render

T = int(datetime(2026, 11, 22, 12, 0, 4, 100_000).timestamp() * 1000)


def test_isr_shrink_names_the_change_and_when_the_replica_last_caught_up() -> None:
    line = render(
        {
            "ts": T,
            "level": "INFO",
            "proc": "broker-1",
            "event": "isr_shrink",
            "tp": "demo-0",
            "old_isr": [1, 2, 3],
            "isr": [1, 2],
            "changed": [3],
            "last_caught_up_ms": {"3": T - 2_900},
        }
    )
    assert line.startswith("12:00:04.100 broker-1")
    assert (
        "ISR shrink demo-0 [1,2,3]→[1,2] (broker 3 last caught up 12:00:01.200, 2.9 s before)"
        in line
    )


def test_update_metadata_propagation_says_to_whom_and_how_fast() -> None:
    line = render(
        {
            "ts": T,
            "proc": "controller-1",
            "event": "update_metadata_propagated",
            "brokers": [1, 2, 3],
            "took_ms": 14,
            "nodes": ["isr_change_0000000003"],
            "not_answered": [],
        }
    )
    assert line.endswith("UpdateMetadata to 1,2,3 in 14 ms after [isr_change_0000000003]")


def test_a_throttle_change_reads_unlimited_and_unset_not_long_max_value() -> None:
    line = render(
        {
            "ts": T,
            "proc": "broker-2",
            "event": "config_changed",
            "entity_type": "brokers",
            "entity_name": "2",
            "changed": {
                "leader.replication.throttled.rate": [str(2**63 - 1), "20000"],
                "follower.replication.throttled.replicas": ["*", ""],
            },
        }
    )
    assert "brokers/2 config: leader.replication.throttled.rate unlimited→20000" in line
    assert "follower.replication.throttled.replicas *→(unset)" in line


def test_other_events_print_their_fields() -> None:
    line = render({"ts": T, "proc": "broker-2", "event": "zk_session_expired", "session_id": "0x1"})
    assert line.endswith("zk_session_expired           session_id=0x1")


def test_per_request_hw_moves_are_routine_but_isr_caused_ones_are_not() -> None:
    assert is_routine({"event": "hw_advanced", "cause": "append"})
    assert not is_routine({"event": "hw_advanced", "cause": "isr_shrink"})
    assert not is_routine({"event": "isr_shrink"})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90s", T - 90_000),
        ("5m", T - 300_000),
        ("1h", T - 3_600_000),
        ("250ms", T - 250),
        ("1700000000000", 1_700_000_000_000),
        ("12:00:01", T - 3_100),
        ("2026-11-22T12:00:00", T - 4_100),
    ],
)
def test_since_forms(text: str, expected: int) -> None:
    assert parse_since(text, T) == expected


def test_bad_since_lists_the_forms() -> None:
    with pytest.raises(ValueError, match="90s, 5m, 1h"):
        parse_since("yesterday", T)


def test_clock_has_milliseconds() -> None:
    assert clock(T) == "12:00:04.100"


def test_transaction_events_read_as_sentences() -> None:
    base = {"ts": 0, "level": "INFO", "proc": "broker-2", "transactional_id": "orders-tx"}
    fenced = render({**base, "event": "txn_fenced", "producer_id": 4, "epoch": 3})
    assert "orders-tx: producer 4 fenced at epoch 3" in fenced
    committed = render({**base, "event": "txn_committed", "partitions": 2, "error": None})
    assert "orders-tx: committed on 2 partitions" in committed
    aborted = render(
        {**base, "event": "txn_aborted", "partitions": 1, "producer_id": 4, "epoch": 3}
    )  # fmt: skip
    assert "orders-tx: aborted on 1 partitions (producer 4, epoch 3)" in aborted
    refused = render(
        {**base, "event": "txn_verification_refused", "tp": "t-0", "producer_id": 4, "epoch": 3,
         "coordinator_error": "INVALID_TXN_STATE", "error": "INVALID_TXN_STATE"}
    )  # fmt: skip
    assert "t-0: refused a transactional batch of orders-tx (producer 4, epoch 3)" in refused
    loaded = render(
        {**base, "event": "txn_partition_loaded", "tp": "__transaction_state-3",
         "coordinator_epoch": 5, "transactional_ids": 7, "unfinished": 1}
    )  # fmt: skip
    assert "transaction coordinator for __transaction_state-3 (coordinator epoch 5)" in loaded
