"""Blocking ZooKeeper reads that build the controller's view (run in a thread by the shell)."""

from __future__ import annotations

import logging

from controller.logic.context import BrokerInfo
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


def read_topic(
    store: ZkStore, topic: str
) -> tuple[dict[TopicPartition, tuple[int, ...]], dict[str, str]]:
    """A topic's assignment and its /config/topics overrides."""
    got = store.get_or_none(TopicZNode.path(topic))
    if got is None:
        return {}, {}
    assignment = TopicZNode.decode(topic, got[0])
    parts = {TopicPartition(topic, p): r for p, r in assignment.partitions.items()}
    config_got = store.get_or_none(ConfigEntityZNode.path("topics", topic))
    config = ConfigEntityZNode.decode(config_got[0]) if config_got and config_got[0] else {}
    return parts, config


def read_states(store: ZkStore, tps: list[TopicPartition]) -> dict[TopicPartition, LeaderAndIsr]:
    """The state znodes of `tps` that exist (one pipelined batch of reads)."""
    return store.read_partition_states(tps)


def _children(store: ZkStore, path: str) -> list[str]:
    try:
        return store.children(path)
    except ZkNoNode:
        return []
