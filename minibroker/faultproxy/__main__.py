"""`python -m minibroker.faultproxy`: run the fault proxy for the links of a link table."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from pathlib import Path

from minibroker.faultproxy.engine import FaultProxy
from minibroker.faultproxy.model import FaultRequestError, LinkSpec, parse_link_table
from minibroker.faultproxy.service import serve
from minibroker.runtime import logging as slog
from minibroker.runtime.program import install_stop_signals


async def run(specs: list[LinkSpec], port: int) -> int:
    proxy = FaultProxy(specs)
    try:
        await proxy.start()
        server, bound = await serve(proxy, port)
    except OSError as exc:
        slog.event("faultproxy_failed", logging.ERROR, error=str(exc))
        await proxy.close()
        return 1
    stop = asyncio.Event()
    install_stop_signals(stop)
    slog.event("faultproxy_started", control_port=bound, links=len(specs))
    await stop.wait()
    slog.event("faultproxy_stopping")
    await server.stop(grace=0.5)
    await proxy.close()
    slog.event("faultproxy_stopped")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m minibroker.faultproxy",
        description="Forward every link of a link table on 127.0.0.1 and inject network faults "
        "(cut, delay, bandwidth) on command.",
    )
    parser.add_argument("--links", type=Path, required=True, help="the link table (JSON list)")
    parser.add_argument("--port", type=int, default=0, help="control port (gRPC) on 127.0.0.1")
    parser.add_argument("--name", default="faultproxy", help="process name in log lines")
    args = parser.parse_args(argv)
    try:
        specs = parse_link_table(json.loads(args.links.read_text()))
    except (OSError, json.JSONDecodeError, FaultRequestError) as exc:
        raise SystemExit(f"faultproxy: cannot load {args.links}: {exc}") from None
    slog.setup(args.name)
    return asyncio.run(run(specs, args.port))


if __name__ == "__main__":
    sys.exit(main())
