"""`python -m bench security [--seconds 10]`: what security costs (issue 28). The same
confluent-kafka producer (acks=all, 1 KiB and 100 B records, librdkafka's defaults, at peak and
at half of the plaintext peak) against a plaintext cluster's KAFKA listeners, then a
`cluster up --secure` cluster's: SASL_SSL with SCRAM-SHA-512 and SSL with a client
certificate. In the secure cluster replication runs over mutual TLS too (gRPC), so acks=all
latency carries TLS on both hops. Each cluster: 3 brokers, 1 controller, Kafka's timings, topic
`bench` with 3 partitions, RF 3, min.insync.replicas 2."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.common import Result, Section, md_table
from bench.kafka_clients import confluent_built
from bench.load_cluster import Cluster, release_page_cache, running_cluster
from minibroker.localcluster.secure import ADMIN_SSL_CONFIG
from minibroker.security.client_config import read_properties

SIZES = (1024, 100)


def _bootstrap(cluster: Cluster, tls: bool) -> str:
    brokers = cluster.state.by_role("broker")
    return ",".join(f"{b.host}:{b.kafka_tls_port if tls else b.kafka_port}" for b in brokers)


def _runs(cluster: Cluster, name: str, config: dict[str, str], tls: bool, seconds: float,
          half_of: dict[int, float]) -> list[Result]:  # fmt: skip
    out = []
    for size in SIZES:
        peak = confluent_built(cluster, -1, size, seconds, bootstrap=_bootstrap(cluster, tls),
                               config=config, mode=name)  # fmt: skip
        out.append(peak)
        rate = half_of.setdefault(size, peak.records / peak.seconds) / 2
        release_page_cache(cluster)  # the peak's pages (load_cluster.release_page_cache)
        out.append(confluent_built(cluster, -1, size, seconds, rate,
                                   bootstrap=_bootstrap(cluster, tls), config=config,
                                   mode=name))  # fmt: skip
    return out


def measure(seconds: float = 10.0) -> Section:
    results: list[Result] = []
    half_of: dict[int, float] = {}  # the plaintext peak: every protocol's "half" is of it
    with running_cluster() as plain:
        results += _runs(plain, "PLAINTEXT", {}, False, seconds, half_of)
    with running_cluster(secure=True) as secure:
        admin = read_properties(Path(secure.state.admin_client_config or ""))
        results += _runs(secure, "SASL_SSL SCRAM-SHA-512", admin.confluent(), False, seconds,
                         half_of)  # fmt: skip
        cert = read_properties(Path(secure.state.dir) / ADMIN_SSL_CONFIG)
        results += _runs(secure, "SSL client certificate", cert.confluent(), True, seconds,
                         half_of)  # fmt: skip
    rows = [
        (r.mode, r.record_bytes, r.load, f"{r.records / r.seconds:,.0f}",
         f"{r.records * r.record_bytes / r.seconds / 1e6:.2f}",
         "-" if r.p50_ms is None else f"{r.p50_ms:.1f}",
         "-" if r.p99_ms is None else f"{r.p99_ms:.1f}")
        for r in results
    ]  # fmt: skip
    body = (
        f"confluent-kafka, acks=all, {seconds:g} s a row; half: half of the PLAINTEXT peak "
        "of the same size. Secure rows: `cluster up --secure` (replication over mutual TLS).\n\n"
        + md_table(["protocol", "bytes", "load", "records/s", "MB/s", "p50 ms", "p99 ms"], rows)
    )
    figures = {f"security.{r.mode}.{r.record_bytes}.{r.load}": r.records / r.seconds
               for r in results}  # fmt: skip
    return Section("What security costs (SASL_SSL and SSL next to PLAINTEXT)", body, figures)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds a row (10)")


def main(args: argparse.Namespace) -> int:
    section = measure(args.seconds)
    print(f"### {section.title}\n{section.markdown}")
    return 0
