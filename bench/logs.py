"""`python -m bench logs [--clean-mb 256] [--restart-mb 1024] [--fill-mb 64] [--load 200]`: logs
that live for days (issue 27): the log cleaner's throughput, what cleaning costs acks=all
producers on the same brokers, and a broker's log restart with and without producer snapshots.

- Cleaner throughput, in this process on real files: a compacted log of `clean-mb` MB (1 KiB
  values, 16 records a batch, 100,000 keys updated at random), cleaned once by the broker's own
  clean job (broker/log/cleaner/clean.py): MB of log read per second, records (keys) per
  second, and what is left.
- Cleaning's cost: a process-mode cluster (3 brokers, Kafka's timings); topic `compacted` (RF 3,
  8 MB segments) filled with `fill-mb` MB of keyed updates while min.compaction.lag.ms holds its
  cleaners back; then `load` acks=all requests/s of one 1 KiB record to topic `bench` for a phase
  without cleaning and a phase in which min.compaction.lag.ms drops to 0 and all three brokers
  clean the partition. Latency from each request's scheduled time.
- Restart: a log of `restart-mb` MB of idempotent batches (10 producers) opened as a broker opens
  it (recovery reads and checks every batch) and its first idempotent append (which needs the
  producers' state): with the clean-stop snapshot, and with every snapshot removed.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from pathlib import Path

from bench.common import Section, md_table, percentiles
from bench.load_cluster import Cluster, running_cluster
from bench.reassign import _load
from broker.log.cleaner.clean import CleanPlan, clean
from broker.log.cleaner.offset_map import capacity_for
from broker.log.cleaner.policy import CompactionConfig, cleanable, delete_horizon_ms
from broker.log.log import Log
from broker.log.store import FileSegmentStore
from minibroker.client import config_zk
from minibroker.client.producer import Producer
from minibroker.core.records import NewRecord, build_batch
from minibroker.localcluster import zk_session

VALUE = b"v" * 1024
T0 = 1_700_000_000_000


def cleaner_throughput(size_mb: int, keys: int = 100_000) -> dict[str, float]:
    rng = random.Random(27)
    with tempfile.TemporaryDirectory(prefix="bench-cleaner-") as tmp:
        store = FileSegmentStore(Path(tmp))
        log = Log(store, segment_bytes=64 << 20)
        while log.size_bytes < size_mb * 1_000_000:
            batch = [NewRecord(b"key-%d" % rng.randrange(keys), VALUE) for _ in range(16)]
            log.append_as_leader(build_batch(batch, base_timestamp=T0), leader_epoch=0)
        log.roll()
        log.flush()
        infos = log.segment_infos()
        found = cleanable(infos, CompactionConfig(0.0), checkpoint=None, log_start_offset=0,
                          log_end_offset=log.log_end_offset, high_watermark=log.log_end_offset,
                          now_ms=T0)  # fmt: skip
        plan = CleanPlan(
            tuple(infos), found.first_dirty, found.first_uncleanable,
            delete_horizon_ms(infos, 0, 0), 64 << 20, 4096, capacity_for(128 << 20),
        )  # fmt: skip
        started = time.perf_counter()
        result = clean(store, plan)
        seconds = time.perf_counter() - started
    return {
        "cleaner.mb": result.bytes_read / 1e6,
        "cleaner.seconds": seconds,
        "cleaner.mb_s": result.bytes_read / 1e6 / seconds,
        "cleaner.records_s": result.records_read / seconds,
        "cleaner.keys": result.keys,
        "cleaner.left_mb": result.bytes_written / 1e6,
    }


def restart_times(size_mb: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-restart-") as tmp:
        store = FileSegmentStore(Path(tmp))
        log = Log(store, segment_bytes=128 << 20)
        seqs, rng = [0] * 10, random.Random(3)
        while log.size_bytes < size_mb * 1_000_000:
            pid = rng.randrange(10)
            batch = build_batch(
                [NewRecord(None, VALUE * 4)] * 16, base_timestamp=T0,
                producer_id=pid, producer_epoch=0, base_sequence=seqs[pid],
            )  # fmt: skip
            log.append_as_leader(batch, leader_epoch=0)
            seqs[pid] += 16
        log.write_producer_snapshot()
        log.flush()
        store.close()
        out: dict[str, float] = {"restart.mb": log.size_bytes / 1e6}
        for case in ("with", "without"):
            if case == "without":
                for f in Path(tmp).glob("*.snapshot"):
                    f.unlink()
            started = time.perf_counter()
            reopened = Log(FileSegmentStore(Path(tmp)), segment_bytes=128 << 20)
            opened = time.perf_counter()
            batch = build_batch([NewRecord(None, b"next")], base_timestamp=T0, producer_id=0,
                                producer_epoch=0, base_sequence=seqs[0])  # fmt: skip
            reopened.append_as_leader(batch, leader_epoch=0)
            appended = time.perf_counter()
            reopened.truncate_to(reopened.log_end_offset - 1)  # as it was, for the next case
            reopened.flush()
            out[f"restart.{case}.open_s"] = opened - started
            out[f"restart.{case}.first_append_s"] = appended - opened
    return out


def cleaning_cost(fill_mb: int, load: float, seconds: float) -> dict[str, float]:
    overrides = ["log.cleaner.backoff.ms=200"]
    with running_cluster(partitions=3, replicas=3, profile="kafka", overrides=overrides) as bench:
        state = bench.state
        with zk_session(state.zk_connect) as zk:
            from minibroker.client import admin_zk

            admin_zk.create_topic(zk, "compacted", 1, 3, {
                "cleanup.policy": "compact", "segment.bytes": str(8 << 20),
                "min.compaction.lag.ms": str(86_400_000), "min.insync.replicas": "2",
            }, random.Random(1))  # fmt: skip
        compacted = add_topic_ready(state)
        _fill(compacted, fill_mb)
        asyncio.run(_load(bench, load, 3.0))  # warm-up, not counted
        _, quiet = asyncio.run(_load(bench, load, seconds))
        with zk_session(state.zk_connect) as zk:
            config_zk.change_topic_config(zk, "compacted", {
                "cleanup.policy": "compact", "segment.bytes": str(8 << 20),
                "min.compaction.lag.ms": "0", "min.insync.replicas": "2",
            })  # fmt: skip
        _, busy = asyncio.run(_load(bench, load, seconds))
        cleaned = sum(
            1 for p in state.by_role("broker")
            for line in Path(p.log_file).read_text().splitlines()
            if '"log_cleaned"' in line and '"compacted-0"' in line
        )  # fmt: skip
    p50_q, p99_q, _ = percentiles(quiet)
    p50_b, p99_b, _ = percentiles(busy)
    return {
        "cleaning.fill_mb": float(fill_mb),
        "cleaning.p50_quiet_ms": p50_q or 0.0,
        "cleaning.p99_quiet_ms": p99_q or 0.0,
        "cleaning.p50_busy_ms": p50_b or 0.0,
        "cleaning.p99_busy_ms": p99_b or 0.0,
        "cleaning.cleans": float(cleaned),
    }


def add_topic_ready(state: object) -> Cluster:
    from bench.load_cluster import ready_leaders
    from minibroker.runtime.waiting import wait_until

    address = state.by_role("broker")[0].address  # type: ignore[attr-defined]
    found: dict[int, str] = {}

    def ready() -> bool:
        found.update(ready_leaders(address, "compacted", 1, 3) or {})
        return bool(found)

    wait_until(ready, timeout_s=30, what="compacted's leader")
    return Cluster(state, found, "compacted", 3)  # type: ignore[arg-type]


def _fill(cluster: Cluster, size_mb: int) -> None:
    rng = random.Random(5)

    async def run() -> None:
        async with Producer(cluster.bootstrap, acks=-1, batch_size=1 << 20, linger_ms=5) as p:
            futures = [
                await p.send("compacted", VALUE, key=b"key-%d" % rng.randrange(5000), partition=0)
                for _ in range(size_mb * 1_000_000 // 1100)
            ]
            await asyncio.gather(*futures)

    asyncio.run(run())


def measure(clean_mb: int, restart_mb: int, fill_mb: int, load: float, seconds: float) -> Section:
    figures = cleaner_throughput(clean_mb)
    figures |= restart_times(restart_mb)
    figures |= cleaning_cost(fill_mb, load, seconds)
    f = figures
    markdown = (
        "The log cleaner, in one process on real files (the broker's own clean job):\n\n"
        + md_table(
            ["log cleaned", "seconds", "MB/s", "records/s", "distinct keys", "left"],
            [
                (
                    f"{f['cleaner.mb']:.0f} MB",
                    f"{f['cleaner.seconds']:.1f}",
                    f"{f['cleaner.mb_s']:.1f}",
                    f"{f['cleaner.records_s']:,.0f}",
                    f"{f['cleaner.keys']:,.0f}",
                    f"{f['cleaner.left_mb']:.0f} MB",
                )
            ],
        )
        + f"\n\nWhat cleaning costs acks=all producers on the same three brokers ({load:g} "
        f"requests/s of 1 KiB to topic `bench`; topic `compacted` holds {fill_mb} MB of updates, "
        f"cleaned by all three brokers in the second phase: {f['cleaning.cleans']:.0f} cleans "
        "logged):\n\n"
        + md_table(
            ["phase", "p50 ms", "p99 ms"],
            [
                (
                    "no cleaning",
                    f"{f['cleaning.p50_quiet_ms']:.1f}",
                    f"{f['cleaning.p99_quiet_ms']:.1f}",
                ),
                (
                    "cleaning",
                    f"{f['cleaning.p50_busy_ms']:.1f}",
                    f"{f['cleaning.p99_busy_ms']:.1f}",
                ),
            ],
        )
        + f"\n\nOpening a log of {f['restart.mb']:.0f} MB of idempotent batches (10 producers) as "
        "a broker does, then its first idempotent append:\n\n"
        + md_table(
            ["producer snapshots", "open (recovery) s", "first idempotent append s"],
            [
                (
                    "the clean-stop snapshot",
                    f"{f['restart.with.open_s']:.2f}",
                    f"{f['restart.with.first_append_s']:.3f}",
                ),
                (
                    "none (every batch header read)",
                    f"{f['restart.without.open_s']:.2f}",
                    f"{f['restart.without.first_append_s']:.3f}",
                ),
            ],
        )  # fmt: skip
        + "\n\nRecovery reads and checks every batch of every segment at each start (minibroker "
        "keeps no recovery point), which the snapshot does not shorten; the snapshot saves the "
        "producer-state rebuild that the first idempotent append would otherwise make on the "
        "broker's event loop."
    )
    return Section("Logs that live for days: cleaning and restarts", markdown, figures)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--clean-mb", type=int, default=256, help="the cleaned log's size")
    parser.add_argument("--restart-mb", type=int, default=1024, help="the reopened log's size")
    parser.add_argument("--fill-mb", type=int, default=64, help="compacted topic's size")
    parser.add_argument("--load", type=float, default=200.0, help="acks=all requests/s")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of a phase")


def main(args: argparse.Namespace) -> None:
    section = measure(args.clean_mb, args.restart_mb, args.fill_mb, args.load, args.seconds)
    print(f"## {section.title}\n\n{section.markdown}\n")
    for name, value in sorted(section.figures.items()):
        print(f"{name} = {value:g}")
