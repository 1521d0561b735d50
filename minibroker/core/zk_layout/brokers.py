"""The paths that must exist, and /brokers: registrations, topic assignments, partition states
(reference §1.2-§1.5)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from minibroker.core.types import LeaderAndIsr, TopicPartition
from minibroker.core.zk_layout.json_codec import (
    ZNodeFormatError,
    dumps,
    int_field,
    int_list,
    loads,
    timestamp_field,
)

# ---- paths that must exist (ZkData.PersistentZkPaths, reference §1.2) -------------------------

CONFIG_TYPES = ("topics", "clients", "users", "brokers")

PERSISTENT_PATHS: tuple[str, ...] = (
    "/consumers",
    "/brokers/ids",
    "/brokers/topics",
    "/config/changes",
    "/admin/delete_topics",
    "/brokers/seqid",
    "/isr_change_notification",
    "/latest_producer_id_block",
    "/log_dir_event_notification",
    *(f"/config/{t}" for t in CONFIG_TYPES),
)


# ---- /brokers/ids/<id> (reference §1.3) -------------------------------------------------------


def parse_endpoint(endpoint: str) -> tuple[str, str, int]:
    """("PLAINTEXT", host, port) from "PLAINTEXT://host:port" (IPv6 hosts may be bracketed)."""
    listener, sep, rest = endpoint.strip().partition("://")
    host, _, port = rest.rpartition(":")
    if not sep or not listener or not host or not port.isdigit():
        raise ZNodeFormatError(f"endpoint must look like LISTENER://host:port, got {endpoint!r}")
    return listener, host.strip("[]"), int(port)


@dataclass(frozen=True)
class BrokerRegistration:
    """A broker's registration JSON. `endpoints` are "<LISTENER>://<host>:<port>" strings."""

    broker_id: int
    endpoints: tuple[str, ...]
    listener_security_protocol_map: Mapping[str, str] = field(
        default_factory=lambda: {"PLAINTEXT": "PLAINTEXT"}
    )
    jmx_port: int = -1
    timestamp_ms: int = -1
    rack: str | None = None
    version: int = 4

    def endpoint(self, listener: str = "PLAINTEXT") -> tuple[str, int] | None:
        """(host, port) of the named listener's endpoint, if any."""
        for ep in self.endpoints:
            name, host, port = parse_endpoint(ep)
            if name == listener:
                return host, port
        return None


class BrokerIdsZNode:
    path = "/brokers/ids"


class BrokerIdZNode:
    @staticmethod
    def path(broker_id: int) -> str:
        return f"{BrokerIdsZNode.path}/{broker_id}"

    @staticmethod
    def encode(reg: BrokerRegistration) -> bytes:
        # host/port: the first PLAINTEXT endpoint for old clients, else null/-1 (reference §1.3).
        host: str | None = None
        port = -1
        for ep in reg.endpoints:
            listener, ep_host, ep_port = parse_endpoint(ep)
            if reg.listener_security_protocol_map.get(listener) == "PLAINTEXT":
                host, port = ep_host, ep_port
                break
        obj: dict[str, Any] = {
            "listener_security_protocol_map": dict(reg.listener_security_protocol_map),
            "endpoints": list(reg.endpoints),
        }
        if reg.rack is not None:
            obj["rack"] = reg.rack
        obj.update(
            {
                "jmx_port": reg.jmx_port,
                "port": port,
                "host": host,
                "version": reg.version,
                "timestamp": str(reg.timestamp_ms),
            }
        )
        return dumps(obj)

    @staticmethod
    def decode(broker_id: int, data: bytes | None) -> BrokerRegistration:
        what = f"/brokers/ids/{broker_id}"
        obj = loads(data, what)
        version = int_field(obj, "version", what)
        if version >= 2:
            endpoints = obj.get("endpoints")
            if not isinstance(endpoints, list) or not all(isinstance(e, str) for e in endpoints):
                raise ZNodeFormatError(f"{what}: 'endpoints' must be a list of strings")
            proto_map = obj.get("listener_security_protocol_map") or {
                ep.partition("://")[0]: ep.partition("://")[0] for ep in endpoints
            }
        else:
            endpoints = [f"PLAINTEXT://{obj.get('host')}:{int_field(obj, 'port', what)}"]
            proto_map = {"PLAINTEXT": "PLAINTEXT"}
        return BrokerRegistration(
            broker_id=broker_id,
            endpoints=tuple(endpoints),
            listener_security_protocol_map=dict(proto_map),
            jmx_port=int(obj.get("jmx_port", -1)),
            timestamp_ms=timestamp_field(obj, what),
            rack=obj.get("rack"),
            version=version,
        )


class BrokerSequenceIdZNode:
    path = "/brokers/seqid"


# ---- /brokers/topics/<topic> (reference §1.4) -------------------------------------------------


@dataclass(frozen=True)
class TopicAssignment:
    """Replica lists per partition, in assignment order (the first is the preferred leader)."""

    partitions: Mapping[int, tuple[int, ...]]
    adding_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)


class TopicsZNode:
    path = "/brokers/topics"


class TopicZNode:
    @staticmethod
    def path(topic: str) -> str:
        return f"{TopicsZNode.path}/{topic}"

    @staticmethod
    def encode(assignment: TopicAssignment) -> bytes:
        def by_partition(m: Mapping[int, Sequence[int]]) -> dict[str, list[int]]:
            # Kafka emits hash order for >= 5 partitions; any order decodes, we emit numeric.
            return {str(p): list(m[p]) for p in sorted(m)}

        return dumps(
            {
                "version": 2,
                "partitions": by_partition(assignment.partitions),
                "adding_replicas": by_partition(assignment.adding_replicas),
                "removing_replicas": by_partition(assignment.removing_replicas),
            }
        )

    @staticmethod
    def decode(topic: str, data: bytes | None) -> TopicAssignment:
        what = TopicZNode.path(topic)
        obj = loads(data, what)

        def parse(key: str) -> dict[int, tuple[int, ...]]:
            raw = obj.get(key) or {}
            if not isinstance(raw, dict):
                raise ZNodeFormatError(f"{what}: {key!r} must be an object")
            try:
                return {int(p): int_list(r, what) for p, r in raw.items()}
            except ValueError as exc:
                raise ZNodeFormatError(f"{what}: bad partition key in {key!r}") from exc

        # Version 1 (before 2.4) has only "partitions"; the other two default to empty.
        return TopicAssignment(
            partitions=parse("partitions"),
            adding_replicas=parse("adding_replicas"),
            removing_replicas=parse("removing_replicas"),
        )


class TopicPartitionsZNode:
    @staticmethod
    def path(topic: str) -> str:
        return f"{TopicZNode.path(topic)}/partitions"


class TopicPartitionZNode:
    @staticmethod
    def path(tp: TopicPartition) -> str:
        return f"{TopicPartitionsZNode.path(tp.topic)}/{tp.partition}"


# ---- /brokers/topics/<t>/partitions/<p>/state (reference §1.5) --------------------------------


class TopicPartitionStateZNode:
    @staticmethod
    def path(tp: TopicPartition) -> str:
        return f"{TopicPartitionZNode.path(tp)}/state"

    @staticmethod
    def encode(state: LeaderAndIsr) -> bytes:
        return dumps(
            {
                "controller_epoch": state.controller_epoch,
                "leader": state.leader,
                "version": 1,
                "leader_epoch": state.leader_epoch,
                "isr": list(state.isr),
            }
        )

    @staticmethod
    def decode(data: bytes | None, zk_version: int) -> LeaderAndIsr:
        """The state JSON with the znode's stat.version attached as `zk_version`."""
        what = "partition state"
        obj = loads(data, what)
        return LeaderAndIsr(
            leader=int_field(obj, "leader", what),
            leader_epoch=int_field(obj, "leader_epoch", what),
            isr=int_list(obj.get("isr"), what),
            controller_epoch=int_field(obj, "controller_epoch", what),
            zk_version=zk_version,
        )
