"""The parts `bench ab` can run on each tree: each starts its own cluster with the tree's
programs, measures, and returns named figures with the direction that is better.

- `idle`: N partitions x RF 3 on 3 brokers (demo profile): start-up, every process's CPU over
  an idle window after a settle, then a SIGKILL of the busiest leader and how long its
  leaderships took to move (bench scale's probes).
- `load`: the gRPC path, acks=all, 100 B: pre-built batches of 100 (the brokers' capacity) and
  the Producer with Kafka's defaults, peak and half load (bench load's cases).
- `kafka`: confluent-kafka on the KAFKA listeners, acks=all, 100 B and 1 KiB, peak and half
  (half: once right after the peak, then with the peak's pages released from the page cache,
  as every half-load case of the benchmarks runs: bench/profiles/kafka-half-load.md §5).
- `failover`: the demo profile's leader SIGKILL broken down step by step (bench failover).
- `dashboard`: the dashboard process's idle CPU and RSS with a page open on 1,000 partitions,
  and the delay of an ISR change to the page (bench dashboard).
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.ab.stats import Better, Figure
from bench.common import Result
from bench.scale_probes import allow_open_files, budget_s, idle_cpu_pct
from minibroker import localcluster

SETTLE_S = 5.0


def _fig(out: dict[str, Figure], name: str, value: float, better: Better, unit: str) -> None:
    out[name] = Figure(name, float(value), better, unit)


def idle(partitions: int = 10_000, window_s: float = 20.0) -> dict[str, Figure]:
    from bench import scale  # the scale benchmark's probes of a big cluster

    allow_open_files(partitions)
    cluster_dir = Path(tempfile.mkdtemp(prefix=f"bench-ab-idle-{partitions}-", dir="/tmp"))
    state = localcluster.up(cluster_dir, brokers=3, controllers=1, profile="demo")
    out: dict[str, Figure] = {}
    try:
        with localcluster.zk_session(state.zk_connect, timeout_ms=30_000) as zk:
            scale.create_topic(zk, partitions)
            started = time.monotonic()
            scale.wait_serving(state, partitions, budget_s(partitions))
            _fig(out, f"startup.{partitions}", time.monotonic() - started, "lower", "s")
            time.sleep(SETTLE_S)  # the measurement's design: start-up work ends first
            cpu = idle_cpu_pct(scale.programs(state), window_s)
            brokers = [v for k, v in cpu.items() if k.startswith("broker")]
            _fig(out, f"idle.{partitions}.broker_cpu", statistics.mean(brokers), "lower", "%")
            _fig(out, f"idle.{partitions}.broker_cpu_max", max(brokers), "lower", "%")
            _fig(out, f"idle.{partitions}.controller_cpu", cpu["controller-1"], "lower", "%")
            session_s = 6.0  # the demo profile's zookeeper.session.timeout.ms
            moved = scale.kill_busiest(state, zk, partitions, session_s)
            _fig(out, f"failover.{partitions}.moved_after_expiry", moved.moved_after_expiry_s,
                 "lower", "s")  # fmt: skip
            _fig(out, f"failover.{partitions}.applied_after_expiry",
                 moved.applied_after_expiry_s, "lower", "s")  # fmt: skip
    finally:
        localcluster.down(state)
        shutil.rmtree(cluster_dir, ignore_errors=True)
    return out


def _result_figures(out: dict[str, Figure], name: str, r: Result, rate: bool = True) -> None:
    if rate:
        _fig(out, f"{name}.records_per_s", r.records_per_s, "higher", "rec/s")
    if r.p50_ms is not None and r.p99_ms is not None:
        _fig(out, f"{name}.p50", r.p50_ms, "lower", "ms")
        _fig(out, f"{name}.p99", r.p99_ms, "lower", "ms")


def load(seconds: float = 5.0) -> dict[str, Figure]:
    from bench import minibroker_load as mb
    from bench.load_cluster import release_page_cache, running_cluster

    out: dict[str, Figure] = {}
    with running_cluster() as cluster:
        peak, half = asyncio.run(mb.pre_built(cluster, -1, 100, 100, seconds, 8))
        _result_figures(out, "grpc.prebuilt.acks_all.100B.peak", peak)
        _result_figures(out, "grpc.prebuilt.acks_all.100B.half", half, rate=False)
        client_peak = asyncio.run(mb.client_built(cluster, -1, 100, seconds))
        _result_figures(out, "grpc.producer.acks_all.100B.peak", client_peak)
        release_page_cache(cluster)
        client_half = asyncio.run(
            mb.client_built(cluster, -1, 100, seconds, client_peak.records_per_s / 2)
        )
        _result_figures(out, "grpc.producer.acks_all.100B.half", client_half, rate=False)
    return out


def kafka(seconds: float = 5.0) -> dict[str, Figure]:
    from bench.kafka_clients import confluent_built
    from bench.load_cluster import release_page_cache, running_cluster

    out: dict[str, Figure] = {}
    with running_cluster() as cluster:
        for size in (100, 1024):
            peak = confluent_built(cluster, -1, size, seconds)
            _result_figures(out, f"kafka.acks_all.{size}B.peak", peak)
            rate = peak.records_per_s / 2
            after_peak = confluent_built(cluster, -1, size, seconds, rate)
            _result_figures(out, f"kafka.acks_all.{size}B.half_after_peak", after_peak, rate=False)
            release_page_cache(cluster)
            half = confluent_built(cluster, -1, size, seconds, rate)
            _result_figures(out, f"kafka.acks_all.{size}B.half", half, rate=False)
    return out


def failover(runs: int = 3) -> dict[str, Figure]:
    from bench import failover as fo
    from bench.failover_report import KILL_STEPS

    result = fo.measure_profile("demo", runs, 0)
    out: dict[str, Figure] = {}
    for step in KILL_STEPS:
        values = [getattr(m, step) for m in result.kills]
        _fig(out, f"failover.demo.{step.removesuffix('_ms')}", statistics.median(values) / 1000,
             "lower", "s")  # fmt: skip
    return out


def dashboard(partitions: int = 1000) -> dict[str, Figure]:
    from bench import dashboard as db

    with tempfile.TemporaryDirectory(prefix="bench-ab-dashboard-") as tmp:
        many = db.many_partitions(partitions, Path(tmp))
    out: dict[str, Figure] = {}
    _fig(out, f"dashboard.{partitions}.idle_cpu", float(many["idle_cpu_pct"]), "lower", "%")
    _fig(out, f"dashboard.{partitions}.rss", float(many["rss_mb"]), "lower", "MB")
    _fig(out, f"dashboard.{partitions}.render", float(many["render_s"]), "lower", "s")
    _fig(out, f"dashboard.{partitions}.isr_delay_p99", float(many["few.delay_p99_ms"]),
         "lower", "ms")  # fmt: skip
    return out


PARTS: dict[str, Callable[..., dict[str, Figure]]] = {
    "idle": idle,
    "load": load,
    "kafka": kafka,
    "failover": failover,
    "dashboard": dashboard,
}
DEFAULT_PARTS = ("idle", "load", "kafka", "failover")


def options(part: str, args: Any) -> dict[str, Any]:
    """The keyword arguments of `part` taken from the command line's options."""
    return {
        "idle": {"partitions": args.partitions, "window_s": args.idle_window},
        "load": {"seconds": args.seconds},
        "kafka": {"seconds": args.seconds},
        "failover": {"runs": args.failover_runs},
        "dashboard": {},
    }[part]
