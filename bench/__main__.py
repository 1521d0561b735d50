"""`python -m bench all|raw|load|nats|failover|scale|dashboard|reassign|logs|security|
transactions|testbed|swarm|ab ...`:
`all` runs every benchmark and rewrites BENCHMARKS.md; the others run one benchmark and print
its tables; `ab REF` compares the working tree with REF, part by part."""

from __future__ import annotations

import argparse
import sys
from types import ModuleType

from bench import (
    ab,
    dashboard,
    failover,
    logs,
    minibroker_load,
    nats_peer,
    raw_grpc,
    reassign,
    scale,
    security,
    suite,
    swarm,
    testbed,
    transactions,
)
from bench.common import MissingDependency
from minibroker.runtime.malloc_tuning import tune_malloc

COMMANDS: dict[str, ModuleType] = {
    "all": suite,
    "raw": raw_grpc,
    "load": minibroker_load,
    "nats": nats_peer,
    "failover": failover,
    "scale": scale,
    "dashboard": dashboard,
    "reassign": reassign,
    "logs": logs,
    "security": security,
    "transactions": transactions,
    "testbed": testbed,
    "swarm": swarm,
    "ab": ab,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    for name, module in COMMANDS.items():
        doc = module.__doc__ or ""
        summary = " ".join(doc.strip().split("\n\n")[0].split())
        command = commands.add_parser(name, help=summary, description=doc)
        module.add_arguments(command)
        command.set_defaults(run=module.main)
    args = parser.parse_args(argv)
    # The same allocator settings as the brokers', for the clients and the raw ceiling alike.
    tune_malloc()
    try:
        args.run(args)
    except MissingDependency as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
