"""`python -m bench raw|nats [options]`: run one side-by-side benchmark and print its table."""

from __future__ import annotations

import argparse
import sys

from bench import nats_peer, raw_grpc
from bench.common import MissingDependency


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    raw = commands.add_parser(
        "raw", help=raw_grpc.__doc__.splitlines()[0] if raw_grpc.__doc__ else None
    )
    raw_grpc.add_arguments(raw)
    raw.set_defaults(run=raw_grpc.main)
    nats = commands.add_parser(
        "nats", help=nats_peer.__doc__.splitlines()[0] if nats_peer.__doc__ else None
    )
    nats_peer.add_arguments(nats)
    nats.set_defaults(run=nats_peer.main)
    args = parser.parse_args(argv)
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
