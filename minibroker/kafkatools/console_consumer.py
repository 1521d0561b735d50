"""kafka-console-consumer: a topic's records on stdout (Kafka 2.6's ConsoleConsumer and its
DefaultMessageFormatter, docs/kafka-tools-2.6.md §3), with kafka-python's consumer over the
brokers' Kafka listeners. As in Kafka: without --group a random console-consumer-N group that
does not commit; --timeout-ms ends the run when one poll of that long brings nothing; the
count goes to stderr as `Processed a total of N messages`, exit 0."""

from __future__ import annotations

import random
import signal
import sys
from pathlib import Path
from typing import Any

from minibroker.kafkatools.common import ToolError, ToolParser, parse_pairs, run, security, typed
from minibroker.runtime.settings import parse_properties

TOOL = "kafka-console-consumer"


def build_parser() -> ToolParser:
    p = ToolParser(TOOL, "Consume messages from Kafka topics and print them to standard out.")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--topic")
    which.add_argument("--whitelist", help="a regular expression of topics")
    p.add_argument("--partition", type=int)
    p.add_argument("--offset", help="earliest, latest (the default) or an offset")
    p.add_argument("--from-beginning", action="store_true")
    p.add_argument("--group")
    p.add_argument("--max-messages", type=int, default=-1)
    p.add_argument("--timeout-ms", type=int)
    p.add_argument("--isolation-level", choices=("read_committed", "read_uncommitted"))
    p.add_argument("--property", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--consumer-property", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--consumer.config", dest="consumer_config", metavar="FILE")
    p.add_argument("--skip-message-on-error", action="store_true")
    return p


def _validate(args: Any) -> None:
    if not (args.topic or args.whitelist):
        raise ToolError("Exactly one of whitelist/topic is required.")
    if args.partition is not None and not args.topic:
        raise ToolError("The topic is required when partition is specified.")
    if args.from_beginning and args.offset is not None:
        raise ToolError("Options from-beginning and offset cannot be specified together.")
    if args.offset is not None and args.partition is None:
        raise ToolError("The partition is required when offset is specified.")
    if args.offset not in (None, "earliest", "latest") and not str(args.offset).isdigit():
        raise ToolError(
            f"The provided offset value '{args.offset}' is incorrect. Valid values are "
            "'earliest', 'latest', or a non-negative long."
        )
    if args.group and args.partition is not None:
        raise ToolError("Options group and partition cannot be specified together.")


def consumer_settings(args: Any) -> dict[str, Any]:
    from kafka import KafkaConsumer

    given: dict[str, str] = {}
    if args.consumer_config:
        given.update(parse_properties(Path(args.consumer_config).read_text()))
    given.update(parse_pairs(args.consumer_property, "--consumer-property"))
    from_file = set(given) - set(parse_pairs(args.consumer_property, "--consumer-property"))
    settings = typed(
        {k.replace(".", "_"): v for k, v in given.items()
         if k.replace(".", "_") in KafkaConsumer.DEFAULT_CONFIG
         and not (k in from_file and k.startswith(("security.", "sasl.", "ssl.")))},
        KafkaConsumer.DEFAULT_CONFIG, "--consumer-property",
    )  # fmt: skip
    reset = settings.get("auto_offset_reset")
    if args.from_beginning and reset not in (None, "earliest"):
        raise ToolError(
            f"Can't simultaneously specify --from-beginning and 'auto.offset.reset={reset}', "
            "please remove one option"
        )
    settings["auto_offset_reset"] = reset or ("earliest" if args.from_beginning else "latest")
    if args.isolation_level or "isolation_level" not in settings:
        settings["isolation_level"] = args.isolation_level or "read_uncommitted"
    group = args.group or settings.get("group_id")
    if group is None:
        group = f"console-consumer-{random.randrange(100_000)}"
        settings.setdefault("enable_auto_commit", False)
    settings["group_id"] = group
    login = security(Path(args.consumer_config) if args.consumer_config else None)
    return {**settings, **login.kafka_python()}


def line_of(record: Any, fmt: dict[str, str]) -> bytes:
    """DefaultMessageFormatter: [timestamp SEP] [key SEP] value [SEP partition]."""

    def flag(name: str) -> bool:
        return fmt.get(name, "false").strip().lower() == "true"

    sep = fmt.get("key.separator", "\t").encode()
    parts: list[bytes] = []
    if flag("print.timestamp"):
        kind = "CreateTime" if record.timestamp_type == 0 else "LogAppendTime"
        parts.append(f"{kind}:{record.timestamp}".encode())
    if flag("print.key"):
        parts.append(b"null" if record.key is None else record.key)
    if fmt.get("print.value", "true").strip().lower() == "true":
        parts.append(b"null" if record.value is None else record.value)
    if flag("print.partition"):
        parts.append(str(record.partition).encode())
    return sep.join(parts) + fmt.get("line.separator", "\n").encode()


def _on_sigterm(*_: object) -> None:
    raise KeyboardInterrupt  # as Kafka's shutdown hook: the count is printed, the group left


def _body(argv: list[str]) -> int:
    from kafka import KafkaConsumer, TopicPartition

    signal.signal(signal.SIGTERM, _on_sigterm)
    args = build_parser().parse_args(argv)
    _validate(args)
    fmt = parse_pairs(args.property, "--property")
    settings = consumer_settings(args)
    if args.partition is not None:
        settings.pop("group_id")  # assigned, as Kafka's tool does: no group to join
    consumer = KafkaConsumer(bootstrap_servers=args.bootstrap_server, **settings)
    count = 0
    try:
        if args.partition is not None:
            tp = TopicPartition(args.topic, args.partition)
            consumer.assign([tp])
            where = args.offset or ("earliest" if args.from_beginning else "latest")
            if where == "earliest":
                consumer.seek_to_beginning(tp)
            elif where == "latest":
                consumer.seek_to_end(tp)
            else:
                consumer.seek(tp, int(where))
        elif args.whitelist:
            consumer.subscribe(pattern=f"^(?:{args.whitelist})$")  # Java's: the whole name
        else:
            consumer.subscribe([args.topic])
        timeout_ms = args.timeout_ms if args.timeout_ms is not None else 2**31 - 1
        out = sys.stdout.buffer
        while args.max_messages < 0 or count < args.max_messages:
            batches = consumer.poll(timeout_ms=timeout_ms, max_records=1)
            if not batches:
                print("ERROR Error processing message, terminating consumer process:  "
                      "TimeoutException", file=sys.stderr)  # fmt: skip
                break
            for records in batches.values():
                for record in records:
                    out.write(line_of(record, fmt))
                    out.flush()
                    count += 1
    except KeyboardInterrupt:
        pass
    finally:
        print(f"Processed a total of {count} messages", file=sys.stderr)
        consumer.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    return run(TOOL, _body, argv)
