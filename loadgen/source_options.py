"""The minibroker data source's options and offset plans, as plain values; pure (no I/O).

Everything a Spark task needs travels pickled, so options are parsed once on the driver into
frozen dataclasses of strings and ints, and a bad option fails there with a one-line message.

Options (names case-insensitive, values strings; unknown names are ignored, as Spark passes
its own such as checkpointLocation):
  bootstrap            required: host:port[,host:port...] of any brokers
  topic                required for reads; for writes unless the DataFrame has a topic column
                       (the option wins over the column, as in Spark's Kafka sink)
  acks                 all | -1 | 1 | 0 (default all)
  linger.ms, batch.size, request.timeout.ms, delivery.timeout.ms
                       the producer's, with Kafka's defaults 5, 16384, 30000, 120000
  max.block.ms         how long to wait for a topic's metadata before failing (default 10000)
  ledger.path          directory for each write task's Parquet ledger (default: none)
  ledger.location      executor (default: each task writes its ledger file into ledger.path,
                       a folder the driver reads too) | driver (each task's ledger travels in
                       its commit message and the driver writes it: executors on machines
                       that share no folder with the driver, as on a Docker Swarm)
  protocol             grpc (default: minibroker's producer) | kafka (kafka-python's
                       KafkaProducer; bootstrap names the brokers' KAFKA listeners)
  command.config       with protocol kafka: a Kafka client properties file (security.protocol,
                       sasl.*, ssl.*), read by each task, so no password travels in the options
  transactional.id     with protocol kafka: each task produces in transactions, with this
                       prefix and its partition as its transactional id (a retried task fences
                       its zombie); a record counts as acknowledged once its transaction commits
  transaction.records  records per transaction (default 100)
  isolation.level      reads: read_uncommitted (default) | read_committed (below the LSO,
                       aborted transactions left out)
  startingOffsets      earliest (default) | latest | {"topic": {"0": 23, "1": -2}}
  endingOffsets        latest (default: each HW when the batch read is planned) | JSON as above;
                       JSON leaves out partitions at earliest (starting) / latest (ending)
  poll.timeout.ms      a read task fails after this long without records it expects (120000)
  failOnDataLoss       true (default): a range retention or DeleteRecords removed fails the
                       read, as Spark's Kafka source; false: the read goes on from the log start
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

# Kafka's ListOffsets sentinels, also accepted in startingOffsets/endingOffsets JSON.
EARLIEST = -2
LATEST = -1

Acks = Literal[-1, 0, 1]
Protocol = Literal["grpc", "kafka"]
PROTOCOLS: tuple[Protocol, ...] = ("grpc", "kafka")
# "earliest", "latest", or partition -> offset (EARLIEST/LATEST allowed as values).
OffsetSpec = str | dict[int, int]


class MinibrokerSourceError(RuntimeError):
    """A misconfigured source or sink, or a cluster that cannot serve it at all. Its message
    names the topic and/or bootstrap servers, since Spark shows it inside a worker traceback."""


@dataclass(frozen=True)
class WriteOptions:
    bootstrap: str
    topic: str | None
    acks: Acks
    linger_ms: int
    batch_size: int
    request_timeout_ms: int
    delivery_timeout_ms: int
    max_block_ms: int
    ledger_path: str | None
    protocol: Protocol = "grpc"
    ledger_on_driver: bool = False  # ledger.location driver
    command_config: str | None = None  # protocol kafka: the client's security settings (a path)
    transactional_id: str | None = None  # protocol kafka: produce in transactions (a prefix)
    transaction_records: int = 100


@dataclass(frozen=True)
class ReadOptions:
    bootstrap: str
    topic: str
    starting: OffsetSpec
    ending: OffsetSpec
    request_timeout_ms: int
    max_block_ms: int
    poll_timeout_ms: int
    fail_on_data_loss: bool = True
    read_committed: bool = False


@dataclass(frozen=True)
class OffsetRange:
    """Offsets [start, end) of one partition; start may be EARLIEST (the log start offset)."""

    topic: str
    partition: int
    start: int
    end: int


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    # Spark hands options over case-insensitively; so do we.
    return {str(k).lower(): str(v) for k, v in options.items()}


def _required(opts: Mapping[str, str], name: str) -> str:
    value = opts.get(name.lower(), "").strip()
    if not value:
        raise MinibrokerSourceError(f"option {name!r} is required by the minibroker source")
    return value


def _int(opts: Mapping[str, str], name: str, default: int, minimum: int = 0) -> int:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise MinibrokerSourceError(f"option {name!r} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise MinibrokerSourceError(f"option {name!r} must be >= {minimum}, got {value}")
    return value


def _bootstrap(opts: Mapping[str, str]) -> str:
    raw = _required(opts, "bootstrap")
    for address in raw.split(","):
        host, _, port = address.strip().rpartition(":")
        if not host or not port.isdigit():
            raise MinibrokerSourceError(
                f"option 'bootstrap' must be host:port[,host:port...], got {raw!r}"
            )
    return raw


def _acks(raw: str) -> Acks:
    table: dict[str, Acks] = {"all": -1, "-1": -1, "1": 1, "0": 0}
    if raw.lower() not in table:
        raise MinibrokerSourceError(f"option 'acks' must be all, -1, 1 or 0, got {raw!r}")
    return table[raw.lower()]


def _protocol(raw: str) -> Protocol:
    for protocol in PROTOCOLS:
        if raw.lower() == protocol:
            return protocol
    raise MinibrokerSourceError(f"option 'protocol' must be grpc or kafka, got {raw!r}")


def _either(name: str, raw: str, no: str, yes: str) -> bool:
    """An option of two values: True for `yes`; anything else is refused."""
    value = raw.strip().lower()
    if value not in (no, yes):
        raise MinibrokerSourceError(f"option '{name}' must be {no} or {yes}, got {raw!r}")
    return value == yes


def parse_write_options(options: Mapping[str, str], *, has_topic_column: bool) -> WriteOptions:
    """Options of a (batch or streaming) write; the topic may come from a `topic` column."""
    opts = _lower(options)
    topic = opts.get("topic", "").strip() or None
    bootstrap = _bootstrap(opts)
    if topic is None and not has_topic_column:
        raise MinibrokerSourceError(
            f"writing to {bootstrap}: set option 'topic' or give the DataFrame a 'topic' column"
        )
    parsed = WriteOptions(
        bootstrap=bootstrap,
        topic=topic,
        acks=_acks(opts.get("acks", "all")),
        linger_ms=_int(opts, "linger.ms", 5),
        batch_size=_int(opts, "batch.size", 16384, minimum=1),
        request_timeout_ms=_int(opts, "request.timeout.ms", 30000, minimum=1),
        delivery_timeout_ms=_int(opts, "delivery.timeout.ms", 120000, minimum=1),
        max_block_ms=_int(opts, "max.block.ms", 10000, minimum=1),
        ledger_path=opts.get("ledger.path", "").strip() or None,
        protocol=_protocol(opts.get("protocol", "grpc").strip()),
        command_config=opts.get("command.config", "").strip() or None,
        transactional_id=opts.get("transactional.id", "").strip() or None,
        transaction_records=_int(opts, "transaction.records", 100, minimum=1),
        ledger_on_driver=_either(
            "ledger.location", opts.get("ledger.location", "executor"), "executor", "driver"
        ),
    )
    if parsed.transactional_id is not None and parsed.protocol != "kafka":
        raise MinibrokerSourceError("option 'transactional.id' needs protocol kafka")
    if parsed.transactional_id is not None and parsed.acks != -1:
        raise MinibrokerSourceError("option 'transactional.id' needs acks all")
    # The producer refuses this combination (Kafka's rule); say so on the driver, not per task.
    if parsed.delivery_timeout_ms < parsed.linger_ms + parsed.request_timeout_ms:
        raise MinibrokerSourceError(
            "option 'delivery.timeout.ms' must be >= linger.ms + request.timeout.ms"
        )
    return parsed


def parse_read_options(options: Mapping[str, str]) -> ReadOptions:
    """Options of a batch or streaming read."""
    opts = _lower(options)
    bootstrap = _bootstrap(opts)
    topic = _required(opts, "topic")
    starting = parse_offset_spec(opts.get("startingoffsets", "earliest"), "startingOffsets", topic)
    ending = parse_offset_spec(opts.get("endingoffsets", "latest"), "endingOffsets", topic)
    if ending == "earliest":
        raise MinibrokerSourceError("option 'endingOffsets' cannot be 'earliest'")
    return ReadOptions(
        bootstrap=bootstrap,
        topic=topic,
        starting=starting,
        ending=ending,
        request_timeout_ms=_int(opts, "request.timeout.ms", 30000, minimum=1),
        max_block_ms=_int(opts, "max.block.ms", 10000, minimum=1),
        poll_timeout_ms=_int(opts, "poll.timeout.ms", 120000, minimum=1),
        fail_on_data_loss=_bool(opts, "failondataloss", True),
        read_committed=_either(
            "isolation.level",
            opts.get("isolation.level", "read_uncommitted"),
            "read_uncommitted",
            "read_committed",
        ),  # fmt: skip
    )


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name)
    if raw is None:
        return default
    if raw.strip().lower() not in ("true", "false"):
        raise MinibrokerSourceError(f"option {name!r} must be true or false, got {raw!r}")
    return raw.strip().lower() == "true"


def parse_offset_spec(raw: str, name: str, topic: str) -> OffsetSpec:
    """ "earliest", "latest", or Spark's Kafka JSON {"topic": {"0": 23, "1": -2}}."""
    text = raw.strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        raise MinibrokerSourceError(
            f"option {name!r} must be earliest, latest or JSON like "
            f'{{"{topic}": {{"0": 23, "1": -2}}}}, got {raw!r}'
        ) from None
    if (
        not isinstance(parsed, dict)
        or set(parsed) != {topic}
        or not isinstance(parsed[topic], dict)
    ):
        raise MinibrokerSourceError(
            f"option {name!r} must name exactly the topic read, {topic!r}: got {raw!r}"
        )
    spec: dict[int, int] = {}
    for partition, offset in parsed[topic].items():
        if not str(partition).isdigit() or not isinstance(offset, int) or offset < EARLIEST:
            raise MinibrokerSourceError(
                f"option {name!r}: partition {partition!r} -> {offset!r} is not partition -> "
                "offset (-2 earliest, -1 latest)"
            )
        spec[int(partition)] = offset
    return spec


def resolve_offsets(
    spec: OffsetSpec,
    partitions: list[int],
    beginning: Mapping[int, int],
    latest: Mapping[int, int],
    *,
    default: int,
) -> dict[int, int]:
    """Each partition's concrete offset for `spec`; partitions the JSON leaves out get
    `default` (EARLIEST or LATEST). Raises for a partition the topic does not have."""
    if isinstance(spec, str):
        per_partition: dict[int, int] = {}
        default = EARLIEST if spec == "earliest" else LATEST
    else:
        per_partition = spec
        unknown = sorted(set(per_partition) - set(partitions))
        if unknown:
            raise MinibrokerSourceError(
                f"offsets name partition {unknown[0]}, which the topic does not have "
                f"(partitions {partitions})"
            )
    resolved = {}
    for p in partitions:
        wanted = per_partition.get(p, default)
        resolved[p] = (
            beginning[p] if wanted == EARLIEST else latest[p] if wanted == LATEST else wanted
        )
    return resolved


def check_within_log(
    topic: str,
    name: str,
    offsets: Mapping[int, int],
    beginning: Mapping[int, int],
    latest: Mapping[int, int],
) -> None:
    """A batch read's offsets must lie between each log start and high watermark: past the HW
    a task would wait for records that may never come, before the start they are gone."""
    for p, offset in sorted(offsets.items()):
        if not beginning[p] <= offset <= latest[p]:
            raise MinibrokerSourceError(
                f"{name} of topic {topic!r} partition {p} is {offset}, outside its log "
                f"(log start offset {beginning[p]}, high watermark {latest[p]})"
            )


def plan_ranges(topic: str, start: Mapping[int, int], end: Mapping[int, int]) -> list[OffsetRange]:
    """One range per partition that has something to read (start < end), for a batch read; a
    start after the end is a mistake in the options, as in Spark's Kafka source."""
    ranges = []
    for p in sorted(end):
        if start[p] > end[p]:
            raise MinibrokerSourceError(
                f"topic {topic!r} partition {p}: starting offset {start[p]} is after ending "
                f"offset {end[p]}"
            )
        if start[p] < end[p]:
            ranges.append(OffsetRange(topic, p, start[p], end[p]))
    return ranges


def plan_stream_ranges(
    topic: str, start: Mapping[str, int], end: Mapping[str, int]
) -> list[OffsetRange]:
    """Ranges of one micro-batch between two checkpointed offsets ({"0": 12, ...}). A partition
    new since `start` is read from its log start; one whose end went backwards (truncated after
    an unclean election) has nothing to read and is skipped rather than failing the query."""
    ranges = []
    for key in sorted(end, key=int):
        s = start.get(key, EARLIEST)
        if max(s, 0) < end[key]:
            ranges.append(OffsetRange(topic, int(key), s, end[key]))
    return ranges
