"""Blocking ZooKeeper reads that build the controller's view (run in a thread by the shell)."""

from __future__ import annotations

import logging

from controller.logic.context import BrokerInfo
from controller.logic.reassignment import ReplicaAssignment
from minibroker.core.listeners import from_strings, pick
from minibroker.core.types import LeaderAndIsr, TopicPartition
from minibroker.core.zk_layout import (
    BrokerIdsZNode,
    BrokerIdZNode,
    ConfigEntityZNode,
    TopicsZNode,
    TopicZNode,
)
from minibroker.runtime import logging as slog
from minibroker.runtime.zk_store import ZkNoNode, ZkStore


def read_brokers(store: ZkStore, listener: str = "") -> dict[int, BrokerInfo]:
    """Every registered broker with its epoch (czxid), the endpoint the controller reaches it on
    (`inter.broker.listener.name`; none given: PLAINTEXT or the first) and all its endpoints."""
    out = {}
    for child in _children(store, BrokerIdsZNode.path):
        got = store.get_or_none(BrokerIdZNode.path(int(child)))
        if got is None:
            continue
        reg = BrokerIdZNode.decode(int(child), got[0])
        endpoints = from_strings(reg.endpoints)
        endpoint = pick(endpoints, listener)
        if endpoint is None:
            slog.event(
                "broker_listener_missing",
                logging.WARNING,
                broker=int(child),
                listener=listener,
                endpoints=list(reg.endpoints),
            )
            continue
        out[int(child)] = BrokerInfo(
            int(child), got[1].czxid, endpoint.host, endpoint.port, reg.rack, endpoints
        )
    return out


def read_topics(store: ZkStore) -> list[str]:
    return sorted(_children(store, TopicsZNode.path))


def read_assignment(store: ZkStore, topic: str) -> dict[TopicPartition, ReplicaAssignment]:
    """A topic's full assignment (Kafka's getFullReplicaAssignmentForTopics): each partition's
    replicas with the adding and removing ones of a reassignment; empty if the topic is gone."""
    got = store.get_or_none(TopicZNode.path(topic))
    if got is None:
        return {}
    assignment = TopicZNode.decode(topic, got[0])
    return {
        TopicPartition(topic, p): ReplicaAssignment(
            r,
            assignment.adding_replicas.get(p, ()),
            assignment.removing_replicas.get(p, ()),
        )
        for p, r in assignment.partitions.items()
    }


def read_topic(
    store: ZkStore, topic: str
) -> tuple[dict[TopicPartition, ReplicaAssignment], dict[str, str]]:
    """A topic's full assignment and its /config/topics overrides."""
    parts = read_assignment(store, topic)
    if not parts:
        return {}, {}
    config_got = store.get_or_none(ConfigEntityZNode.path("topics", topic))
    config = ConfigEntityZNode.decode(config_got[0]) if config_got and config_got[0] else {}
    return parts, config


def read_topic_configs(store: ZkStore, topics: list[str]) -> dict[str, dict[str, str]]:
    """The /config/topics overrides of `topics` (one pipelined batch of reads)."""
    paths = {ConfigEntityZNode.path("topics", t): t for t in topics}
    got = store.get_many(paths)
    out = {}
    for path, topic in paths.items():
        found = got.get(path)
        out[topic] = ConfigEntityZNode.decode(found[0]) if found and found[0] else {}
    return out


def read_states(store: ZkStore, tps: list[TopicPartition]) -> dict[TopicPartition, LeaderAndIsr]:
    """The state znodes of `tps` that exist (one pipelined batch of reads)."""
    return store.read_partition_states(tps)


def _children(store: ZkStore, path: str) -> list[str]:
    try:
        return store.children(path)
    except ZkNoNode:
        return []
