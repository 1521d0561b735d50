"""`minibroker topics delete-records`: Kafka's kafka-delete-records (KIP-107). The records of a
partition before an offset become unreadable at once (the leader's log start offset moves; -1
means up to the high watermark); their segments go with the next retention check. Each
partition's request goes to its leader, which answers once every live replica's log start
offset has reached the offset (the low watermark).

    minibroker topics delete-records --offset-json-file FILE
    minibroker topics delete-records TOPIC [--partition P] --offset O
"""

from __future__ import annotations

import argparse
from pathlib import Path

from minibroker.cli.locate import add_locate_arguments, zk_connect
from minibroker.client.admin_zk import live_brokers, read_topic_or_raise
from minibroker.client.record_deletion import delete_records, parse_offset_json
from minibroker.core.errors import ErrorCode
from minibroker.core.types import TopicPartition
from minibroker.localcluster import ClusterError, zk_session
from minibroker.locate import registered_address

DEFAULT_TIMEOUT_MS = 30_000


def add_parser(tsub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = tsub.add_parser(
        "delete-records",
        help="delete a partition's records before an offset (kafka-delete-records)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    p.add_argument("topic", nargs="?", help="the topic (or give --offset-json-file)")
    p.add_argument("--partition", type=int, help="only this partition (default: every one)")
    p.add_argument("--offset", type=int, help="delete before this offset; -1 = the HW")
    p.add_argument(
        "--offset-json-file", type=Path, metavar="FILE",
        help='kafka-delete-records\' file: {"partitions": [{"topic", "partition", "offset"}]}',
    )  # fmt: skip
    p.add_argument(
        "--timeout-ms", type=int, default=DEFAULT_TIMEOUT_MS,
        help=f"how long to wait for the replicas (default {DEFAULT_TIMEOUT_MS})",
    )  # fmt: skip
    add_locate_arguments(p)
    p.set_defaults(func=cmd_delete_records)


def _offsets(
    args: argparse.Namespace, zk_partitions: list[int] | None
) -> dict[TopicPartition, int]:
    if args.offset_json_file is not None:
        if args.topic or args.offset is not None or args.partition is not None:
            raise ClusterError("give either --offset-json-file or TOPIC --offset, not both")
        try:
            return parse_offset_json(args.offset_json_file.read_text())
        except OSError as exc:
            raise ClusterError(f"cannot read {args.offset_json_file}: {exc.strerror}") from None
        except ValueError as exc:
            raise ClusterError(f"{args.offset_json_file}: {exc}") from None
    if args.topic is None or args.offset is None:
        raise ClusterError("give TOPIC and --offset (or --offset-json-file FILE)")
    partitions = [args.partition] if args.partition is not None else zk_partitions or []
    return {TopicPartition(args.topic, p): args.offset for p in partitions}


def cmd_delete_records(args: argparse.Namespace) -> int:
    with zk_session(zk_connect(args)) as zk:
        topics = {args.topic} if args.topic else set()
        infos = {t: read_topic_or_raise(zk, t) for t in topics}
        offsets = _offsets(args, sorted(infos[args.topic].assignment) if args.topic else None)
        for topic in {tp.topic for tp in offsets} - set(infos):
            infos[topic] = read_topic_or_raise(zk, topic)
        addresses = {b: registered_address(reg) for b, reg in live_brokers(zk).items()}
    leaders: dict[TopicPartition, str | None] = {}
    for tp in offsets:
        info = infos[tp.topic]
        if tp.partition not in info.assignment:
            raise ClusterError(f"topic {tp.topic} has no partition {tp.partition}")
        state = info.states.get(tp.partition)
        leaders[tp] = addresses.get(state.leader) if state is not None else None
    print("Executing records delete operation")
    results = delete_records(leaders, offsets, args.timeout_ms)
    print("Records delete operation completed:")
    failed = 0
    for tp in sorted(results):
        r = results[tp]
        if r.error is ErrorCode.NONE:
            print(f"partition: {tp}\tlow_watermark: {r.low_watermark}")
        else:
            failed += 1
            detail = f": {r.message}" if r.message else ""
            print(f"partition: {tp}\terror: {r.error.name}{detail}")
    return 1 if failed else 0
