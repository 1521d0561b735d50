"""`minibroker consume TOPIC`: print a topic's records like Kafka's console consumer, without a
consumer group; --until-hw stops once each partition was read up to its HW as of the start.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from minibroker.cli.locate import add_locate_arguments, bootstrap_servers
from minibroker.cli.output import record_json, text
from minibroker.cli.produce import TOPIC_WAIT_MS, non_negative
from minibroker.client.consumer import Consumer
from minibroker.client.errors import ClientError, UnknownTopicError
from minibroker.client.fetch_state import ConsumerRecord, OffsetReset
from minibroker.core.types import TopicPartition
from minibroker.runtime.clock import monotonic_ms

_POLL_MS = 1000


def positive(value: str) -> int:
    n = int(value)
    if n <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {n}")
    return n


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("consume", help="print a topic's records")
    p.add_argument("topic")
    p.add_argument(
        "--from-beginning", action="store_true", help="start at the log start, not the end"
    )
    p.add_argument("--partition", type=non_negative, help="only this partition")
    p.add_argument(
        "--until-hw",
        action="store_true",
        help="exit once every partition was read up to its high watermark as of the start",
    )
    p.add_argument("--json", action="store_true", help="one JSON object per record")
    p.add_argument("--max-records", type=positive, help="exit after this many records")
    p.add_argument("--timeout-ms", type=positive, help="exit when no record arrived for this long")
    add_locate_arguments(p)
    p.set_defaults(func=cmd_consume)


def format_record(record: ConsumerRecord, as_json: bool) -> str:
    """A record as printed: its value (or "null"), or the JSON object with --json."""
    if as_json:
        return record_json(record.topic, record.partition, record.offset, record.key, record.value)
    value = text(record.value)
    return "null" if value is None else value


@dataclass
class UntilHw:
    """Which partitions still have records below their high watermark as of the start."""

    targets: dict[TopicPartition, int]
    done: set[TopicPartition] = field(default_factory=set)

    def wanted(self, record: ConsumerRecord) -> bool:
        # Records written after the start are past the mark and not printed.
        return record.offset < self.targets[record.tp]

    def update(self, tp: TopicPartition, position: int) -> None:
        if position >= self.targets[tp]:
            self.done.add(tp)

    def finished(self) -> bool:
        return self.done >= self.targets.keys()

    def lagging(self, positions: dict[TopicPartition, int]) -> str:
        return ", ".join(
            f"{tp} at {positions[tp]} of {hw}"
            for tp, hw in sorted(self.targets.items())
            if tp not in self.done
        )


async def _partitions(consumer: Consumer, args: argparse.Namespace) -> list[TopicPartition]:
    parts = await consumer.partitions_for(args.topic, timeout_ms=TOPIC_WAIT_MS)
    if args.partition is None:
        return [TopicPartition(args.topic, p) for p in parts]
    if args.partition not in parts:
        raise UnknownTopicError(
            args.topic, f"topic {args.topic!r} has no partition {args.partition}"
        )
    return [TopicPartition(args.topic, args.partition)]


async def consume(
    consumer: Consumer, args: argparse.Namespace, emit: Callable[[list[str]], None]
) -> int:
    """Print records until a stop condition holds; the exit code. `emit` prints the lines of
    one poll at once."""
    tps = await _partitions(consumer, args)
    consumer.assign(tps)
    until = UntilHw(await consumer.end_offsets(tps)) if args.until_hw else None
    printed = 0
    last_record_ms = monotonic_ms()
    while True:
        if until is not None:
            for tp in tps:
                until.update(tp, await consumer.position(tp))
            if until.finished():
                return 0
        if args.max_records is not None and printed >= args.max_records:
            return 0
        idle_ms = monotonic_ms() - last_record_ms
        if args.timeout_ms is not None and idle_ms >= args.timeout_ms:
            if until is not None:
                positions = {tp: await consumer.position(tp) for tp in tps}
                raise ClientError(
                    f"timed out before the high watermark: {until.lagging(positions)}"
                )
            return 0
        wait_ms = _POLL_MS if args.timeout_ms is None else min(_POLL_MS, args.timeout_ms - idle_ms)
        records = await consumer.poll(max(1, wait_ms))
        if records:
            last_record_ms = monotonic_ms()
        lines = output_lines(records, args, until, printed)
        if lines:
            emit(lines)
            printed += len(lines)


def output_lines(
    records: Sequence[ConsumerRecord], args: argparse.Namespace, until: UntilHw | None, printed: int
) -> list[str]:
    """The lines to print for one poll's records, stopping at --max-records."""
    wanted = [r for r in records if until is None or until.wanted(r)]
    if args.max_records is not None:
        wanted = wanted[: max(0, args.max_records - printed)]
    return [format_record(r, args.json) for r in wanted]


def _emit(lines: list[str]) -> None:
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()


async def _run(args: argparse.Namespace, servers: list[str]) -> int:
    auto_offset_reset: OffsetReset = "earliest" if args.from_beginning else "latest"
    # With --timeout-ms, offset look-ups give up after it too rather than after Kafka's 60 s.
    api_timeout_ms = args.timeout_ms or 60000
    async with Consumer(
        servers, auto_offset_reset=auto_offset_reset, default_api_timeout_ms=api_timeout_ms
    ) as consumer:
        return await consume(consumer, args, _emit)


def cmd_consume(args: argparse.Namespace) -> int:
    return asyncio.run(_run(args, bootstrap_servers(args)))
