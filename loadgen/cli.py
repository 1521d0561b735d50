"""`python -m loadgen` (and `minibroker loadgen`): the command line of the load generator.

Flags are checked and the cluster is found before Spark starts, so a mistake costs a second,
not a Spark start-up; every refusal is one line on stderr (exit 2 for flags, 1 otherwise).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
from pathlib import Path
from typing import NoReturn

from loadgen.faults import FaultError
from loadgen.plan import RUNS_DIR, LoadgenError, UsageError, check_report, plan_run
from loadgen.source_options import PROTOCOLS
from loadgen.workload import DISTRIBUTIONS, WorkloadError
from minibroker.chaos import DEFAULT_PROJECT
from minibroker.cli.locate import add_locate_arguments, cluster_dir
from minibroker.client.errors import ClientError
from minibroker.core.errors import ApiError
from minibroker.core.zk_layout import ZNodeFormatError
from minibroker.localcluster import ClusterError
from minibroker.localcluster.secure import configure_tools
from minibroker.runtime.grpc_security import ENV_CA, ENV_CERT, TlsFiles, configure_client
from minibroker.runtime.zk_store import ZkError
from minibroker.security.client_config import read_properties

DEFAULT_TOPIC = "loadgen"


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
    t.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        default="grpc",
        help="how the tasks produce: grpc (minibroker's producer) or kafka (kafka-python's "
        "KafkaProducer on the brokers' KAFKA listeners); verification reads over gRPC",
    )
    t.add_argument(
        "--transactional",
        action="store_true",
        help="produce in transactions (Kafka's transactional producer; needs --protocol kafka "
        "and --acks all) and verify exactly-once with a read_committed read",
    )
    t.add_argument(
        "--transaction-records",
        type=_positive,
        default=100,
        help="records per transaction with --transactional (100)",
    )
    r = p.add_argument_group("run")
    r.add_argument("--master", default="local[*]", help="Spark master (local[*])")
    r.add_argument("--tasks", type=_positive, help="producing tasks (default: by size and cores)")
    r.add_argument("--out", type=Path, help=f"run directory (default {RUNS_DIR}/<timestamp>)")
    r.add_argument(
        "--ledger-on-driver",
        action="store_true",
        help="each task sends its ledger to the driver, which writes it into the run directory "
        "(for Spark workers on machines that share no folder with the driver: a swarm)",
    )
    r.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="'at=10s ACTION TARGET'",
        help="kill|stop|pause|resume|start|restart broker-N|controller-N|leader|follower|"
        "controller at an offset from the start (repeatable; needs --dir, --compose or --swarm)",
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
        "--swarm",
        nargs="?",
        const="minibroker",
        metavar="STACK",
        help="faults act on the tasks of this swarm stack (default minibroker; deploy/SWARM.md: "
        "$DOCKER_HOST a manager, $MINIBROKER_SWARM_ENGINES each machine's engine)",
    )
    r.add_argument(
        "--check",
        action="store_true",
        help="check the flags, print the planned run as JSON and exit (no cluster, no Spark)",
    )
    add_locate_arguments(p)
    return p


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
    # A --dir cluster started with --secure: its ZooKeeper login and admin certificate, for
    # this process and (through the environment) the Spark workers it starts.
    in_containers = getattr(args, "compose", None) or getattr(args, "swarm", None)
    if in_containers is None and not os.environ.get(ENV_CERT):
        configure_tools(cluster_dir(args))
    if args.command_config is not None:  # a client certificate, as Kafka's tools take one
        client = read_properties(args.command_config)
        if client.keystore and client.ca_file:
            os.environ[ENV_CA], os.environ[ENV_CERT] = client.ca_file, client.keystore
            configure_client(TlsFiles(client.ca_file, client.keystore))
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
