"""Configs that change while the broker runs (Kafka's DynamicConfigManager with its
ZkNodeChangeNotificationListener, `kafka/server/DynamicConfigManager.scala`).

At start the broker reads `/config/brokers/<default>` and `/config/brokers/<id>`. Then every
`/config/changes/config_change_<seq>` notification is handled once, in sequence order: its
`entity_path` (`topics/<t>`, `brokers/<id>`, `brokers/<default>`) names the entity whose config
is read again and applied to the hosted partitions (min.insync.replicas takes effect on the next
produce; segment.bytes and max.message.bytes on the next roll and append; the replication
throttles on the next fetch). The notifications are followed by broker/zk_notifications.py
(Kafka's listener, which also deletes those older than 15 minutes). Each change is a
`config_changed` event.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from broker.partition_opener import log_options
from broker.partition_table import PartitionTable
from broker.topic_configs import TopicConfigs
from broker.zk_notifications import ChangeNotificationListener
from minibroker.core.broker_config import DEFAULT_ENTITY
from minibroker.core.zk_layout import (
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityChangeNotificationZNode,
    ConfigEntityZNode,
    ZNodeFormatError,
)
from minibroker.runtime import logging as slog
from minibroker.runtime.settings import Settings
from minibroker.runtime.zk_store import ZkStore


class DynamicConfigManager:
    def __init__(
        self,
        store: ZkStore,
        settings: Settings,
        broker_id: int,
        partitions: PartitionTable,
        topic_configs: TopicConfigs,
        on_user_changed: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.broker_id = broker_id
        self.partitions = partitions
        self.topic_configs = topic_configs
        self.on_user_changed = on_user_changed
        self._changes = ChangeNotificationListener(
            store,
            [ConfigEntityChangeNotificationZNode.path],
            ConfigEntityChangeNotificationSequenceZNode.prefix,
            self._handle,
            "config_change_failed",
        )

    async def start(self) -> None:
        """Apply the dynamic broker configs in ZooKeeper now, then follow the notifications."""
        await self._reload_broker_configs(cause="startup")
        await self._changes.watch()
        self._changes.run()

    async def stop(self) -> None:
        await self._changes.stop()

    async def _handle(self, child: str, data: bytes | None) -> None:
        try:
            entity_path = ConfigEntityChangeNotificationSequenceZNode.decode(data)
        except ZNodeFormatError as exc:
            slog.event("config_change_ignored", logging.WARNING, node=child, error=str(exc))
            return
        entity_type, _, name = entity_path.partition("/")
        if entity_type == "topics" and name:
            await self._reload_topic(name, node=child)
        elif entity_type == "brokers" and name in (DEFAULT_ENTITY, str(self.broker_id)):
            await self._reload_broker_configs(cause=child)
        elif entity_type == "users" and name and self.on_user_changed is not None:
            await self.on_user_changed(name)  # SCRAM credentials (CredentialCache)
        # Other brokers' configs and clients (quotas) are not this broker's to apply.

    async def _reload_topic(self, topic: str, node: str) -> None:
        if not any(tp.topic == topic for tp in self.partitions):
            self.topic_configs.forget(topic)  # read afresh if a partition of it comes
            return
        overrides = await asyncio.to_thread(self._read, "topics", topic)
        changed = self.topic_configs.set(topic, overrides)
        self._apply(topic)
        slog.event(
            "config_changed",
            entity_type="topics",
            entity_name=topic,
            config=overrides,
            changed={k: list(v) for k, v in changed.items()},
            node=node,
        )

    async def _reload_broker_configs(self, cause: str) -> None:
        default = await asyncio.to_thread(self._read, "brokers", DEFAULT_ENTITY)
        own = await asyncio.to_thread(self._read, "brokers", str(self.broker_id))
        changed = self.settings.apply_dynamic(default, own)
        for topic in {tp.topic for tp in self.partitions}:
            self._apply(topic)
        if changed or cause != "startup":
            slog.event(
                "config_changed",
                entity_type="brokers",
                entity_name=str(self.broker_id),
                config={"<default>": default, str(self.broker_id): own},
                changed={k: list(v) for k, v in changed.items()},
                node=cause,
            )

    def _apply(self, topic: str) -> None:
        min_isr = self.topic_configs.min_insync_replicas(topic)
        options = log_options(self.topic_configs, topic)
        for tp, hosted in self.partitions.items():
            if tp.topic == topic:
                hosted.partition.min_insync_replicas = min_isr
                hosted.log.reconfigure(**options)

    def _read(self, entity_type: str, name: str) -> dict[str, str]:
        got = self.store.get_or_none(ConfigEntityZNode.path(entity_type, name))
        if got is None or not got[0]:
            return {}
        try:
            return ConfigEntityZNode.decode(got[0])
        except ZNodeFormatError as exc:
            slog.event(
                "config_change_ignored", logging.WARNING, entity=f"{entity_type}/{name}",
                error=str(exc),
            )  # fmt: skip
            return {}
