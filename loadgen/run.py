"""One load run from start to verdict: find the cluster, prepare the topic, start Spark, write
the workload while the fault driver and the progress printer run, then verify and report.

Exit status: 0 when every acknowledged record is in the topic where it was acknowledged, 1
when one is missing or the job failed.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from loadgen.chart import write_chart
from loadgen.cluster import end_offsets, ensure_topic
from loadgen.faults import FaultDriver
from loadgen.job import STREAM_GRACE_S, JobFailed, Sink, default_tasks, run_batch, run_stream
from loadgen.plan import LoadgenError, Plan, prepare_out_dir
from loadgen.progress import ProgressPrinter, records_gained
from loadgen.report import build_report, load_ledger, summary_lines, write_report
from loadgen.spark import master_cores, spark_session
from loadgen.verify import Verification, verify
from loadgen.workload import WorkloadSpec
from minibroker.chaos import ChaosBackend, backend_for
from minibroker.client.errors import ClientError
from minibroker.client.events import Event, read_events
from minibroker.localcluster import ClusterState
from minibroker.localcluster.secure import KAFKA_SSL_LISTENER
from minibroker.localcluster.state import ADMIN_CONFIG
from minibroker.locate import (
    bootstrap_servers,
    cluster_dir,
    kafka_brokers_in_zookeeper,
    sources_in_zookeeper,
    zk_connect,
)
from minibroker.runtime.clock import now_ms
from minibroker.runtime.logging import parse_line
from minibroker.runtime.zk_store import ZkError
from minibroker.security.client_config import read_properties


def say(line: str) -> None:
    # Flushed: the run is often watched through a pipe (tests, `| tee`).
    print(line, flush=True)


def _chaos(args: argparse.Namespace, zk: str) -> ChaosBackend:
    """Where the faults act: a swarm stack's tasks, a compose project's containers or a --dir
    cluster's processes."""
    if getattr(args, "swarm", None) is not None:
        from minibroker.swarm.backend import SwarmBackend

        return SwarmBackend(args.swarm, zk)
    return backend_for(cluster_dir=args.dir, compose_project=args.compose, zk=zk)


def execute(args: argparse.Namespace, plan: Plan) -> int:
    bootstrap = bootstrap_servers(args)
    zk = zk_connect(args)
    # Made now, so an unknown cluster dir or an unreachable Docker engine fails before Spark.
    chaos = _chaos(args, zk) if plan.faults else None
    partitions = ensure_topic(
        zk, args.topic, args.partitions, args.replication_factor, args.min_insync
    )
    spec = plan.spec
    if args.partitioner == "workload":
        spec = dataclasses.replace(spec, partitions=partitions)
    starting = end_offsets(bootstrap, args.topic, partitions)
    prepare_out_dir(plan.out_dir)
    # Verification, progress and offsets go through gRPC whichever protocol writes.
    sink_bootstrap, client_config = bootstrap, None
    if args.protocol == "kafka":
        client_config = kafka_client_config(args)
        sink_bootstrap = kafka_brokers_in_zookeeper(zk, kafka_listener_for(client_config))
    ledger_dir = (plan.out_dir / "ledger").resolve()
    sink = Sink(
        sink_bootstrap, args.topic, args.acks, ledger_dir, args.protocol, client_config,
        f"loadgen-{plan.out_dir.name}" if args.transactional else None,
        args.transaction_records, args.ledger_on_driver,
    )  # fmt: skip
    tasks = args.tasks or default_tasks(spec.records, master_cores(args.master))
    say(f"loadgen: {describe(plan, spec, args, tasks)}; run dir {plan.out_dir}")
    say(f"loadgen: starting Spark ({args.master})")
    spark = spark_session("minibroker-loadgen", args.master)
    try:
        started_ms, finished_ms, executed = _produce(
            spark, args, plan, spec, sink, tasks, starting, chaos, bootstrap
        )
        ledger_files = list(sink.ledger_dir.glob("*.parquet"))
        if not ledger_files:
            raise LoadgenError(f"the job wrote no ledger files into {sink.ledger_dir}")
        say("loadgen: verifying: reading the ledger and the topic up to its high watermark")
        verdict = verify(
            spark,
            bootstrap=bootstrap,
            topic=args.topic,
            ledger_dir=sink.ledger_dir,
            starting=starting,
            log_starts=lambda: end_offsets(bootstrap, args.topic, partitions, beginning=True),
            transactional=args.transactional,
            ledger_on_driver=sink.ledger_on_driver,
        )
    finally:
        spark.stop()
    run_info = {
        **describe_json(plan, spec, args, tasks, partitions),
        "bootstrap": list(bootstrap),
        "producer_bootstrap": list(sink.bootstrap),
        "started_ms": started_ms,
        "finished_ms": finished_ms,
        "out": str(plan.out_dir),
    }
    changes = (
        isr_changes(args.dir, args.topic)
        if args.dir
        else live_isr_changes(zk, args.topic, started_ms)
    )
    finish(plan.out_dir, spec, run_info, verdict, executed, finished_ms, changes)
    return 0 if verdict.ok else 1


def kafka_client_config(args: argparse.Namespace) -> Path | None:
    """The Kafka client's security settings for `--protocol kafka`: --command-config, else a
    secure --dir cluster's admin.properties (its KAFKA listener is SASL_SSL)."""
    if args.command_config is not None:
        return Path(args.command_config).resolve()
    in_containers = args.compose is not None or getattr(args, "swarm", None) is not None
    if not in_containers and (cluster_dir(args) / ADMIN_CONFIG).is_file():
        return (cluster_dir(args) / ADMIN_CONFIG).resolve()
    return None


def kafka_listener_for(config: Path | None) -> str:
    """A client with a certificate (security.protocol=SSL) writes through a secure process
    cluster's KAFKA_SSL listener; any other through the default one."""
    if config is not None and read_properties(config).protocol == "SSL":
        return KAFKA_SSL_LISTENER
    return ""


def isr_changes(cluster_dir: Path, topic: str) -> list[dict[str, Any]]:
    """The leaders' isr_shrink / isr_expand events for `topic` from a process-mode cluster's
    structured logs (brokers log one line per ISR change)."""
    state = ClusterState.load(cluster_dir)
    events: list[Mapping[str, Any]] = []
    for broker in state.by_role("broker"):
        try:
            lines = Path(broker.log_file).read_text(errors="replace").splitlines()
        except OSError:
            continue
        events += filter(None, map(parse_line, lines))
    return _isr_fields(events, topic)


def _isr_fields(events: Iterable[Mapping[str, Any]], topic: str) -> list[dict[str, Any]]:
    out = [
        {k: e.get(k) for k in ("ts", "event", "tp", "isr", "proc", "changed")}
        for e in events
        if e.get("event") in ("isr_shrink", "isr_expand")
        and str(e.get("tp", "")).startswith(f"{topic}-")
    ]
    return sorted(out, key=lambda e: int(e["ts"]))


def live_isr_changes(zk: str, topic: str, since_ms: int) -> list[dict[str, Any]]:
    """The same, from the brokers' Events service (any cluster, e.g. a compose one); brokers
    that cannot be reached are left out of the report, with a note."""

    async def read_all() -> list[Event]:
        sources = await asyncio.to_thread(sources_in_zookeeper, zk)
        got = await asyncio.gather(
            *(read_events(s, since_ms) for s in sources if s.name.startswith("broker")),
            return_exceptions=True,
        )
        for g in got:
            if isinstance(g, BaseException):
                print(f"loadgen: ISR changes incomplete: {g}")
        return [e for g in got if not isinstance(g, BaseException) for e in g]

    try:
        return _isr_fields(asyncio.run(read_all()), topic)
    except (ZkError, OSError) as exc:
        print(f"loadgen: cannot read the brokers' ISR changes: {exc}")
        return []


def _produce(
    spark: SparkSession,
    args: argparse.Namespace,
    plan: Plan,
    spec: WorkloadSpec,
    sink: Sink,
    tasks: int,
    starting: Mapping[int, int],
    chaos: ChaosBackend | None,
    grpc_bootstrap: Sequence[str],
) -> tuple[int, int, list[dict[str, Any]]]:
    """Write the workload with faults and progress lines alongside; (start, end, faults).
    Progress is read over gRPC (`grpc_bootstrap`) whichever protocol the sink writes with."""
    progress = ProgressPrinter(grpc_bootstrap, args.topic, starting, say=say)
    driver = FaultDriver(
        plan.faults,
        chaos,
        args.topic,
        load_started=_topic_grew(grpc_bootstrap, args.topic, starting),
        say=say,
    )
    started_ms = now_ms()
    driver.start()
    progress.start()
    try:
        if plan.rate is None:
            run_batch(spark, spec, sink, tasks)
        else:
            assert plan.duration_s is not None
            taken = run_stream(
                spark,
                spec,
                sink,
                rate=plan.rate,
                tasks=tasks,
                checkpoint_dir=(plan.out_dir / "checkpoint").resolve(),
                deadline_s=plan.duration_s + STREAM_GRACE_S,
            )
            if taken < spec.records:
                say(f"loadgen: the stream took in {taken:,} of {spec.records:,} records in time")
    except JobFailed as exc:
        raise LoadgenError(f"the Spark job failed: {exc}") from None
    finally:
        finished_ms = now_ms()
        progress.stop()
        driver.stop()
    skipped = len(plan.faults) - len(driver.executed)
    late = sum(1 for f in driver.executed if f.offset_s < f.planned_s)
    if skipped:
        say(f"loadgen: {skipped} fault(s) were due after the load ended and were skipped")
    if late:
        say(f"loadgen: {late} fault(s) bringing a process back ran early, as the load ended")
    return started_ms, finished_ms, [f.to_json() for f in driver.executed]


def _topic_grew(
    bootstrap: Sequence[str], topic: str, starting: Mapping[int, int]
) -> Callable[[], bool]:
    def check() -> bool:
        try:
            return records_gained(bootstrap, topic, starting) > 0
        except (ClientError, OSError):
            return False  # a leader is moving: ask again at the next poll

    return check


def finish(
    out: Path,
    spec: WorkloadSpec,
    run_info: Mapping[str, Any],
    verdict: Verification,
    faults: Sequence[Mapping[str, Any]],
    finished_ms: int,
    isr_changes: Sequence[Mapping[str, Any]] = (),
) -> None:
    """Build the report from the ledger, write report.json and chart.png, print the summary."""
    report = build_report(
        load_ledger(out / "ledger"),
        run=run_info,
        record_bytes=spec.record_size,
        end_ms=finished_ms,
        verification=verdict.to_json(),
        faults=faults,
        isr_changes=isr_changes,
    )
    write_report(report, out / "report.json")
    write_chart(report, out / "chart.png")
    for line in summary_lines(report):
        say(line)
    give_to_folder_owner(out)
    say(f"report: {out / 'report.json'}  chart: {out / 'chart.png'}")


def give_to_folder_owner(out: Path) -> None:
    """A run made by root (the compose load generator writes into a folder bind-mounted from the
    host) belongs to whoever owns the folder it landed in, not to root."""
    if os.geteuid() != 0:
        return
    parent = out.resolve().parent.stat()
    if parent.st_uid == 0:
        return
    for path in [out, *out.rglob("*")]:
        os.chown(path, parent.st_uid, parent.st_gid, follow_symlinks=False)


def describe(plan: Plan, spec: WorkloadSpec, args: argparse.Namespace, tasks: int) -> str:
    how = (
        f"{spec.records:,} records"
        if plan.rate is None
        else f"{plan.rate:,} records/s for {plan.duration_s:g} s ({spec.records:,} records)"
    )
    via = " through the brokers' KAFKA listeners (kafka-python)" if args.protocol == "kafka" else ""
    if args.transactional:
        via += f", in transactions of {args.transaction_records} records"
    return (
        f"{how} of {spec.record_size} bytes, {spec.keys} {spec.key_distribution} keys, "
        f"acks={args.acks}, to topic {args.topic} in {tasks} task(s){via}"
    )


def describe_json(
    plan: Plan, spec: WorkloadSpec, args: argparse.Namespace, tasks: int, partitions: int
) -> dict[str, Any]:
    return {
        "mode": "batch" if plan.rate is None else "stream",
        "topic": args.topic,
        "partitions": partitions,
        "records": spec.records,
        "rate": plan.rate,
        "duration_s": plan.duration_s,
        "record_size": spec.record_size,
        "keys": spec.keys,
        "key_distribution": spec.key_distribution,
        "partitioner": args.partitioner,
        "seed": spec.seed,
        "acks": args.acks,
        "protocol": args.protocol,
        "transactional": args.transactional,
        "transaction_records": args.transaction_records if args.transactional else None,
        "master": args.master,
        "tasks": tasks,
        "faults_planned": [f.text for f in plan.faults],
    }
