"""kafka-console-producer: stdin's lines, one record each, to a topic (Kafka 2.6's
ConsoleProducer, docs/kafka-tools-2.6.md §4), with kafka-python's producer over the brokers'
Kafka listeners. Kafka's defaults: acks=1, linger.ms=1000 (--timeout), retries=3, a `>` on
stdout before every line read; parse.key/key.separator/ignore.error as its line reader."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

from minibroker.kafkatools.common import ToolError, ToolParser, parse_pairs, run, security, typed
from minibroker.runtime.settings import parse_properties

TOOL = "kafka-console-producer"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
# kafka-python's names for the producer settings Kafka's flags set.
FLAG_SETTINGS = {
    "timeout": "linger_ms",
    "request_required_acks": "acks",
    "request_timeout_ms": "request_timeout_ms",
    "message_send_max_retries": "retries",
    "retry_backoff_ms": "retry_backoff_ms",
    "max_block_ms": "max_block_ms",
    "max_memory_bytes": "buffer_memory",
    "max_partition_memory_bytes": "batch_size",
    "metadata_expiry_ms": "metadata_max_age_ms",
}
DEFAULTS = {"timeout": 1000, "request_required_acks": "1", "request_timeout_ms": 1500,
            "message_send_max_retries": 3}  # fmt: skip


def build_parser() -> ToolParser:
    p = ToolParser(TOOL, "Read data from standard input and publish it to Kafka.")
    p.add_argument("--bootstrap-server", metavar="HOST:PORT")
    p.add_argument("--broker-list", metavar="HOST:PORT", help="deprecated: --bootstrap-server")
    p.add_argument("--topic", required=True)
    p.add_argument("--sync", action="store_true", help="wait for each record's answer")
    p.add_argument("--compression-codec", nargs="?", const="gzip", default="none")
    p.add_argument("--batch-size", type=int, help="accepted, unused (as in Kafka 2.6)")
    for flag in FLAG_SETTINGS:
        p.add_argument(
            f"--{flag.replace('_', '-')}", type=str if flag == "request_required_acks" else int
        )
    p.add_argument("--property", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--producer-property", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--producer.config", dest="producer_config", metavar="FILE")
    return p


def producer_settings(args: Any) -> dict[str, Any]:
    """Kafka's precedence (CommandLineUtils.maybeMergeOptions): a flag given wins, else a
    --producer-property or --producer.config value, else the flag's default."""
    from kafka import KafkaProducer

    given = {}
    if args.producer_config:
        try:
            given.update(parse_properties(Path(args.producer_config).read_text()))
        except OSError as exc:
            raise ToolError(f"--producer.config {args.producer_config}: {exc}") from None
    given.update(parse_pairs(args.producer_property, "--producer-property"))
    known = KafkaProducer.DEFAULT_CONFIG
    from_file = set(given) - set(parse_pairs(args.producer_property, "--producer-property"))
    settings = typed(
        {k.replace(".", "_"): v for k, v in given.items() if k.replace(".", "_") in known
         and not (k in from_file and k.startswith(("security.", "sasl.", "ssl.")))},
        known, "--producer-property",
    )  # fmt: skip
    for flag, name in FLAG_SETTINGS.items():
        value = getattr(args, flag)
        if value is not None or name not in settings:
            value = DEFAULTS.get(flag) if value is None else value
            if value is not None:
                settings[name] = value
    acks = str(settings.get("acks") or 1).strip()
    if acks not in ("all", "-1", "0", "1"):
        raise ToolError(f"acks={acks}: one of all, -1, 0, 1")
    settings["acks"] = "all" if acks in ("all", "-1") else int(acks)
    for name in ("linger_ms", "request_timeout_ms", "retries", "retry_backoff_ms", "batch_size"):
        if name in settings:
            settings[name] = int(settings[name])
    codec = args.compression_codec
    if codec not in CODECS:
        raise ToolError(f"--compression-codec {codec}: one of {', '.join(CODECS)}")
    settings["compression_type"] = None if codec == "none" else codec
    settings.setdefault("client_id", "console-producer")
    settings.pop("key_serializer", None)
    settings.pop("value_serializer", None)
    return settings


def _on_sigterm(*_: object) -> None:
    raise KeyboardInterrupt  # as Kafka's shutdown hook: what was read is flushed, then exit


def _body(argv: list[str]) -> int:
    from kafka import KafkaProducer

    signal.signal(signal.SIGTERM, _on_sigterm)
    args = build_parser().parse_args(argv)
    servers = args.bootstrap_server or args.broker_list
    if not servers:
        raise ToolError('Missing required argument "[bootstrap-server]"')
    reader = parse_pairs(args.property, "--property")
    parse_key = reader.get("parse.key", "false").lower() == "true"
    separator = reader.get("key.separator", "\t")
    ignore_error = reader.get("ignore.error", "false").lower() == "true"
    login = security(Path(args.producer_config) if args.producer_config else None)
    login_settings = login.kafka_python()
    settings = {**producer_settings(args), **login_settings}
    producer = KafkaProducer(bootstrap_servers=servers, **settings)
    failed = []

    def report(exc: BaseException) -> None:
        failed.append(exc)
        print(f"Error when sending message to topic {args.topic}: {exc!r}", file=sys.stderr)

    try:
        for number, line in enumerate(_lines(), start=1):
            key: bytes | None = None
            value = line
            if parse_key:
                at = line.find(separator)
                if at < 0 and not ignore_error:
                    raise ToolError(f"No key found on line {number}: {line}")
                if at >= 0:
                    key, value = line[:at].encode(), line[at + len(separator) :]
            future = producer.send(args.topic, value=value.encode(), key=key)
            future.add_errback(report)
            if args.sync:
                future.get()
    finally:
        producer.flush()
        producer.close()
    return 0


def _lines() -> Any:
    while True:
        sys.stdout.write(">")
        sys.stdout.flush()
        line = sys.stdin.readline()
        if not line:
            return
        yield line.rstrip("\n").rstrip("\r")


def main(argv: list[str] | None = None) -> int:
    return run(TOOL, _body, argv)
