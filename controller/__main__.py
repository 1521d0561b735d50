"""`python -m controller`: run one controller process (active or standby)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from controller.server import run_controller
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
        prog="python -m controller",
        description="Run a minibroker controller; the first to win /controller is active.",
    )
    parser.add_argument(
        "--id",
        type=int,
        help="controller id (minibroker.controller.id), distinct from every broker id",
    )
    parser.add_argument("--host", default=None, help="gRPC listen host (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=None, help="gRPC port; 0 = any free port")
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    extra: dict[str, Any] = {}
    if args.id is not None:
        extra["minibroker.controller.id"] = args.id
    if args.host is not None or args.port is not None:
        extra["minibroker.controller.listeners"] = (
            f"PLAINTEXT://{args.host or '127.0.0.1'}:{args.port or 0}"
        )
    settings = load_settings(args, extra)
    controller_id = settings.get_int("minibroker.controller.id")
    if controller_id < 0:
        parser.error("a controller id is required: --id N")
    check_listeners(
        settings,
        "minibroker.controller.listeners",
        "minibroker.controller.advertised.listeners",
        broker=False,
    )
    if args.check:
        return print_check("controller", settings)
    slog.setup(args.name or f"controller-{controller_id}")
    tune_malloc()
    return asyncio.run(run_controller(settings))


if __name__ == "__main__":
    sys.exit(main())
