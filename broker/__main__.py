"""`python -m broker`: run one broker process."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from broker.server import run_broker
from minibroker.runtime import logging as slog
from minibroker.runtime.malloc_tuning import tune_malloc
from minibroker.runtime.program import (
    add_common_arguments,
    check_listeners,
    load_settings,
    print_check,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m broker",
        description="Run a minibroker broker: gRPC server plus ZooKeeper registration.",
    )
    parser.add_argument("--id", type=int, help="broker id (broker.id)")
    parser.add_argument("--host", default=None, help="listen/advertise host (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=None, help="gRPC port; 0 = any free port")
    parser.add_argument("--log-dir", help="log directory (log.dirs)")
    add_common_arguments(parser)
    args = parser.parse_args(argv)

    extra: dict[str, Any] = {}
    if args.id is not None:
        extra["broker.id"] = args.id
    if args.host is not None or args.port is not None:
        extra["listeners"] = f"PLAINTEXT://{args.host or '127.0.0.1'}:{args.port or 0}"
    if args.log_dir:
        extra["log.dirs"] = args.log_dir
    settings = load_settings(args, extra)
    broker_id = settings.get_int("broker.id")
    if broker_id < 0:
        parser.error("a broker id is required: --id N or --set broker.id=N")
    check_listeners(settings, "listeners", "advertised.listeners", broker=True)
    if args.check:
        return print_check("broker", settings)
    slog.setup(args.name or f"broker-{broker_id}")
    tune_malloc()
    return asyncio.run(run_broker(settings))


if __name__ == "__main__":
    sys.exit(main())
