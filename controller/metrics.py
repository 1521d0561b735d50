"""The controller's Prometheus metrics, named after Kafka's MBeans (reference §7.2)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

_KC = "kafka_controller_kafkacontroller_"
_STATS = "kafka_controller_controllerstats_"
_EVENTS = "kafka_controller_controllereventmanager_"
_MS_BUCKETS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)


class ControllerMetrics:
    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        self.active = Gauge(_KC + "activecontrollercount", "1 on the active controller", registry=r)
        self.offline_partitions = Gauge(
            _KC + "offlinepartitionscount", "partitions without a live leader", registry=r
        )
        self.global_partitions = Gauge(_KC + "globalpartitioncount", "partitions", registry=r)
        self.global_topics = Gauge(_KC + "globaltopiccount", "topics", registry=r)
        # Kafka's LeaderElectionRateAndTimeMs times BrokerChange processing (pitfall 34).
        self.elections = Histogram(
            _STATS + "leaderelectionrateandtimems",
            "broker-change processing time in ms",
            buckets=_MS_BUCKETS,
            registry=r,
        )
        self.unclean_elections = Counter(
            _STATS + "uncleanleaderelectionspersec", "unclean leader elections", registry=r
        )
        self.queue_size = Gauge(_EVENTS + "eventqueuesize", "events waiting", registry=r)
        self.queue_time = Histogram(
            _EVENTS + "eventqueuetimems",
            "time events wait in the queue, ms",
            buckets=_MS_BUCKETS,
            registry=r,
        )

    def serve(self, port: int, host: str = "127.0.0.1") -> int:
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        return int(server.server_port)
