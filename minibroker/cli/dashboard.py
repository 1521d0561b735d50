"""`minibroker dashboard`: the live web dashboard of a cluster (minibroker/dashboard), on
127.0.0.1:8090 by default, until Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import errno
import os
import signal
import ssl
from collections.abc import Callable
from pathlib import Path

from minibroker import chaos
from minibroker.cli.locate import add_locate_arguments, default_dir, zk_connect
from minibroker.dashboard.auth import DashboardAuth
from minibroker.dashboard.collector import Collector
from minibroker.dashboard.faults import Faults
from minibroker.dashboard.web import serve_until_stopped
from minibroker.localcluster import STATE_FILE, ClusterError, secure
from minibroker.topology import DASHBOARD_PORT


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "dashboard",
        help="a live web dashboard: replicas' LEO/HW, the ISR, events, fault buttons",
        description="Serve a live dashboard of the cluster: brokers, controllers, every "
        "partition's replicas with their LEO, HW and lag, the event timeline and fault buttons. "
        "With --dir (a process-mode cluster) or --compose (a compose cluster) the fault buttons "
        "act on it; with only --zk the dashboard watches.",
    )
    add_locate_arguments(p)
    p.add_argument(
        "--compose",
        nargs="?",
        const=chaos.DEFAULT_PROJECT,
        metavar="PROJECT",
        help=f"a compose cluster: the buttons act on its containers ({chaos.DEFAULT_PROJECT})",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    p.add_argument("--port", type=int, default=DASHBOARD_PORT, help=f"port ({DASHBOARD_PORT})")
    p.add_argument(
        "--faults-hint",
        default="",
        metavar="TEXT",
        help="what a watch-only dashboard shows where the fault buttons would be (where to "
        "find them instead)",
    )
    p.add_argument(
        "--public-read",
        action="store_true",
        help="a secure cluster's dashboard: let anyone view it without logging in (the fault "
        "buttons still need the super user's login)",
    )
    p.add_argument(
        "--check", action="store_true", help="check the arguments, say what it would do, exit"
    )
    p.set_defaults(func=cmd_dashboard)


def locate(args: argparse.Namespace) -> tuple[str, Callable[[], chaos.ChaosBackend] | None, str]:
    """ZooKeeper's address, what the fault buttons act on, and that in words."""
    if args.compose is not None:
        # A --dir beside --compose holds only the secure profile's files (deploy/secure).
        zk = args.zk or os.environ.get("MINIBROKER_ZK") or chaos.DEFAULT_ZK
        project = str(args.compose)
        backend = chaos.ComposeBackend(project, zk)
        return zk, lambda: backend, f"compose project {project}"
    zk = zk_connect(args)
    d: Path | None = args.dir
    if d is None and not (args.zk or args.bootstrap) and (default_dir() / STATE_FILE).exists():
        d = default_dir()
    if d is None or not (d / STATE_FILE).exists():
        # No process cluster to act on (a dir may hold only a secure cluster's files).
        return zk, None, "none (watching only: give --dir or --compose to use them)"
    backend_dir = d
    return zk, lambda: chaos.ProcessBackend(backend_dir), f"process cluster in {d}"


def cmd_dashboard(args: argparse.Namespace) -> int:
    zk, backend, acts_on = locate(args)
    d = args.dir or (default_dir() if backend is not None and args.compose is None else None)
    secured = None if d is None else secure.dashboard_security(d, zk, args.public_read)
    scheme = "https" if secured else "http"
    if args.check:
        print(f"would serve {scheme}://{args.host}:{args.port}/ (ZooKeeper {zk}; fault "
              f"buttons: {acts_on})")  # fmt: skip
        return 0
    return asyncio.run(_run(zk, backend, acts_on, args.host, args.port, args.faults_hint, secured))


async def _run(
    zk: str,
    backend: Callable[[], chaos.ChaosBackend] | None,
    acts_on: str,
    host: str,
    port: int,
    faults_hint: str = "",
    secured: tuple[DashboardAuth, ssl.SSLContext] | None = None,
) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    collector = Collector(zk)
    auth, context = secured if secured else (None, None)
    faults = Faults(zk, backend, faults_hint)
    server = asyncio.ensure_future(
        serve_until_stopped(collector, faults, host, port, stop, auth, context)
    )
    await asyncio.sleep(0.2)
    if server.done():
        try:
            server.result()
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ClusterError(
                    f"{host}:{port} is in use (another dashboard?): give --port PORT"
                ) from None
            raise ClusterError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
    scheme = "https" if secured else "http"
    login = " (log in: a SCRAM user; faults: admin)" if secured else ""
    print(f"dashboard on {scheme}://{shown}:{port}/{login} (ZooKeeper {zk}; fault buttons: "
          f"{acts_on})")  # fmt: skip
    print("Ctrl-C stops it", flush=True)
    await server
    return 0
