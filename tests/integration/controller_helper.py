"""Test-only admin and controller moves: creates topics the way an admin tool does (the real
controller then initialises them), and can force a leader change or resend requests the way
Kafka's controller would (reference §1.5, §5.9), for tests that need exact control."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import grpc

from minibroker.core.errors import ErrorCode
from minibroker.core.types import LeaderAndIsr, TopicPartition
from minibroker.core.zk_layout import (
    BrokerIdsZNode,
    BrokerIdZNode,
    ConfigEntityZNode,
    TopicAssignment,
    TopicPartitionStateZNode,
    TopicZNode,
)
from minibroker.rpc import control_pb2, control_pb2_grpc
from minibroker.runtime.waiting import wait_until
from minibroker.runtime.zk_store import ZkStore

CONTROLLER_ID = 9999


class FakeController:
    def __init__(self, zk: ZkStore) -> None:
        self.zk = zk
        self.assignments: dict[TopicPartition, tuple[int, ...]] = {}

    @property
    def epoch(self) -> int:
        current = self.zk.read_controller_epoch()
        return current[0] if current else 0

    def live_brokers(self) -> dict[int, tuple[str, int, int]]:
        """id -> (host, port, broker epoch) of every registered broker."""
        out = {}
        for child in self.zk.children(BrokerIdsZNode.path):
            got = self.zk.get_or_none(BrokerIdZNode.path(int(child)))
            if got is None:
                continue
            reg = BrokerIdZNode.decode(int(child), got[0])
            endpoint = reg.endpoint()
            assert endpoint is not None
            out[int(child)] = (endpoint[0], endpoint[1], got[1].czxid)
        return out

    def create_topic(
        self,
        topic: str,
        assignment: Mapping[int, Iterable[int]],
        config: Mapping[str, str] | None = None,
    ) -> None:
        """Write the topic's config and assignment as an admin tool does, then wait until the
        controller created every partition's state (reference §1.5) and the leaders know."""
        parts = {p: tuple(r) for p, r in assignment.items()}
        if config:
            self.zk.create(
                ConfigEntityZNode.path("topics", topic),
                ConfigEntityZNode.encode(config),
                makepath=True,
            )
        self.zk.create(
            TopicZNode.path(topic), TopicZNode.encode(TopicAssignment(parts)), makepath=True
        )
        tps = [TopicPartition(topic, p) for p in parts]
        for tp in tps:
            self.assignments[tp] = parts[tp.partition]
        wait_until(
            lambda: all(self.zk.read_partition_state(tp) is not None for tp in tps),
            timeout_s=20,
            what=f"the controller to create {topic}'s partition states",
        )
        # The controller sends LeaderAndIsr asynchronously; resending it is harmless (equal
        # epochs are ignored) and makes the topic usable as soon as this returns.
        self.send_update_metadata()
        self.send_leader_and_isr(tps)

    def state(self, tp: TopicPartition) -> LeaderAndIsr:
        got = self.zk.read_partition_state(tp)
        assert got is not None, f"no state for {tp}"
        return got

    def elect(self, tp: TopicPartition, leader: int, isr: Iterable[int]) -> LeaderAndIsr:
        """A controller decision: new leader and ISR with the epoch bumped, written with the
        znode's zkVersion, then sent."""
        old = self.state(tp)
        new = LeaderAndIsr(leader, old.leader_epoch + 1, tuple(isr), self.epoch)
        self.zk.set(
            TopicPartitionStateZNode.path(tp), TopicPartitionStateZNode.encode(new), old.zk_version
        )
        self.send_update_metadata()
        self.send_leader_and_isr([tp])
        return self.state(tp)

    def _stub(self, host: str, port: int) -> tuple[grpc.Channel, control_pb2_grpc.ControlStub]:
        channel = grpc.insecure_channel(f"{host}:{port}")
        return channel, control_pb2_grpc.ControlStub(channel)

    def send_update_metadata(self, to: Iterable[int] | None = None) -> None:
        live = self.live_brokers()
        request = control_pb2.UpdateMetadataRequest(
            controller_id=CONTROLLER_ID, controller_epoch=self.epoch
        )
        for b, (host, port, _) in sorted(live.items()):
            request.live_brokers.add(id=b).endpoints.add(
                host=host, port=port, listener="PLAINTEXT", security_protocol=0
            )
        by_topic: dict[str, control_pb2.UpdateMetadataTopicState] = {}
        for tp, replicas in sorted(self.assignments.items()):
            s = self.state(tp)
            t = by_topic.get(tp.topic) or request.topic_states.add(topic_name=tp.topic)
            by_topic[tp.topic] = t
            t.partition_states.add(
                partition_index=tp.partition,
                controller_epoch=s.controller_epoch,
                leader=s.leader,
                leader_epoch=s.leader_epoch,
                isr=s.isr,
                zk_version=s.zk_version,
                replicas=replicas,
                offline_replicas=[r for r in replicas if r not in live],
            )
        for b in sorted(to if to is not None else live):
            host, port, broker_epoch = live[b]
            request.broker_epoch = broker_epoch
            channel, stub = self._stub(host, port)
            with channel:
                response = stub.UpdateMetadata(request, timeout=10)
            assert response.error_code == ErrorCode.NONE, response

    def send_leader_and_isr(
        self, tps: Iterable[TopicPartition], to: Iterable[int] | None = None
    ) -> None:
        live = self.live_brokers()
        tps = list(tps)
        targets = set(to) if to is not None else {b for tp in tps for b in self.assignments[tp]}
        for b in sorted(targets & set(live)):
            host, port, broker_epoch = live[b]
            request = control_pb2.LeaderAndIsrRequest(
                controller_id=CONTROLLER_ID, controller_epoch=self.epoch, broker_epoch=broker_epoch
            )
            for tp in tps:
                if b not in self.assignments[tp]:
                    continue
                s = self.state(tp)
                request.topic_states.add(topic_name=tp.topic).partition_states.add(
                    partition_index=tp.partition,
                    controller_epoch=s.controller_epoch,
                    leader=s.leader,
                    leader_epoch=s.leader_epoch,
                    isr=s.isr,
                    zk_version=s.zk_version,
                    replicas=self.assignments[tp],
                )
            channel, stub = self._stub(host, port)
            with channel:
                response = stub.LeaderAndIsr(request, timeout=10)
            assert response.error_code == ErrorCode.NONE, response
