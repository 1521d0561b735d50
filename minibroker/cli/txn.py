"""`minibroker txn list|run`: Kafka's transaction protocol under a delayed message, on a fresh
local cluster (minibroker.txn_delay): each scenario's steps, what the history checker found in
what a read_committed consumer read, and the cluster's events around it. `--verification`
starts the brokers with transaction.partition.verification.enable (KIP-890 part 1),
`--epoch-bump` with transaction.version 2 (part 2). Exit status 0 when every run came out as
Kafka's rules predict, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from minibroker.localcluster import ClusterError

VERIFY = "transaction.partition.verification.enable"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "txn",
        help="transactions under a delayed message: hanging transactions, aborted reads",
        description="Reproduce Kafka's transaction anomalies under a delayed produce on a fresh "
        "local cluster, checked by the history checker; --verification turns on KIP-890's "
        "server-side defence (transaction.partition.verification.enable).",
    )
    actions = p.add_subparsers(dest="txn_command", required=True)
    ls = actions.add_parser("list", help="the scenarios, with what they show")
    ls.set_defaults(func=cmd_list)
    r = actions.add_parser("run", help="run one scenario (or --all) and print its report")
    r.add_argument("name", nargs="?", help="a scenario name (see `minibroker txn list`)")
    r.add_argument("--all", action="store_true", help="every scenario, on one cluster")
    _defence_arguments(r)
    r.set_defaults(func=cmd_run)
    rnd = actions.add_parser(
        "random", help="held produces delivered at random later moments, a coordinator failover"
    )
    rnd.add_argument("--seed", type=int, default=0, help="seeds the holds and delays (0)")
    rnd.add_argument("--transactions", type=int, default=40, help="how many (40)")
    _defence_arguments(rnd)
    rnd.set_defaults(func=cmd_random)


def _defence_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--verification", action="store_true", help=f"brokers with {VERIFY}=true (KIP-890 part 1)"
    )
    p.add_argument(
        "--epoch-bump", action="store_true",
        help="brokers with transaction.version=2 (KIP-890 part 2): every transaction ends at a "
        "bumped epoch (our producer's EndTxn v5)",
    )  # fmt: skip
    p.add_argument(
        "--history", type=Path, metavar="DIR", help="keep the clients' histories here (JSON lines)"
    )


def cmd_list(args: argparse.Namespace) -> int:
    from minibroker.txn_delay.scenarios import SCENARIOS

    width = max(len(name) for name in SCENARIOS)
    for s in SCENARIOS.values():
        print(f"{s.name:<{width}}  {s.description}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from minibroker.testing import Cluster
    from minibroker.txn_delay.scenarios import SCENARIOS, Defences, run

    if bool(args.name) == bool(args.all):
        raise ClusterError("give one scenario name or --all (`minibroker txn list`)")
    if args.name and args.name not in SCENARIOS:
        raise ClusterError(
            f"no scenario {args.name!r}: one of {', '.join(SCENARIOS)} (`minibroker txn list`)"
        )
    chosen = list(SCENARIOS.values()) if args.all else [SCENARIOS[args.name]]
    defences = Defences(verification=args.verification, epoch_bump=args.epoch_bump)
    settings: dict[str, object] = {"group.initial.rebalance.delay.ms": 0, **defences.settings()}
    print(f"starting a local cluster ({defences.text()})", file=sys.stderr, flush=True)
    ok = True
    with tempfile.TemporaryDirectory(prefix="minibroker-txn-") as tmp, Cluster(
        settings=settings
    ) as cluster:  # fmt: skip
        for scenario in chosen:
            folder = (args.history or Path(tmp)) / scenario.name
            print(f"== {scenario.name}", file=sys.stderr, flush=True)
            report = run(scenario, cluster, folder, defences)
            print(report.text(), flush=True)
            ok = ok and report.as_expected
            if args.history is not None:
                print(f"history kept in {folder}", file=sys.stderr)
    return 0 if ok else 1


def cmd_random(args: argparse.Namespace) -> int:
    from minibroker.testing import Cluster
    from minibroker.txn_delay.randomised import run_randomised
    from minibroker.txn_delay.scenarios import Defences

    if args.transactions < 2:
        raise ClusterError("--transactions: at least 2 (the failover is halfway)")
    defences = Defences(verification=args.verification, epoch_bump=args.epoch_bump)
    settings: dict[str, object] = {"group.initial.rebalance.delay.ms": 0, **defences.settings()}
    print(f"starting a local cluster ({defences.text()})", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="minibroker-txn-") as tmp, Cluster(
        settings=settings
    ) as cluster:  # fmt: skip
        folder = (args.history or Path(tmp)) / f"randomised-{args.seed}"
        report = run_randomised(cluster, folder, defences, args.seed, args.transactions)
        print(report.text(), flush=True)
        if args.history is not None:
            print(f"history kept in {folder}", file=sys.stderr)
    return 0 if report.as_expected else 1
