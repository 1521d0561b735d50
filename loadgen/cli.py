"""`python -m loadgen` (and `minibroker loadgen`): the command line of the load generator.

Flags are checked and the cluster is found before Spark starts, so a mistake costs a second,
not a Spark start-up; every refusal is one line on stderr (exit 2 for flags, 1 otherwise).
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from loadgen.faults import Fault, FaultError, parse_faults
from loadgen.workload import DISTRIBUTIONS, WorkloadError, WorkloadSpec
from minibroker.chaos import DEFAULT_PROJECT
from minibroker.cli.locate import add_locate_arguments
from minibroker.client.errors import ClientError
from minibroker.core.errors import ApiError
from minibroker.core.zk_layout import ZNodeFormatError
from minibroker.localcluster import ClusterError
from minibroker.runtime.clock import now_ms
from minibroker.runtime.zk_store import ZkError

DEFAULT_TOPIC = "loadgen"
RUNS_DIR = Path("loadgen-runs")


class UsageError(ValueError):
    """Flags that do not make a run; exit code 2."""


class LoadgenError(RuntimeError):
    """A run that cannot go on; the message says why."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, not argparse's usage block: the flags are many, --help lists them.
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _positive(value: str) -> int:
    n = int(value)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {n}")
    return n


def parse_seconds(value: str) -> float:
    """ "30", "30s", "1.5s" or "500ms" as seconds (> 0)."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s)?", value.strip())
    if m is None or float(m[1]) <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive duration like 30s, got {value!r}")
    return float(m[1]) / (1000 if m[2] == "ms" else 1)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="loadgen",
        description="Produce a seeded workload to a topic through Spark and the minibroker "
        "data source, inject faults, then verify every acknowledged record and report.",
    )
    size = p.add_argument_group("how much")
    size.add_argument("--records", type=_positive, help="a batch run of N records")
    size.add_argument("--rate", type=_positive, help="a streaming run: R records per second...")
    size.add_argument("--duration", type=parse_seconds, help="...for this long (e.g. 60s)")
    w = p.add_argument_group("workload")
    w.add_argument("--record-size", type=_positive, default=1024, help="value bytes (1024)")
    w.add_argument("--keys", type=_positive, default=1000, help="distinct keys (1000)")
    w.add_argument("--key-distribution", choices=DISTRIBUTIONS, default="uniform")
    w.add_argument(
        "--partitioner",
        choices=("producer", "workload"),
        default="producer",
        help="who picks a record's partition: the producer (murmur2 of the key, as Kafka) "
        "or the workload (a seeded hash of the key index)",
    )
    w.add_argument("--seed", type=int, default=0)
    t = p.add_argument_group("topic (created when missing)")
    t.add_argument("--topic", default=DEFAULT_TOPIC, help=f"(default {DEFAULT_TOPIC})")
    t.add_argument("--partitions", type=_positive, default=3)
    t.add_argument("--replication-factor", type=_positive, default=3)
    t.add_argument("--min-insync", type=_positive, default=2, help="min.insync.replicas (2)")
    t.add_argument("--acks", choices=("all", "1", "0"), default="all")
    r = p.add_argument_group("run")
    r.add_argument("--master", default="local[*]", help="Spark master (local[*])")
    r.add_argument("--tasks", type=_positive, help="producing tasks (default: by size and cores)")
    r.add_argument("--out", type=Path, help=f"run directory (default {RUNS_DIR}/<timestamp>)")
    r.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="'at=10s ACTION TARGET'",
        help="kill|stop|pause|resume|start|restart broker-N|controller-N|leader|follower|"
        "controller at an offset from the start (repeatable; needs --dir or --compose)",
    )
    r.add_argument(
        "--compose",
        nargs="?",
        const=DEFAULT_PROJECT,
        metavar="PROJECT",
        help="faults act on the containers of this compose project (default "
        f"{DEFAULT_PROJECT}) instead of a --dir cluster's processes",
    )
    r.add_argument(
        "--check",
        action="store_true",
        help="check the flags, print the planned run as JSON and exit (no cluster, no Spark)",
    )
    add_locate_arguments(p)
    return p


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
    if faults and args.dir is None and args.compose is None:
        raise UsageError(
            "--fault needs --dir or --compose: faults act on the processes of a local cluster "
            "or the containers of a compose cluster"
        )
    if args.dir is not None and args.compose is not None:
        raise UsageError("give --dir or --compose, not both")
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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        plan = plan_run(args)
    except (UsageError, FaultError, WorkloadError) as exc:
        print(f"loadgen: error: {exc}", file=sys.stderr)
        return 2
    if args.check:
        print(json.dumps(check_report(args, plan), indent=2))
        return 0
    # kazoo logs every failed connection attempt; the one-line error below says it all.
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    # Imported late: it pulls in Spark, which flag errors should not wait for.
    from loadgen.run import execute

    try:
        return execute(args, plan)
    except (ApiError, ClusterError, ClientError, ZkError, ZNodeFormatError) as exc:
        print(f"loadgen: {' '.join(str(exc).split())}", file=sys.stderr)
    except LoadgenError as exc:
        print(f"loadgen: {exc}", file=sys.stderr)
    except KeyboardInterrupt:
        return 130
    return 1
