"""An in-memory stand-in for the few ZkStore calls topic administration makes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import cast

from minibroker.core.types import LeaderAndIsr, TopicPartition
from minibroker.core.zk_layout import BrokerIdZNode, BrokerRegistration, TopicPartitionStateZNode
from minibroker.runtime.zk_client import WriteOp
from minibroker.runtime.zk_store import Stat, ZkError, ZkNodeExists, ZkNoNode, ZkStore


class MemoryZk:
    """The few ZkStore calls topic administration makes, over a dict; `writes` logs paths."""

    def __init__(self) -> None:
        self.nodes: dict[str, bytes] = {}
        self.writes: list[str] = []

    @staticmethod
    def _stat(data: bytes) -> Stat:
        return Stat(0, 0, 0, 0, 0, len(data))

    def get_or_none(self, path: str) -> tuple[bytes | None, Stat] | None:
        data = self.nodes.get(path)
        return None if data is None else (data, self._stat(data))

    def exists(self, path: str) -> Stat | None:
        return self._stat(self.nodes[path]) if path in self.nodes else None

    def children(self, path: str) -> list[str]:
        if path not in self.nodes:
            raise ZkNoNode(path)
        prefix = path.rstrip("/") + "/"
        return sorted({p[len(prefix) :].split("/")[0] for p in self.nodes if p.startswith(prefix)})

    def create(
        self, path: str, data: bytes = b"", *, makepath: bool = False, sequential: bool = False
    ) -> str:
        if sequential:
            self._seq = getattr(self, "_seq", -1) + 1
            path = f"{path}{self._seq:010d}"
        if path in self.nodes:
            raise ZkNodeExists(path)
        parent = path.rsplit("/", 1)[0]
        if parent and parent not in self.nodes:
            if not makepath:
                raise ZkNoNode(parent)
            self.create(parent, makepath=True)
        self.nodes[path] = data
        self.writes.append(path)
        return path

    def multi_many(self, batches: Iterable[Sequence[WriteOp]]) -> list[ZkError | None]:
        """Each batch applied whole or not at all: the error of its first failing write."""
        out: list[ZkError | None] = []
        for batch in batches:
            nodes, writes = dict(self.nodes), list(self.writes)
            try:
                for op in batch:
                    if op.create:
                        self.create(op.path, op.data)
                    else:
                        self.set(op.path, op.data)
                out.append(None)
            except ZkError as exc:
                self.nodes, self.writes = nodes, writes
                out.append(exc)
        return out

    def ensure_paths(self, paths: Iterable[str]) -> None:
        for path in paths:
            if path not in self.nodes:
                self.create(path, makepath=True)

    def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        if path not in self.nodes:
            raise ZkNoNode(path)
        self.nodes[path] = data
        self.writes.append(path)
        return self._stat(data)

    def read_partition_state(self, tp: TopicPartition) -> LeaderAndIsr | None:
        got = self.nodes.get(TopicPartitionStateZNode.path(tp))
        return TopicPartitionStateZNode.decode(got, 0) if got is not None else None

    @classmethod
    def with_brokers(cls, *broker_ids: int) -> MemoryZk:
        """Kafka's persistent paths and a registration per broker; `writes` starts empty."""
        m = cls()
        for path in (
            "/brokers/ids",
            "/brokers/topics",
            "/config/topics",
            "/config/brokers",
            "/config/changes",
            "/admin/delete_topics",
        ):
            m.create(path, makepath=True)
        for b in broker_ids:
            reg = BrokerRegistration(b, (f"PLAINTEXT://127.0.0.1:{9090 + b}",))
            m.create(BrokerIdZNode.path(b), BrokerIdZNode.encode(reg))
        m.writes.clear()
        return m

    def as_store(self) -> ZkStore:
        return cast(ZkStore, self)
