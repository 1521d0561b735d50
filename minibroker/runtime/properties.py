"""Every setting minibroker knows: Kafka's property names with Kafka 2.6's defaults (reference
§7.1), this project's own `minibroker.*` ones, and the timing profiles. Settings
(minibroker.runtime.settings) resolves them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_ZK_CONNECT = "127.0.0.1:2181"
LONG_MAX = 2**63 - 1


@dataclass(frozen=True)
class Property:
    name: str
    type: type
    default: Any
    doc: str
    sensitive: bool = False  # a secret: shown as [hidden], never sent in DescribeConfigs


# A log's append touches its active segment and index: a few more for recovery threads.
MIN_OPEN_FILES = 4

_P = Property
PROPERTIES: tuple[Property, ...] = (
    _P("broker.id", int, -1, "this broker's id (brokers only)"),
    _P("listeners", str, "PLAINTEXT://127.0.0.1:9092", "where the broker's gRPC server listens"),
    _P("advertised.listeners", str, "", "what the broker registers; empty = listeners"),
    _P(
        "listener.security.protocol.map",
        str,
        "PLAINTEXT:PLAINTEXT,KAFKA:PLAINTEXT",
        "listener name -> protocol: PLAINTEXT for gRPC; KAFKA* listeners also SSL, "
        "SASL_PLAINTEXT, SASL_SSL",
    ),
    _P(
        "inter.broker.listener.name",
        str,
        "",
        "the listener brokers and controllers use to reach brokers; empty = the first",
    ),
    _P("broker.rack", str, "", "rack written into the registration; empty = none"),
    # Security (ops reference §5). Kafka's default mechanism is GSSAPI, which minibroker lacks.
    _P(
        "sasl.enabled.mechanisms",
        str,
        "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
        "SASL mechanisms a SASL_* listener offers (PLAIN checks the SCRAM credential)",
    ),
    _P("ssl.keystore.location", str, "", "PEM file: this node's private key and certificate"),
    _P("ssl.truststore.location", str, "", "PEM file: the CA certificates peers are checked with"),
    _P("ssl.client.auth", str, "none", "client certificates on SSL listeners: none|requested|..."),
    _P(
        "delegation.token.master.key",
        str,
        "",
        "the key gRPC login tokens are signed with (the same on every broker); empty = no tokens",
        sensitive=True,
    ),
    _P("delegation.token.expiry.time.ms", int, 86_400_000, "how long a gRPC login token lasts"),
    _P(
        "ssl.principal.mapping.rules",
        str,
        "DEFAULT",
        "client certificate DN -> principal name, e.g. RULE:^CN=(.*?),.*$/$1/,DEFAULT",
    ),
    _P(
        "authorizer.class.name",
        str,
        "",
        "kafka.security.authorizer.AclAuthorizer turns ACLs on; empty = everyone may do anything",
    ),
    _P("super.users", str, "", "principals allowed everything, e.g. User:admin;User:CN=broker-1"),
    _P("allow.everyone.if.no.acl.found", bool, False, "a resource without ACLs is open to all"),
    _P("log.dirs", str, "/tmp/minibroker-logs", "the broker's log directory"),
    _P("zookeeper.connect", str, DEFAULT_ZK_CONNECT, "ZooKeeper connect string"),
    _P("zookeeper.session.timeout.ms", int, 18000, "ZooKeeper session timeout"),
    _P("zookeeper.connection.timeout.ms", int, 0, "wait for a connection; 0 = session timeout"),
    _P("zookeeper.max.in.flight.requests", int, 10, "pipelined ZooKeeper requests unanswered"),
    _P("zookeeper.set.acl", bool, False, "znodes creator-all + world-read (needs a ZK login)"),
    _P(
        "minibroker.zookeeper.jaas.file",
        str,
        "",
        "JAAS file whose Client section (DigestLoginModule) is this process's ZooKeeper login "
        "(Kafka: -Djava.security.auth.login.config)",
    ),
    _P("replica.lag.time.max.ms", int, 30000, "follower lag before it leaves the ISR"),
    _P("replica.fetch.wait.max.ms", int, 500, "follower fetch max wait"),
    _P("replica.fetch.min.bytes", int, 1, ""),
    _P("replica.fetch.max.bytes", int, 1048576, "per partition"),
    _P("replica.fetch.response.max.bytes", int, 10485760, ""),
    _P("replica.fetch.backoff.ms", int, 1000, "follower backoff after a fetch error"),
    _P("replica.socket.timeout.ms", int, 30000, ""),
    _P(
        "max.incremental.fetch.session.cache.slots",
        int,
        1000,
        "fetch sessions a leader keeps (KIP-227); 0 = every fetch names every partition",
    ),
    _P("num.replica.fetchers", int, 1, ""),
    _P("replica.high.watermark.checkpoint.interval.ms", int, 5000, ""),
    _P("min.insync.replicas", int, 1, "topic-overridable; counts the leader"),
    _P("unclean.leader.election.enable", bool, False, "topic-overridable"),
    _P("controller.socket.timeout.ms", int, 30000, ""),
    _P("default.replication.factor", int, 1, "replication factor of topics created without one"),
    _P("num.partitions", int, 1, "partitions of a topic created without a count"),
    _P("auto.create.topics.enable", bool, True, "a Metadata request creates unknown topics"),
    _P("message.max.bytes", int, 1048588, "largest record batch a broker accepts"),
    _P("fetch.max.bytes", int, 57671680, "most a broker returns for one fetch (KIP-541)"),
    _P("socket.request.max.bytes", int, 104857600, "largest request on a Kafka listener"),
    _P("group.min.session.timeout.ms", int, 6000, "shortest session a group member may ask"),
    _P("group.max.session.timeout.ms", int, 1800000, "longest session a group member may ask"),
    _P("group.initial.rebalance.delay.ms", int, 3000, "an empty group waits this for members"),
    # __consumer_offsets (Kafka's OffsetConfig and KafkaConfig defaults).
    _P("offsets.topic.num.partitions", int, 50, "partitions of __consumer_offsets"),
    _P(
        "offsets.topic.replication.factor", int, 3, "its replication factor (needs as many brokers)"
    ),
    _P("offsets.topic.segment.bytes", int, 104_857_600, "its segment size"),
    _P("offsets.retention.minutes", int, 10_080, "committed offsets kept after a group is empty"),
    _P("offsets.retention.check.interval.ms", int, 600_000, "how often offsets expire"),
    _P("offsets.commit.timeout.ms", int, 5000, "how long a commit waits for the ISR"),
    _P("offsets.commit.required.acks", int, -1, "acks of a commit's append"),
    _P("offsets.load.buffer.size", int, 5_242_880, "bytes read at a time loading a partition"),
    _P("offset.metadata.max.bytes", int, 4096, "longest metadata string of a committed offset"),
    # Transactions (Kafka's TransactionConfig and KafkaConfig defaults).
    _P("transaction.state.log.num.partitions", int, 50, "partitions of __transaction_state"),
    _P("transaction.state.log.replication.factor", int, 3, "its replication factor"),
    _P("transaction.state.log.min.isr", int, 2, "its min.insync.replicas"),
    _P("transaction.state.log.segment.bytes", int, 104_857_600, "its segment size"),
    _P("transaction.max.timeout.ms", int, 900_000, "longest transaction a producer may ask"),
    _P("transactional.id.expiration.ms", int, 604_800_000, "an idle transactional id expires"),
    _P(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        int,
        10_000,
        "how often transactions past their timeout are aborted",
    ),
    _P(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        int,
        3_600_000,
        "how often expired transactional ids are removed",
    ),
    _P("minibroker.txn.marker.retry.backoff.ms", int, 100, "between rounds of markers"),
    _P(
        "transaction.version",
        int,
        1,
        "2: KIP-890 part 2 (Kafka 4.0's feature level), the producer epoch bumped at the end "
        "of every transaction of a producer that asks (EndTxn v5); 1: Kafka 2.6",
    ),
    _P(
        "transaction.partition.verification.enable",
        bool,
        False,
        "KIP-890 part 1 (Kafka 3.6, not in 2.6): a leader asks the coordinator before a "
        "producer's first transactional batch",
    ),
    _P(
        "connections.max.idle.ms",
        int,
        600000,
        "a Kafka listener's connection idle this long closes",
    ),
    _P("log.segment.bytes", int, 1073741824, "segment size before a roll"),
    # The broker-level synonyms of the other topic configs (Kafka's TopicConfigSynonyms), with
    # Kafka 2.6's effective defaults: a topic without an override takes these, and each may be
    # changed at run time in /config/brokers (minibroker.core.broker_config). The README lists
    # those minibroker does not act on yet.
    _P("log.cleanup.policy", str, "delete", "topic default of cleanup.policy"),
    _P("compression.type", str, "producer", "topic default of compression.type"),
    _P("log.cleaner.delete.retention.ms", int, 86400000, "topic default of delete.retention.ms"),
    _P("log.segment.delete.delay.ms", int, 60000, "topic default of file.delete.delay.ms"),
    _P("log.flush.interval.messages", int, LONG_MAX, "topic default of flush.messages"),
    _P("log.flush.interval.ms", int, LONG_MAX, "topic default of flush.ms"),
    _P("log.index.interval.bytes", int, 4096, "topic default of index.interval.bytes"),
    _P("log.cleaner.enable", bool, True, "run the log cleaner on compacted topics"),
    _P("log.cleaner.backoff.ms", int, 15000, "the cleaner's sleep when no log needs cleaning"),
    _P(
        "log.cleaner.dedupe.buffer.size",
        int,
        134217728,
        "bounds the cleaner's key map: this many bytes / 24 keys, as Kafka counts",
    ),
    _P("log.cleaner.io.buffer.load.factor", float, 0.9, "how full the cleaner's key map gets"),
    _P("log.cleaner.threads", int, 1, "accepted; minibroker cleans one log at a time"),
    _P("log.cleaner.max.compaction.lag.ms", int, LONG_MAX, "topic max.compaction.lag.ms"),
    _P("log.cleaner.min.compaction.lag.ms", int, 0, "topic default of min.compaction.lag.ms"),
    _P("log.cleaner.min.cleanable.ratio", float, 0.5, "topic min.cleanable.dirty.ratio"),
    _P("log.message.downconversion.enable", bool, True, "topic message.downconversion.enable"),
    _P("log.message.format.version", str, "2.6-IV0", "topic default of message.format.version"),
    _P(
        "log.message.timestamp.difference.max.ms",
        int,
        LONG_MAX,
        "topic default of message.timestamp.difference.max.ms",
    ),
    _P("log.message.timestamp.type", str, "CreateTime", "topic message.timestamp.type"),
    _P("log.preallocate", bool, False, "topic default of preallocate"),
    _P("log.retention.bytes", int, -1, "topic default of retention.bytes"),
    _P(
        "log.retention.ms", int, 604800000, "topic default of retention.ms (wins over the next two)"
    ),
    _P("log.retention.minutes", int, 10080, "retention.ms's default in minutes, when set"),
    _P("log.retention.hours", int, 168, "retention.ms's default in hours, when set"),
    _P(
        "log.retention.check.interval.ms",
        int,
        300000,
        "how often each log is checked for segments retention deletes",
    ),
    _P(
        "log.flush.start.offset.checkpoint.interval.ms",
        int,
        60000,
        "how often log-start-offset-checkpoint is written",
    ),
    _P("log.index.size.max.bytes", int, 10485760, "topic default of segment.index.bytes"),
    _P("log.roll.jitter.ms", int, 0, "topic default of segment.jitter.ms"),
    _P("log.roll.ms", int, 604800000, "topic default of segment.ms (wins over log.roll.hours)"),
    _P("log.roll.hours", int, 168, "segment.ms's default in hours, when set"),
    # Replication quotas (KIP-73): the rates exist only dynamically in Kafka (set them with
    # AlterConfigs or `minibroker configs`); the window is Kafka's ReplicationQuotaManagerConfig.
    _P("leader.replication.throttled.rate", int, LONG_MAX, "bytes/s a leader sends throttled"),
    _P("follower.replication.throttled.rate", int, LONG_MAX, "bytes/s followers fetch throttled"),
    _P(
        "replica.alter.log.dirs.io.max.bytes.per.second",
        int,
        LONG_MAX,
        "accepted for Kafka's tools; minibroker has one log dir per broker",
    ),
    _P("replication.quota.window.num", int, 11, "samples of the replication quotas' rate"),
    _P("replication.quota.window.size.seconds", int, 1, "length of one sample"),
    _P("delete.topic.enable", bool, True, ""),
    _P("controlled.shutdown.enable", bool, True, ""),
    _P("controlled.shutdown.max.retries", int, 3, ""),
    _P("controlled.shutdown.retry.backoff.ms", int, 5000, ""),
    _P("auto.leader.rebalance.enable", bool, True, ""),
    _P("leader.imbalance.check.interval.seconds", int, 300, ""),
    _P("leader.imbalance.per.broker.percentage", int, 10, ""),
    # Kafka hard-codes these three in ReplicaManager (2.7 moves them into a config object with
    # the same defaults); here they are settable so tests need not wait 5-7.5 s (reference §3.2).
    _P("minibroker.isr.change.propagation.interval.ms", int, 2500, "isr-change check period"),
    _P("minibroker.isr.change.propagation.blackout.ms", int, 5000, "quiet time before propagating"),
    _P(
        "minibroker.isr.change.propagation.max.delay.ms",
        int,
        60000,
        "propagate at least this often",
    ),
    _P(
        "minibroker.replica.fetch.linger.ms",
        int,
        10,
        "a leader holds a follower's fetch this long for more records once some arrived, "
        "unless an acks=all produce waits on them (fewer fetch round trips under load)",
    ),
    _P(
        "minibroker.log.max.open.files",
        int,
        1000,
        "segment and index files a broker keeps open, least recently used closed first",
    ),
    _P("minibroker.controller.id", int, -1, "this controller's id (controllers only)"),
    _P(
        "minibroker.controller.listeners",
        str,
        "PLAINTEXT://127.0.0.1:0",
        "where the controller's gRPC server listens (Kafka's listeners syntax)",
    ),
    _P(
        "minibroker.controller.advertised.listeners",
        str,
        "",
        "what the controller publishes in /minibroker/controllers/<id>; empty = listeners",
    ),
    _P("minibroker.metrics.port", int, 0, "Prometheus metrics port; 0 = off"),
    _P(
        "minibroker.metrics.host",
        str,
        "127.0.0.1",
        "address the metrics endpoint binds; 0.0.0.0 in containers, whose ports are published",
    ),
    _P(
        "minibroker.test.cleaner.swap.delay.ms",
        int,
        0,
        "TEST ONLY: the log cleaner waits this long between writing a clean's *.swap files "
        "and swapping them in, so a test can kill the broker in between",
    ),
    _P(
        "minibroker.test.planted.bug",
        str,
        "",
        "TEST ONLY: a known-wrong replication rule, to prove the checkers catch it "
        "(hw-from-all-replicas, truncate-to-hw, shrink-on-no-fetch); empty = Kafka's rules",
    ),
)
PROPERTY_BY_NAME: Mapping[str, Property] = {p.name: p for p in PROPERTIES}

# Settings a listener may override as `listener.name.<listener, lower case>.<name>` (Kafka's
# per-listener security configs, KIP-103).
LISTENER_PREFIX = "listener.name."
PER_LISTENER = frozenset({"ssl.client.auth"})

# Timing profiles. "kafka" is Kafka 2.6's defaults. "demo" makes failover a matter of seconds:
# a stalled follower leaves the ISR after 3-4.5 s (isr-expiration runs every lag/2, reference
# §3.1) and a killed broker's session expires after 6 s. The session outlives the lag, so a
# paused follower is first removed by its leader (the seeds' story), not by the controller.
PROFILES: Mapping[str, Mapping[str, Any]] = {
    "kafka": {},
    "demo": {
        "zookeeper.session.timeout.ms": 6000,
        "replica.lag.time.max.ms": 3000,
        "replica.fetch.wait.max.ms": 500,
        "replica.fetch.backoff.ms": 500,
        "controlled.shutdown.retry.backoff.ms": 1000,
        "replica.high.watermark.checkpoint.interval.ms": 1000,
    },
}
DEFAULT_PROFILE = "kafka"
