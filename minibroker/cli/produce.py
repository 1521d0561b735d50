"""`minibroker produce TOPIC`: stdin's lines as records, like Kafka's console producer. With
--json, one line per record as it is acknowledged or fails; exit code 1 if any record failed.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import os
import sys
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from minibroker.cli.locate import add_locate_arguments, bootstrap_servers
from minibroker.cli.output import json_line, record_json, text
from minibroker.client.errors import BrokerError, UnknownTopicError
from minibroker.client.producer import Acks, Producer
from minibroker.client.record_future import RecordFuture
from minibroker.client.record_metadata import RecordMetadata

# How long to wait for a topic to appear in the brokers' metadata before saying it is unknown
# (a topic created a moment ago may not have reached every broker's cache yet).
TOPIC_WAIT_MS = 5000
_CHUNK = 64 * 1024


def non_negative(value: str) -> int:
    n = int(value)
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {n}")
    return n


def parse_acks(value: str) -> Acks:
    table: dict[str, Acks] = {"all": -1, "-1": -1, "1": 1, "0": 0}
    try:
        return table[value]
    except KeyError:
        raise argparse.ArgumentTypeError(f"must be all, -1, 1 or 0, got {value!r}") from None


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("produce", help="send stdin's lines to a topic, one record per line")
    p.add_argument("topic")
    p.add_argument("--acks", type=parse_acks, default=-1, help="all|-1, 1 or 0 (default all)")
    p.add_argument("--partition", type=non_negative, help="this partition, not the partitioner's")
    p.add_argument("--key-separator", help="each line is KEY<SEP>VALUE (default: no key)")
    p.add_argument("--json", action="store_true", help="print each record's result as JSON")
    p.add_argument("--linger-ms", type=non_negative, default=5, help="linger.ms (default 5)")
    add_locate_arguments(p)
    p.set_defaults(func=cmd_produce)


class LineSplitter:
    """Whole lines out of arbitrary chunks of bytes; the newline (and a CR before it) dropped."""

    def __init__(self) -> None:
        self._rest = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        lines = (self._rest + chunk).split(b"\n")
        self._rest = lines.pop()
        return [line.removesuffix(b"\r") for line in lines]

    def finish(self) -> list[bytes]:
        """The last line if stdin did not end with a newline."""
        rest, self._rest = self._rest, b""
        return [rest.removesuffix(b"\r")] if rest else []


class MissingKeySeparator(ValueError):
    """A line without the --key-separator: not sent, reported like a failed record."""

    error_name = "MISSING_KEY_SEPARATOR"


def split_key(line: bytes, separator: bytes | None) -> tuple[bytes | None, bytes]:
    """(key, value) of a line: the key is what precedes the first separator."""
    if separator is None:
        return None, line
    key, sep, value = line.partition(separator)
    if not sep:
        raise MissingKeySeparator(f"no key separator {separator.decode()!r} on the line")
    return key, value


@dataclass(frozen=True)
class Sent:
    line: int
    key: bytes | None
    value: bytes


def result_line(sent: Sent, topic: str, outcome: RecordMetadata | BaseException) -> str:
    """The --json line of one record: where it was written, or why it was not."""
    if isinstance(outcome, RecordMetadata):
        return record_json(topic, outcome.partition, outcome.offset, sent.key, sent.value)
    if isinstance(outcome, BrokerError):
        name = outcome.code.name
    else:
        name = getattr(outcome, "error_name", type(outcome).__name__)
    return json_line(
        {
            "error": name,
            "message": str(outcome),
            "topic": topic,
            "line": sent.line,
            "key": text(sent.key),
            "value": text(sent.value),
        }
    )


class Reporter:
    """Prints each record's outcome when it arrives and counts failures."""

    def __init__(self, topic: str, as_json: bool, write: Callable[[str], None]) -> None:
        self.topic = topic
        self.as_json = as_json
        self.write = write
        self.failed = 0

    def outcome(self, sent: Sent, result: RecordMetadata | BaseException) -> None:
        if not isinstance(result, RecordMetadata):
            self.failed += 1
            if not self.as_json:
                print(f"minibroker: line {sent.line} not written: {result}", file=sys.stderr)
        if self.as_json:
            self.write(result_line(sent, self.topic, result))

    def callback(self, sent: Sent) -> Callable[[RecordFuture], None]:
        def done(fut: RecordFuture) -> None:
            if fut.cancelled():
                self.outcome(sent, asyncio.CancelledError())
            else:
                self.outcome(sent, fut.exception() or fut.result())

        return done


async def stdin_chunks() -> AsyncIterator[bytes]:
    """stdin in chunks: a line at a time from a terminal, big chunks from a pipe or file."""
    # A daemon thread reads, because the event loop cannot watch regular files, and a thread
    # of the default executor blocked in read() would keep asyncio.run from returning on ^C.
    loop = asyncio.get_running_loop()
    chunks: asyncio.Queue[bytes] = asyncio.Queue(maxsize=4)
    fd = sys.stdin.fileno()

    def read() -> None:
        chunk = b"-"
        while chunk:
            try:
                chunk = os.read(fd, _CHUNK)
            except OSError:
                chunk = b""
            try:
                asyncio.run_coroutine_threadsafe(chunks.put(chunk), loop).result()
            except (RuntimeError, concurrent.futures.CancelledError):
                return  # the loop is gone

    threading.Thread(target=read, name="stdin-reader", daemon=True).start()
    while chunk := await chunks.get():
        yield chunk


async def produce_lines(
    producer: Producer, args: argparse.Namespace, chunks: AsyncIterator[bytes], reporter: Reporter
) -> None:
    separator = args.key_separator.encode() if args.key_separator else None
    splitter = LineSplitter()
    line_no = 0

    async def send(line: bytes) -> None:
        nonlocal line_no
        line_no += 1
        try:
            key, value = split_key(line, separator)
        except MissingKeySeparator as exc:
            reporter.outcome(Sent(line_no, None, line), exc)
            return
        sent = Sent(line_no, key, value)
        fut = await producer.send(args.topic, value, key=key, partition=args.partition)
        fut.add_done_callback(reporter.callback(sent))

    async for chunk in chunks:
        for line in splitter.feed(chunk):
            await send(line)
    for line in splitter.finish():
        await send(line)
    await producer.flush()


async def _run(args: argparse.Namespace, servers: list[str]) -> int:
    reporter = Reporter(args.topic, args.json, lambda s: print(s, flush=True))
    async with Producer(
        servers, acks=args.acks, linger_ms=args.linger_ms, max_block_ms=TOPIC_WAIT_MS
    ) as producer:
        partitions = await producer.partitions_for(args.topic)
        if args.partition is not None and args.partition not in partitions:
            raise UnknownTopicError(
                args.topic, f"topic {args.topic!r} has no partition {args.partition}"
            )
        await produce_lines(producer, args, stdin_chunks(), reporter)
    return 1 if reporter.failed else 0


def cmd_produce(args: argparse.Namespace) -> int:
    return asyncio.run(_run(args, bootstrap_servers(args)))
