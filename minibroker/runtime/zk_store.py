"""The one module that talks to ZooKeeper about Kafka's znodes (through kazoo): broker
registration, the controller and its epoch, partition states and ISR change notifications, and
the controller's writes fenced by /controller_epoch; everything else sees typed calls.

kazoo's exceptions are mapped to the ZkError classes of zk_errors.py, as kazoo maps server codes.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kazoo import exceptions as kz_exc

from minibroker.core.types import LeaderAndIsr, TopicPartition
from minibroker.core.zk_layout import (
    BrokerIdZNode,
    ControllerEpochZNode,
    ControllerZNode,
    IsrChangeNotificationSequenceZNode,
    TopicPartitionStateZNode,
    TopicPartitionsZNode,
    TopicPartitionZNode,
)
from minibroker.runtime.zk_client import ZkClient
from minibroker.runtime.zk_errors import (
    BrokerIdAlreadyRegistered,
    ControllerMoved,
    SessionState,
    Stat,
    ZkBadVersion,
    ZkConnectionError,
    ZkError,
    ZkNodeExists,
    ZkNoNode,
    call_mapped,
    first_failure,
    mapped_error,
)

log = logging.getLogger(__name__)

# Ops of the controller's fenced writes per multi (see ZkStore._fenced_many); a multi of 50
# state znodes is ~8 KB, far below ZooKeeper's 1 MB request limit (jute.maxbuffer).
FENCED_OPS_PER_MULTI = 50
# What a multi's other ops answer when one op failed: ZooKeeper's OK for those before it
# (kazoo's RolledBackError) and RUNTIMEINCONSISTENCY for those after it.
_ROLLED_BACK = (kz_exc.RolledBackError, kz_exc.RuntimeInconsistency)


class ZkStore(ZkClient):
    """A ZooKeeper session that knows Kafka's znodes."""

    def register_broker(
        self, broker_id: int, data: bytes, *, previous_session_id: int | None = None
    ) -> int:
        """Register /brokers/ids/<id> as Kafka's KafkaZkClient.registerBroker does (ref. §1.3).

        One multi of create(empty, EPHEMERAL) + setData(expected version 0), so the znode ends at
        dataVersion 1. kazoo cannot send Kafka's null data; the empty bytes are overwritten in the
        same multi, so no reader ever sees them. Returns the broker epoch: the znode's czxid.
        A znode left by this broker's previous (expired) session is deleted and re-created
        (KAFKA-7165); one owned by another live session raises BrokerIdAlreadyRegistered.
        """
        path = BrokerIdZNode.path(broker_id)
        for _attempt in range(2):
            tx = self._client.transaction()
            tx.create(path, b"", ephemeral=True)
            tx.set_data(path, data, version=0)
            results = call_mapped(tx.commit)
            failure = first_failure(results)
            if failure is None:
                return int(results[1].czxid)
            if not isinstance(failure, ZkNodeExists):
                raise failure
            stat = self.exists(path)
            if stat is None:
                continue  # vanished between the two calls: try again
            if stat.ephemeral_owner == self.session_id:
                return stat.czxid  # our own, from a multi retried after a connection loss
            if previous_session_id is not None and stat.ephemeral_owner == previous_session_id:
                with contextlib.suppress(ZkNoNode):
                    self.delete(path, version=stat.version)
                continue
            raise BrokerIdAlreadyRegistered(
                f"{path} is held by session {stat.ephemeral_owner:#x}, not ours"
                f" ({(self.session_id or 0):#x}): is another broker {broker_id} running?"
            )
        raise ZkError(f"could not register {path}")

    def read_controller_epoch(self) -> tuple[int, int] | None:
        """(epoch, zkVersion) of /controller_epoch, or None if it does not exist."""
        got = self.get_or_none(ControllerEpochZNode.path)
        if got is None:
            return None
        data, stat = got
        return ControllerEpochZNode.decode(data), stat.version

    def ensure_controller_epoch(self) -> tuple[int, int]:
        """Read /controller_epoch, creating it with 0 if missing (reference §1.7)."""
        current = self.read_controller_epoch()
        if current is not None:
            return current
        with contextlib.suppress(ZkNodeExists):
            self.create(ControllerEpochZNode.path, ControllerEpochZNode.encode(0))
        current = self.read_controller_epoch()
        if current is None:
            raise ZkError("/controller_epoch vanished right after creation")
        return current

    def read_controller(self) -> int | None:
        """The id in /controller, or None when no controller is elected."""
        got = self.get_or_none(ControllerZNode.path)
        return ControllerZNode.decode(got[0]) if got is not None else None

    def try_register_controller(
        self, controller_id: int, timestamp_ms: int, new_epoch: int, epoch_zk_version: int
    ) -> int | None:
        """The election multi of reference §5.1: create /controller (ephemeral) and set
        /controller_epoch to `new_epoch` if it is still at `epoch_zk_version`.

        Returns the new zkVersion of /controller_epoch, or None if the multi failed because a
        controller exists or the epoch moved (the caller re-reads to see whether it was us).
        """
        tx = self._client.transaction()
        tx.create(
            ControllerZNode.path,
            ControllerZNode.encode(controller_id, timestamp_ms),
            ephemeral=True,
        )
        tx.set_data(
            ControllerEpochZNode.path,
            ControllerEpochZNode.encode(new_epoch),
            version=epoch_zk_version,
        )
        results = call_mapped(tx.commit)
        failure = first_failure(results)
        if failure is None:
            return int(results[1].version)
        if isinstance(failure, ZkNodeExists | ZkBadVersion):
            return None
        raise failure

    def update_partition_states(
        self, writes: Iterable[tuple[TopicPartition, LeaderAndIsr, int]]
    ) -> list[int | None]:
        """Leaders' conditional ISR writes (reference §2.7, ReplicationUtils.updateLeaderAndIsr),
        each (partition, state, expected zkVersion), pipelined: per write, in order, the new
        zkVersion, or None on conflict (NONODE, or BADVERSION with other content stored). A
        BADVERSION whose stored state equals ours counts as success: our own write, resent
        after a connection loss, which raises for the whole batch (resend it as it is)."""
        todo = list(writes)
        paths = [TopicPartitionStateZNode.path(tp) for tp, _state, _expected in todo]
        outcomes = self._pipelined(
            functools.partial(
                self._client.set_async, path, TopicPartitionStateZNode.encode(state), expected
            )
            for path, (_tp, state, expected) in zip(paths, todo, strict=True)
        )
        out: list[int | None] = []
        conflicts = []
        for i, outcome in enumerate(outcomes):
            if isinstance(outcome, kz_exc.BadVersionError):
                conflicts.append(i)
            elif isinstance(outcome, Exception) and not isinstance(outcome, kz_exc.NoNodeError):
                raise mapped_error(outcome) from outcome
            out.append(None if isinstance(outcome, Exception) else int(outcome.version))
        stored = self.get_many([paths[i] for i in conflicts])
        for i in conflicts:
            got = stored[paths[i]]
            if got is not None:
                now = TopicPartitionStateZNode.decode(got[0], got[1].version)
                ours = todo[i][1]
                same = (now.leader, now.leader_epoch, now.isr, now.controller_epoch) == (
                    ours.leader,
                    ours.leader_epoch,
                    ours.isr,
                    ours.controller_epoch,
                )
                out[i] = now.zk_version if same else None
        return out

    def read_partition_state(self, tp: TopicPartition) -> LeaderAndIsr | None:
        got = self.get_or_none(TopicPartitionStateZNode.path(tp))
        return TopicPartitionStateZNode.decode(got[0], got[1].version) if got else None

    def read_partition_states(
        self, tps: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderAndIsr]:
        """The state znodes of `tps` that exist, read pipelined."""
        paths = {tp: TopicPartitionStateZNode.path(tp) for tp in tps}
        got = self.get_many(paths.values())
        out = {}
        for tp, path in paths.items():
            node = got[path]
            if node is not None:
                out[tp] = TopicPartitionStateZNode.decode(node[0], node[1].version)
        return out

    def create_isr_change_notification(self, partitions: Iterable[TopicPartition]) -> str:
        """One persistent sequential /isr_change_notification/isr_change_<seq> (reference §3.2)."""
        return self.create(
            IsrChangeNotificationSequenceZNode.path_prefix,
            IsrChangeNotificationSequenceZNode.encode(sorted(partitions)),
            sequential=True,
        )

    # ---- the controller's fenced writes (reference §1.1, §5.1) -------------------------------

    def _fenced_many(
        self, epoch_zk_version: int, add_ops: list[Callable[[Any], None]]
    ) -> list[ZkError | None]:
        """Every op under the fence (a check of /controller_epoch at our version), pipelined:
        None where it succeeded, the op's error otherwise; ControllerMoved if a check failed.

        Kafka sends one multi {check, op} per partition (reference §5.1, §5.5). Here up to
        FENCED_OPS_PER_MULTI ops share one multi after its check: each op is still conditional
        on its own zkVersion, and one that fails (BADVERSION, NONODE, NODEEXISTS) rolls back its
        batch-mates, which are sent again, so every op ends as it would alone. What differs is
        the cost: kazoo spends ~0.4 ms of Python per request, which made a failover's 3,334
        leader writes take ~1.5 s in requests of one partition and ~0.1 s in multis of 50."""

        def start(ops: list[int]) -> Any:
            tx = self._client.transaction()
            tx.check(ControllerEpochZNode.path, epoch_zk_version)
            for i in ops:
                add_ops[i](tx)
            return tx.commit_async()

        errors: list[ZkError | None] = [None] * len(add_ops)
        todo = list(range(len(add_ops)))
        size = FENCED_OPS_PER_MULTI
        while todo:
            batches = [todo[i : i + size] for i in range(0, len(todo), size)]
            size = max(1, size // 2)  # many failures in a batch settle in a few rounds
            todo = []
            outcomes = self._pipelined(functools.partial(start, b) for b in batches)
            for batch, outcome in zip(batches, outcomes, strict=True):
                if isinstance(outcome, Exception):
                    raise mapped_error(outcome) from outcome
                check = outcome[0]
                if isinstance(check, Exception) and not isinstance(check, _ROLLED_BACK):
                    raise ControllerMoved(
                        f"/controller_epoch is no longer at version {epoch_zk_version}"
                    )
                for i, result in zip(batch, outcome[1:], strict=True):
                    if isinstance(result, _ROLLED_BACK):
                        todo.append(i)  # a batch-mate failed: this op was not tried on its own
                    elif isinstance(result, Exception):
                        errors[i] = mapped_error(result)
        return errors

    def _create_parents(self, paths: list[str]) -> None:
        """Create each znode (no data) unless it exists, pipelined."""
        for outcome in self._pipelined(
            functools.partial(self._client.create_async, p, b"") for p in paths
        ):
            if isinstance(outcome, Exception) and not isinstance(outcome, kz_exc.NodeExistsError):
                raise mapped_error(outcome) from outcome

    def create_partition_states_fenced(
        self, epoch_zk_version: int, states: Mapping[TopicPartition, LeaderAndIsr]
    ) -> dict[TopicPartition, int | None]:
        """Create new partitions' state znodes (§1.5), pipelined, as Kafka's
        createTopicPartitionStatesRaw does: per partition its zkVersion (0), or None if it
        exists already. Parents are created first with no data, as Kafka does."""
        tps = list(states)
        self.ensure_paths(TopicPartitionsZNode.path(t) for t in sorted({tp.topic for tp in tps}))
        self._create_parents([TopicPartitionZNode.path(tp) for tp in tps])

        def create(tp: TopicPartition) -> Callable[[Any], None]:
            path = TopicPartitionStateZNode.path(tp)
            data = TopicPartitionStateZNode.encode(states[tp])
            return lambda tx: tx.create(path, data)

        out: dict[TopicPartition, int | None] = {}
        errors = self._fenced_many(epoch_zk_version, [create(tp) for tp in tps])
        for tp, error in zip(tps, errors, strict=True):
            if error is not None and not isinstance(error, ZkNodeExists):
                raise error
            out[tp] = 0 if error is None else None
        return out

    def set_partition_states_fenced(
        self,
        epoch_zk_version: int,
        writes: Iterable[tuple[TopicPartition, LeaderAndIsr, int]],
    ) -> dict[TopicPartition, int | None]:
        """The controller's conditional updates of state znodes, each (partition, new state,
        expected zkVersion), pipelined (Kafka's updateLeaderAndIsr): per partition the new
        zkVersion, or None on BADVERSION/NONODE (the caller re-reads and retries, §5.5)."""
        todo = list(writes)

        def set_data(tp: TopicPartition, state: LeaderAndIsr, expected: int) -> Any:
            path = TopicPartitionStateZNode.path(tp)
            data = TopicPartitionStateZNode.encode(state)
            return lambda tx: tx.set_data(path, data, version=expected)

        out: dict[TopicPartition, int | None] = {}
        errors = self._fenced_many(epoch_zk_version, [set_data(*w) for w in todo])
        for (tp, _state, expected), error in zip(todo, errors, strict=True):
            if error is not None and not isinstance(error, ZkBadVersion | ZkNoNode):
                raise error
            out[tp] = expected + 1 if error is None else None
        return out

    def set_fenced(self, epoch_zk_version: int, path: str, data: bytes) -> None:
        """Set a znode's data (any version) under the fence, as Kafka's setTopicAssignmentRaw;
        ZkNoNode if it does not exist."""
        error = self._fenced_many(epoch_zk_version, [lambda tx: tx.set_data(path, data)])[0]
        if error is not None:
            raise error

    def delete_recursive_fenced(self, epoch_zk_version: int, root: str) -> bool:
        """Delete a znode and everything under it, children first, each delete under the fence
        (Kafka's deleteRecursive with the controller's epoch zkVersion); False if it was gone."""
        paths: list[str] = []
        stack = [root]
        while stack:
            path = stack.pop()
            paths.append(path)
            with contextlib.suppress(ZkNoNode):
                stack.extend(f"{path}/{child}" for child in self.children(path))
        if not paths:
            return False
        return self.delete_many_fenced(epoch_zk_version, list(reversed(paths)))[-1]

    def delete_fenced(self, epoch_zk_version: int, path: str) -> bool:
        """Delete a znode (any version) under the fence; False if it was already gone."""
        return self.delete_many_fenced(epoch_zk_version, [path])[0]

    def delete_many_fenced(self, epoch_zk_version: int, paths: list[str]) -> list[bool]:
        """`delete_fenced` for each path, pipelined."""

        def delete(path: str) -> Callable[[Any], None]:
            return lambda tx: tx.delete(path)

        out = []
        for error in self._fenced_many(epoch_zk_version, [delete(p) for p in paths]):
            if error is not None and not isinstance(error, ZkNoNode):
                raise error
            out.append(error is None)
        return out


# Re-exported: callers import the session and its vocabulary from here.
__all__ = [
    "BrokerIdAlreadyRegistered",
    "ControllerMoved",
    "SessionState",
    "Stat",
    "ZkConnectionError",
    "ZkError",
    "ZkNoNode",
    "ZkNodeExists",
    "ZkStore",
]
