"""What a write task of the minibroker data source reports to the driver (its commit message)
and what the driver does with the messages of a batch: totals, one line on stderr, the
`_summary-*.json` beside the ledger and, with ledger.location driver, the ledgers themselves
written into ledger.path."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import WriterCommitMessage

from loadgen.source_io import ledger_from_bytes, write_ledger
from loadgen.source_options import WriteOptions


@dataclass
class MinibrokerCommitMessage(WriterCommitMessage):
    """What one write task reports to the driver: counts by outcome, errors by Kafka code name,
    its ledger file (if `ledger.path` is set), and when it first sent and was last acked."""

    partition_id: int
    sent: int
    acked: int
    failed: int
    errors: dict[str, int]
    ledger_file: str | None
    first_send_ms: int | None
    last_ack_ms: int | None
    # ledger.location driver: the ledger itself (loadgen.source_io.ledger_bytes) and the name
    # the driver writes it under, in place of ledger_file
    ledger_name: str | None = None
    ledger_data: bytes | None = None


def summarize(messages: Iterable[WriterCommitMessage | None]) -> dict[str, Any]:
    """Totals of a write's commit messages. A None message (a failed task) is counted in
    `tasks_failed`; its records are in no total."""
    messages = list(messages)
    done = [m for m in messages if isinstance(m, MinibrokerCommitMessage)]
    errors: Counter[str] = Counter()
    for m in done:
        errors.update(m.errors)
    first = [m.first_send_ms for m in done if m.first_send_ms is not None]
    last = [m.last_ack_ms for m in done if m.last_ack_ms is not None]
    return {
        "tasks": len(done),
        "tasks_failed": len(messages) - len(done),
        "sent": sum(m.sent for m in done),
        "acked": sum(m.acked for m in done),
        "failed": sum(m.failed for m in done),
        "errors": dict(sorted(errors.items())),
        "ledger_files": sorted(m.ledger_file for m in done if m.ledger_file is not None),
        "first_send_ms": min(first, default=None),
        "last_ack_ms": max(last, default=None),
    }


def ledger_written(
    options: WriteOptions, message: WriterCommitMessage | None
) -> WriterCommitMessage | None:
    """On the driver: a message that carries its task's ledger, with the ledger written into
    ledger.path (a committed batch's or an aborted one's: acknowledged records are in the
    topic either way)."""
    if not isinstance(message, MinibrokerCommitMessage) or message.ledger_data is None:
        return message
    assert options.ledger_path is not None and message.ledger_name is not None
    table = ledger_from_bytes(message.ledger_data)
    path = write_ledger(table, options.ledger_path, message.ledger_name)
    return dataclasses.replace(message, ledger_file=path, ledger_name=None, ledger_data=None)


def log_commit(
    options: WriteOptions, label: str, messages: list[WriterCommitMessage | None], outcome: str
) -> None:
    """One line on stderr and, with a ledger directory, the totals as `_summary-*.json` there
    (the underscore keeps Spark and pyarrow from reading it as part of the Parquet ledger)."""
    messages = [ledger_written(options, m) for m in messages]
    summary = summarize(messages)
    print(
        f"minibroker sink: {label} {outcome}: {summary['tasks']} task(s) "
        f"({summary['tasks_failed']} failed), sent {summary['sent']}, acked {summary['acked']}, "
        f"failed {summary['failed']}, errors {summary['errors']}",
        file=sys.stderr,
    )
    if options.ledger_path is not None:
        os.makedirs(options.ledger_path, exist_ok=True)
        path = os.path.join(options.ledger_path, f"_summary-{label}-{uuid.uuid4().hex[:8]}.json")
        with open(path, "w") as f:
            json.dump({"batch": label, "outcome": outcome, **summary}, f)
