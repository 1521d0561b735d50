"""What each partition's leader says at the end of a run: its high watermark, its last stable
offset and the transactions it holds open (producer id, first offset, how long since that
producer's last batch there), as `minibroker topics describe` shows them. A reader stalled
behind a stuck LSO is then told apart from one that did not fetch: the first has an open
transaction at its LSO (a hanging one when nothing will end it), the second does not.
"""

from __future__ import annotations

from dataclasses import dataclass

from minibroker.client.admin import BrokerUnreachable, ReplicaDescription, describe_broker
from minibroker.core.types import TopicPartition
from minibroker.runtime.clock import now_ms
from minibroker.testing import Cluster

DESCRIBE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class LeaderView:
    topic: str
    partition: int
    leader: int
    high_watermark: int | None = None  # None: the leader did not answer
    last_stable_offset: int | None = None
    open_transactions: tuple[tuple[int, int, int], ...] = ()  # (producer id, first, quiet ms or -1)

    def text(self) -> str:
        where = f"{self.topic}-{self.partition}: leader broker-{self.leader}"
        if self.high_watermark is None:
            return f"{where}: did not answer"
        opened = "; ".join(
            f"producer {pid} open from offset {first}"
            + (f" (quiet {quiet_ms / 1000:.1f} s)" if quiet_ms >= 0 else "")
            for pid, first, quiet_ms in self.open_transactions
        )
        return (
            f"{where}, high watermark {self.high_watermark}, last stable offset "
            f"{self.last_stable_offset}" + (f"; {opened}" if opened else "; no open transaction")
        )


def leaders_now(cluster: Cluster, topic: str, partitions: int) -> tuple[LeaderView, ...]:
    """Each partition of `topic` as its leader reports it now."""
    addresses = cluster.deployment.broker_addresses()
    asked: dict[int, dict[TopicPartition, ReplicaDescription]] = {}  # each leader asked once
    out = []
    for p in range(partitions):
        leader = cluster.leader(topic, p)
        if leader not in asked:
            address = addresses.get(leader)
            try:
                asked[leader] = (
                    describe_broker(address, DESCRIBE_TIMEOUT_S).partitions if address else {}
                )
            except BrokerUnreachable:
                asked[leader] = {}
        r = asked[leader].get(TopicPartition(topic, p))
        if r is None or not r.is_leader:
            out.append(LeaderView(topic, p, leader))
            continue
        now = now_ms()
        out.append(
            LeaderView(
                topic,
                p,
                leader,
                r.high_watermark,
                r.last_stable_offset,
                tuple(
                    (pid, first, max(0, now - ts) if ts >= 0 else -1)
                    for pid, first, ts in r.open_transactions
                ),
            )  # fmt: skip
        )
    return tuple(out)
