"""kafka-reassign-partitions' files and throttle lists (Kafka 2.6's ReassignPartitionsCommand):
the reassignment JSON (`{"version":1,"partitions":[{"topic","partition","replicas",
"log_dirs"}]}`), the topics-to-move JSON (`{"version":1,"topics":[{"topic"}]}`), and which
replicas a throttled move throttles (leader side: every current replica of a moving partition;
follower side: its new replicas) on which brokers (every broker of the current and target
assignments). Pure: the CLI reads and writes the files."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

from minibroker.core.errors import ApiError, ErrorCode
from minibroker.core.types import TopicPartition

Assignment = Mapping[TopicPartition, Sequence[int]]


def parse_reassignment_json(text: str) -> dict[TopicPartition, tuple[int, ...]]:
    """The partitions and target replicas of a reassignment file; INVALID_REQUEST naming what
    is wrong (Kafka's parsePartitionReassignmentData refuses the same)."""
    try:
        obj = json.loads(text)
        entries = obj["partitions"]
        out = {}
        for e in entries:
            tp = TopicPartition(str(e["topic"]), int(e["partition"]))
            replicas = tuple(int(r) for r in e["replicas"])
            if tp in out:
                raise ApiError(ErrorCode.INVALID_REQUEST, f"Partition {tp} appears twice")
            out[tp] = replicas
    except ApiError:
        raise
    except (ValueError, KeyError, TypeError) as exc:
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            'a reassignment file is {"version":1,"partitions":[{"topic":T,"partition":P,'
            f'"replicas":[...]}}, ...]}}: {exc!r}',
        ) from None
    if not out:
        raise ApiError(ErrorCode.INVALID_REQUEST, "Partition reassignment list cannot be empty")
    return out


def reassignment_json(assignment: Assignment) -> str:
    """Kafka's format, one line, partitions sorted; `log_dirs` "any" as the tool writes."""
    return json.dumps(
        {
            "version": 1,
            "partitions": [
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "replicas": list(replicas),
                    "log_dirs": ["any"] * len(replicas),
                }
                for tp, replicas in sorted(assignment.items())
            ],
        },
        separators=(",", ":"),
    )


def parse_topics_to_move(text: str) -> list[str]:
    try:
        obj = json.loads(text)
        return [str(t["topic"]) for t in obj["topics"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            f'a topics file is {{"version":1,"topics":[{{"topic":T}}, ...]}}: {exc!r}',
        ) from None


def moving(current: Assignment, target: Assignment) -> dict[TopicPartition, tuple[int, ...]]:
    """The partitions whose replicas change (order included)."""
    return {tp: tuple(r) for tp, r in target.items() if tuple(current.get(tp, ())) != tuple(r)}


def throttled_replicas(current: Assignment, target: Assignment) -> dict[str, tuple[str, str]]:
    """Per topic: (leader.replication.throttled.replicas, follower.replication.throttled.
    replicas) for a throttled move: the leader side names every current replica of a moving
    partition, the follower side its new replicas (calculateLeaderThrottles and
    calculateFollowerThrottles)."""
    leader: dict[str, list[str]] = {}
    follower: dict[str, list[str]] = {}
    for tp, replicas in sorted(moving(current, target).items()):
        old = list(current.get(tp, ()))
        leader.setdefault(tp.topic, []).extend(f"{tp.partition}:{b}" for b in old)
        follower.setdefault(tp.topic, []).extend(
            f"{tp.partition}:{b}" for b in replicas if b not in old
        )
    return {t: (",".join(leader[t]), ",".join(follower.get(t, []))) for t in leader}


def reassigning_brokers(current: Assignment, target: Assignment) -> set[int]:
    """Every broker of a moving partition's current or target replicas: each gets the rates."""
    out: set[int] = set()
    for tp, replicas in moving(current, target).items():
        out.update(current.get(tp, ()))
        out.update(replicas)
    return out


def topics_of(tps: Iterable[TopicPartition]) -> list[str]:
    return sorted({tp.topic for tp in tps})
