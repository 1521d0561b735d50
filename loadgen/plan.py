"""A load generator run as its flags describe it, checked before anything starts (Spark, the
cluster), and the errors that refuse or stop a run. The command line (cli.py) parses the flags;
run.py carries a Plan out."""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

from loadgen.faults import Fault, parse_faults
from loadgen.workload import WorkloadSpec
from minibroker.runtime.clock import now_ms

RUNS_DIR = Path("loadgen-runs")


class UsageError(ValueError):
    """Flags that do not make a run; exit code 2."""


class LoadgenError(RuntimeError):
    """A run that cannot go on; the message says why."""


@dataclass(frozen=True)
class Plan:
    """A run as the flags describe it, checked."""

    spec: WorkloadSpec
    rate: int | None
    duration_s: float | None
    faults: list[Fault]
    out_dir: Path


def plan_run(args: argparse.Namespace) -> Plan:
    """Check the flags together (raises UsageError, FaultError or WorkloadError)."""
    if args.records is not None and (args.rate is not None or args.duration is not None):
        raise UsageError("give either --records or --rate with --duration, not both")
    if args.records is None and (args.rate is None or args.duration is None):
        raise UsageError("give --records N, or --rate R with --duration S")
    faults = parse_faults(args.fault)
    swarm = getattr(args, "swarm", None)
    if faults and args.dir is None and args.compose is None and swarm is None:
        raise UsageError(
            "--fault needs --dir, --compose or --swarm: faults act on the processes of a local "
            "cluster, the containers of a compose cluster or the tasks of a swarm stack"
        )
    if sum(x is not None for x in (args.dir, args.compose, swarm)) > 1:
        raise UsageError("give one of --dir, --compose and --swarm")
    if getattr(args, "transactional", False) and (args.protocol != "kafka" or args.acks != "all"):
        raise UsageError(
            "--transactional needs --protocol kafka and --acks all (Kafka's transactional "
            "producer is idempotent)"
        )
    records = args.records or max(1, round(args.rate * args.duration))
    spec = WorkloadSpec(
        records=records,
        record_size=args.record_size,
        keys=args.keys,
        key_distribution=args.key_distribution,
        partitions=None,  # the topic's count is filled in once the topic is known
        seed=args.seed,
    )
    out = args.out or RUNS_DIR / time.strftime("%Y%m%d-%H%M%S", time.localtime(now_ms() / 1000))
    return Plan(spec, args.rate, args.duration, faults, out)


def check_report(args: argparse.Namespace, plan: Plan) -> dict[str, object]:
    """What `--check` prints: the run the flags describe, nothing started."""
    flags = {k: str(v) if isinstance(v, Path) else v for k, v in sorted(vars(args).items())}
    return {
        "program": "loadgen",
        "records": plan.spec.records,
        "faults": len(plan.faults),
        "out": str(plan.out_dir),
        "flags": flags,
    }


def prepare_out_dir(out: Path) -> None:
    ledger = out / "ledger"
    if ledger.exists() and any(ledger.iterdir()):
        raise LoadgenError(f"{out} already holds a run's ledger; choose another --out")
    ledger.mkdir(parents=True, exist_ok=True)
