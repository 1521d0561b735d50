"""Every znode minibroker reads or writes: its path, and Kafka's exact JSON (reference §1).

One class per znode, as Kafka's ZkData.scala. Encoders emit Kafka 2.6's bytes (compact JSON,
the Scala 2.13 build's key order where the reference gives it); decoders look keys up by name,
so either Scala build's order — or any other — decodes (reference §1.1, pitfall 28).
"""

from __future__ import annotations

from minibroker.core.zk_layout.admin_config import (
    ClusterIdZNode,
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityChangeNotificationZNode,
    ConfigEntityZNode,
    DeleteTopicsTopicZNode,
    DeleteTopicsZNode,
    PreferredReplicaElectionZNode,
    ReassignPartitionsZNode,
)
from minibroker.core.zk_layout.brokers import (
    CONFIG_TYPES,
    PERSISTENT_PATHS,
    BrokerIdsZNode,
    BrokerIdZNode,
    BrokerRegistration,
    BrokerSequenceIdZNode,
    TopicAssignment,
    TopicPartitionStateZNode,
    TopicPartitionsZNode,
    TopicPartitionZNode,
    TopicsZNode,
    TopicZNode,
    parse_endpoint,
)
from minibroker.core.zk_layout.consumers import ConsumerOffsetZNode, valid_group_id
from minibroker.core.zk_layout.controller import (
    ControllerEndpointZNode,
    ControllerEpochZNode,
    ControllerZNode,
)
from minibroker.core.zk_layout.json_codec import ZNodeFormatError, describe
from minibroker.core.zk_layout.notifications import (
    IsrChangeNotificationSequenceZNode,
    IsrChangeNotificationZNode,
    LogDirEventNotificationSequenceZNode,
    LogDirEventNotificationZNode,
    sequence_number,
)
from minibroker.core.zk_layout.producer_ids import (
    PRODUCER_ID_BLOCK_SIZE,
    ProducerIdBlock,
    ProducerIdBlockZNode,
    next_block,
)

__all__ = [
    "ConsumerOffsetZNode",
    "valid_group_id",
    "PRODUCER_ID_BLOCK_SIZE",
    "ProducerIdBlock",
    "ProducerIdBlockZNode",
    "next_block",
    "BrokerIdZNode",
    "BrokerIdsZNode",
    "BrokerRegistration",
    "BrokerSequenceIdZNode",
    "CONFIG_TYPES",
    "ClusterIdZNode",
    "ConfigEntityChangeNotificationSequenceZNode",
    "ConfigEntityChangeNotificationZNode",
    "ConfigEntityZNode",
    "ControllerEndpointZNode",
    "ControllerEpochZNode",
    "ControllerZNode",
    "DeleteTopicsTopicZNode",
    "DeleteTopicsZNode",
    "IsrChangeNotificationSequenceZNode",
    "IsrChangeNotificationZNode",
    "LogDirEventNotificationSequenceZNode",
    "LogDirEventNotificationZNode",
    "PERSISTENT_PATHS",
    "PreferredReplicaElectionZNode",
    "ReassignPartitionsZNode",
    "TopicAssignment",
    "TopicPartitionStateZNode",
    "TopicPartitionZNode",
    "TopicPartitionsZNode",
    "TopicZNode",
    "TopicsZNode",
    "ZNodeFormatError",
    "describe",
    "parse_endpoint",
    "sequence_number",
]
