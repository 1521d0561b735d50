"""Every znode minibroker reads or writes: its path, and Kafka's exact JSON (reference §1).

One class per znode, as Kafka's ZkData.scala. Encoders emit Kafka 2.6's bytes (compact JSON,
the Scala 2.13 build's key order where the reference gives it); decoders look keys up by name,
so either Scala build's order — or any other — decodes (reference §1.1, pitfall 28).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from minibroker.core.types import LeaderAndIsr, TopicPartition


class ZNodeFormatError(ValueError):
    """A znode's bytes are not what Kafka writes there."""


def _dumps(obj: object) -> bytes:
    # Jackson's writeValueAsBytes: compact, UTF-8, no escaping of non-ASCII.
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _loads(data: bytes | None, what: str) -> dict[str, Any]:
    if not data:
        raise ZNodeFormatError(f"{what}: empty znode")
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ZNodeFormatError(f"{what}: not JSON: {data[:80]!r}") from exc
    if not isinstance(obj, dict):
        raise ZNodeFormatError(f"{what}: expected a JSON object, got {type(obj).__name__}")
    return obj


def _int(obj: Mapping[str, Any], key: str, what: str) -> int:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ZNodeFormatError(f"{what}: field {key!r} must be an integer, got {value!r}")
    return value


def _int_list(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise ZNodeFormatError(f"{what}: expected a list of integers, got {value!r}")
    return tuple(value)


def _timestamp(obj: Mapping[str, Any], what: str) -> int:
    # Kafka writes timestamps as JSON strings of epoch milliseconds (reference §1.1).
    raw = obj.get("timestamp")
    try:
        return int(raw) if raw is not None else -1
    except (TypeError, ValueError) as exc:
        raise ZNodeFormatError(f"{what}: bad timestamp {raw!r}") from exc


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
        return _dumps(obj)

    @staticmethod
    def decode(broker_id: int, data: bytes | None) -> BrokerRegistration:
        what = f"/brokers/ids/{broker_id}"
        obj = _loads(data, what)
        version = _int(obj, "version", what)
        if version >= 2:
            endpoints = obj.get("endpoints")
            if not isinstance(endpoints, list) or not all(isinstance(e, str) for e in endpoints):
                raise ZNodeFormatError(f"{what}: 'endpoints' must be a list of strings")
            proto_map = obj.get("listener_security_protocol_map") or {
                ep.partition("://")[0]: ep.partition("://")[0] for ep in endpoints
            }
        else:
            endpoints = [f"PLAINTEXT://{obj.get('host')}:{_int(obj, 'port', what)}"]
            proto_map = {"PLAINTEXT": "PLAINTEXT"}
        return BrokerRegistration(
            broker_id=broker_id,
            endpoints=tuple(endpoints),
            listener_security_protocol_map=dict(proto_map),
            jmx_port=int(obj.get("jmx_port", -1)),
            timestamp_ms=_timestamp(obj, what),
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

        return _dumps(
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
        obj = _loads(data, what)

        def parse(key: str) -> dict[int, tuple[int, ...]]:
            raw = obj.get(key) or {}
            if not isinstance(raw, dict):
                raise ZNodeFormatError(f"{what}: {key!r} must be an object")
            try:
                return {int(p): _int_list(r, what) for p, r in raw.items()}
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
        return _dumps(
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
        obj = _loads(data, what)
        return LeaderAndIsr(
            leader=_int(obj, "leader", what),
            leader_epoch=_int(obj, "leader_epoch", what),
            isr=_int_list(obj.get("isr"), what),
            controller_epoch=_int(obj, "controller_epoch", what),
            zk_version=zk_version,
        )


# ---- /controller and /controller_epoch (reference §1.6, §1.7) ---------------------------------


class ControllerZNode:
    path = "/controller"

    @staticmethod
    def encode(controller_id: int, timestamp_ms: int) -> bytes:
        return _dumps({"version": 1, "brokerid": controller_id, "timestamp": str(timestamp_ms)})

    @staticmethod
    def decode(data: bytes | None) -> int:
        """The active controller's id; Kafka's decoder reads only `brokerid`."""
        return _int(_loads(data, "/controller"), "brokerid", "/controller")


class ControllerEpochZNode:
    path = "/controller_epoch"

    @staticmethod
    def encode(epoch: int) -> bytes:
        # A bare ASCII integer, no JSON, no newline.
        return str(epoch).encode("ascii")

    @staticmethod
    def decode(data: bytes | None) -> int:
        text = (data or b"").decode("ascii", errors="replace")
        if not re.fullmatch(r"-?\d+", text):
            raise ZNodeFormatError(f"/controller_epoch: expected a bare integer, got {data!r}")
        return int(text)


# ---- sequential notifications (reference §1.8, §1.9, §1.11) -----------------------------------


def sequence_number(child_name: str, prefix: str) -> int:
    """The 10-digit sequence ZooKeeper appended to a sequential child name."""
    if not child_name.startswith(prefix) or not child_name[len(prefix) :].isdigit():
        raise ZNodeFormatError(f"{child_name!r} is not a {prefix}<seq> node")
    return int(child_name[len(prefix) :])


def _partition_list(partitions: Iterable[TopicPartition]) -> list[dict[str, Any]]:
    return [{"topic": tp.topic, "partition": tp.partition} for tp in partitions]


def _decode_partition_list(obj: Mapping[str, Any], what: str) -> tuple[TopicPartition, ...]:
    raw = obj.get("partitions")
    if not isinstance(raw, list):
        raise ZNodeFormatError(f"{what}: 'partitions' must be a list")
    out = []
    for entry in raw:
        if not isinstance(entry, dict) or not isinstance(entry.get("topic"), str):
            raise ZNodeFormatError(f"{what}: bad partition entry {entry!r}")
        out.append(TopicPartition(entry["topic"], _int(entry, "partition", what)))
    return tuple(out)


class IsrChangeNotificationZNode:
    path = "/isr_change_notification"


class IsrChangeNotificationSequenceZNode:
    prefix = "isr_change_"
    path_prefix = f"{IsrChangeNotificationZNode.path}/{prefix}"

    @staticmethod
    def path(seq_child: str) -> str:
        return f"{IsrChangeNotificationZNode.path}/{seq_child}"

    @staticmethod
    def encode(partitions: Iterable[TopicPartition]) -> bytes:
        return _dumps({"version": 1, "partitions": _partition_list(partitions)})

    @staticmethod
    def decode(data: bytes | None) -> tuple[TopicPartition, ...]:
        return _decode_partition_list(_loads(data, "isr_change"), "isr_change")

    @staticmethod
    def sequence(child_name: str) -> int:
        return sequence_number(child_name, IsrChangeNotificationSequenceZNode.prefix)


class LogDirEventNotificationZNode:
    path = "/log_dir_event_notification"


class LogDirEventNotificationSequenceZNode:
    prefix = "log_dir_event_"
    path_prefix = f"{LogDirEventNotificationZNode.path}/{prefix}"
    LOG_DIR_FAILURE = 1

    @staticmethod
    def encode(broker_id: int, event: int = 1) -> bytes:
        return _dumps({"version": 1, "broker": broker_id, "event": event})

    @staticmethod
    def decode(data: bytes | None) -> tuple[int, int]:
        """(broker id, event type)."""
        obj = _loads(data, "log_dir_event")
        return _int(obj, "broker", "log_dir_event"), _int(obj, "event", "log_dir_event")


# ---- /admin (reference §1.10) -----------------------------------------------------------------


class DeleteTopicsZNode:
    path = "/admin/delete_topics"


class DeleteTopicsTopicZNode:
    """Existence means "marked for deletion"; the znode has null data."""

    @staticmethod
    def path(topic: str) -> str:
        return f"{DeleteTopicsZNode.path}/{topic}"


class ReassignPartitionsZNode:
    path = "/admin/reassign_partitions"

    @staticmethod
    def encode(reassignment: Mapping[TopicPartition, Sequence[int]]) -> bytes:
        parts = [
            {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas)}
            for tp, replicas in reassignment.items()
        ]
        return _dumps({"version": 1, "partitions": parts})

    @staticmethod
    def decode(data: bytes | None) -> dict[TopicPartition, tuple[int, ...]]:
        what = ReassignPartitionsZNode.path
        obj = _loads(data, what)
        out: dict[TopicPartition, tuple[int, ...]] = {}
        for entry in obj.get("partitions") or []:
            tp = TopicPartition(str(entry["topic"]), _int(entry, "partition", what))
            out[tp] = _int_list(entry.get("replicas"), what)
        return out


class PreferredReplicaElectionZNode:
    path = "/admin/preferred_replica_election"

    @staticmethod
    def encode(partitions: Iterable[TopicPartition]) -> bytes:
        return _dumps({"version": 1, "partitions": _partition_list(partitions)})

    @staticmethod
    def decode(data: bytes | None) -> tuple[TopicPartition, ...]:
        what = PreferredReplicaElectionZNode.path
        return _decode_partition_list(_loads(data, what), what)


# ---- /config (reference §1.11) ----------------------------------------------------------------


class ConfigEntityZNode:
    """/config/<type>/<name>: overrides as string values, e.g. min.insync.replicas."""

    @staticmethod
    def path(entity_type: str, name: str) -> str:
        return f"/config/{entity_type}/{name}"

    @staticmethod
    def encode(config: Mapping[str, str]) -> bytes:
        return _dumps({"version": 1, "config": {k: str(v) for k, v in config.items()}})

    @staticmethod
    def decode(data: bytes | None) -> dict[str, str]:
        obj = _loads(data, "config entity")
        raw = obj.get("config") or {}
        if not isinstance(raw, dict):
            raise ZNodeFormatError("config entity: 'config' must be an object")
        return {str(k): str(v) for k, v in raw.items()}


class ConfigEntityChangeNotificationZNode:
    path = "/config/changes"


class ConfigEntityChangeNotificationSequenceZNode:
    prefix = "config_change_"
    path_prefix = f"{ConfigEntityChangeNotificationZNode.path}/{prefix}"

    @staticmethod
    def encode(entity_path: str) -> bytes:
        return _dumps({"version": 2, "entity_path": entity_path})

    @staticmethod
    def decode(data: bytes | None) -> str:
        obj = _loads(data, "config_change")
        entity_path = obj.get("entity_path")
        if not isinstance(entity_path, str):
            raise ZNodeFormatError("config_change: 'entity_path' must be a string")
        return entity_path


# ---- /cluster/id (reference §1.11) ------------------------------------------------------------


class ClusterIdZNode:
    path = "/cluster/id"

    @staticmethod
    def encode(cluster_id: str) -> bytes:
        # "version" is a string here, unlike every other znode (pitfall 29).
        return _dumps({"version": "1", "id": cluster_id})

    @staticmethod
    def decode(data: bytes | None) -> str:
        obj = _loads(data, ClusterIdZNode.path)
        cid = obj.get("id")
        if not isinstance(cid, str):
            raise ZNodeFormatError("/cluster/id: 'id' must be a string")
        return cid


# ---- minibroker's own znodes (not Kafka's) ------------------------------------------------------


class ControllerEndpointZNode:
    """/minibroker/controllers/<id>: where a controller process serves gRPC. Kafka's controller
    is a broker and is found through its broker registration; ours is a separate process, so
    each controller registers its advertised endpoints here (ephemeral), "NAME://host:port" as
    in a broker registration; brokers use them for ControlledShutdown, tools for events."""

    root = "/minibroker/controllers"

    @staticmethod
    def path(controller_id: int) -> str:
        return f"{ControllerEndpointZNode.root}/{controller_id}"

    @staticmethod
    def encode(endpoints: Sequence[str]) -> bytes:
        return _dumps({"version": 2, "endpoints": list(endpoints)})

    @staticmethod
    def decode(data: bytes | None) -> tuple[str, ...]:
        """The endpoint strings; version 1 ({"host", "port"}) reads as one PLAINTEXT endpoint."""
        obj = _loads(data, "controller endpoint")
        if "endpoints" not in obj:
            host = obj.get("host")
            if not isinstance(host, str):
                raise ZNodeFormatError("controller endpoint: 'host' must be a string")
            return (f"PLAINTEXT://{host}:{_int(obj, 'port', 'controller endpoint')}",)
        eps = obj["endpoints"]
        if not isinstance(eps, list) or not eps or not all(isinstance(e, str) for e in eps):
            raise ZNodeFormatError("controller endpoint: 'endpoints' must be a list of strings")
        for e in eps:
            parse_endpoint(e)
        return tuple(eps)


def describe(data: bytes | None) -> str:
    """A human-readable rendering of a znode's data for `minibroker zk tree`."""
    if data is None or data == b"":
        return ""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.hex()
