"""The broker's Prometheus metrics, named after Kafka's MBeans (reference §7.2).

`kafka.server:type=ReplicaManager,name=IsrShrinksPerSec` becomes
`kafka_server_replicamanager_isrshrinkspersec_total` (a counter; Prometheus takes the rate),
gauges keep their names. Each broker has its own registry; the endpoint listens on
`minibroker.metrics.host` (loopback unless set).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

_RM = "kafka_server_replicamanager_"


class BrokerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.isr_shrinks = Counter(_RM + "isrshrinkspersec", "successful ISR shrinks", registry=r)
        self.isr_expands = Counter(_RM + "isrexpandspersec", "successful ISR expands", registry=r)
        self.failed_isr_updates = Counter(
            _RM + "failedisrupdatespersec", "conditional ISR writes that failed", registry=r
        )
        self.under_replicated = Gauge(
            _RM + "underreplicatedpartitions", "led partitions with |ISR| < RF", registry=r
        )
        self.under_min_isr = Gauge(
            _RM + "underminisrpartitioncount", "led partitions with |ISR| < min.isr", registry=r
        )
        self.at_min_isr = Gauge(
            _RM + "atminisrpartitioncount", "led partitions with |ISR| == min.isr", registry=r
        )
        self.leader_count = Gauge(_RM + "leadercount", "partitions led here", registry=r)
        self.partition_count = Gauge(_RM + "partitioncount", "partitions hosted here", registry=r)
        self.produce_expirations = Counter(
            "kafka_server_delayedproducemetrics_expirespersec",
            "acks=-1 produces that timed out",
            registry=r,
        )
        self.requests = Counter(
            "kafka_network_requestmetrics_requestspersec",
            "requests handled",
            ["request"],
            registry=r,
        )
        self.request_time = Histogram(
            "kafka_network_requestmetrics_totaltimems",
            "request handling time in ms (including purgatory waits)",
            ["request"],
            buckets=(0.5, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 5000, 30000),
            registry=r,
        )

        # Incremental fetch sessions (KIP-227): the leader's cache, and this broker's
        # followers' full requests (one per session opened; more means sessions were lost).
        self.fetch_sessions = Gauge(
            "kafka_server_fetchsessioncache_numincrementalfetchsessions",
            "fetch sessions this leader keeps",
            registry=r,
        )
        self.fetch_session_partitions = Gauge(
            "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
            "partitions held in this leader's fetch sessions",
            registry=r,
        )
        self.follower_full_fetches = Gauge(
            "minibroker_follower_full_fetch_requests",
            "Fetch requests this broker's followers sent naming every partition",
            registry=r,
        )

    def serve(self, port: int, host: str = "127.0.0.1") -> int:
        """Expose /metrics on host:port (0 = any free port); returns the port."""
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        return int(server.server_port)
