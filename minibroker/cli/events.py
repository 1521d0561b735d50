"""`minibroker events`: one merged, time-ordered timeline from every broker and controller.

Each process serves its recent events over gRPC (the Events service); this command finds the
processes (ZooKeeper's registrations, a broker's Metadata, or a process-mode cluster's state
file), reads or follows them all, and prints them in time order. A process keeps only its
current life's events: the earlier ones, and all of a process that is not running, come from
its log file (a process-mode cluster) or its container's log (`--compose`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from minibroker import chaos
from minibroker.cli.locate import (
    add_locate_arguments,
    default_dir,
)
from minibroker.client.channels import parse_bootstrap
from minibroker.client.event_text import is_routine, parse_since, render
from minibroker.client.events import (
    Event,
    EventsUnavailable,
    Follower,
    Source,
    metadata_brokers,
    read_events,
)
from minibroker.localcluster import (
    STATE_FILE,
    ClusterError,
    ClusterState,
    ProcessInfo,
    is_alive,
)
from minibroker.locate import sources_in_zookeeper
from minibroker.runtime.clock import now_ms
from minibroker.runtime.logging import parse_line
from minibroker.runtime.zk_store import ZkError


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "events",
        help="one time-ordered timeline of every broker's and controller's events",
        description="Read (or --follow) the events every broker and controller keeps and print "
        "them merged in time order: ISR shrink/expand, isr_change nodes, UpdateMetadata, "
        "elections, registrations, ...",
    )
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new events")
    p.add_argument(
        "--for",
        dest="for_s",
        type=float,
        default=None,
        metavar="SECONDS",
        help="with --follow: stop after this long (default: until Ctrl-C)",
    )
    p.add_argument(
        "--since", help="only events since: 90s, 5m, 1h ago, HH:MM[:SS], ISO time, epoch ms"
    )
    p.add_argument("--proc", action="append", default=[], help="only these processes")
    p.add_argument("--event", action="append", default=[], help="only these event names")
    p.add_argument("--last", type=int, default=0, help="only the last N events")
    p.add_argument(
        "--all", action="store_true", help="also the per-request HW moves (hidden by default)"
    )
    p.add_argument("--json", action="store_true", help="one JSON object per line, as logged")
    add_locate_arguments(p)
    p.add_argument(
        "--compose",
        nargs="?",
        const=chaos.DEFAULT_PROJECT,
        metavar="PROJECT",
        help="a compose cluster: also the containers' logs, so that nodes that are down or "
        f"restarted keep their events (project {chaos.DEFAULT_PROJECT}; ZooKeeper: --zk, "
        f"$MINIBROKER_ZK or {chaos.DEFAULT_ZK})",
    )
    p.set_defaults(func=cmd_events)


# The processes that serve Events (the fault proxy of `up --proxy`: its net_fault and net_heal).
ROLES = ("broker", "controller", "faultproxy")

# ---- finding the processes --------------------------------------------------------------------


class Where:
    """How to find the cluster's processes: a state file, ZooKeeper, or bootstrap brokers."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.dir: Path | None = None
        self.zk: str | None = None
        self.bootstrap: list[str] = []
        self.compose: str | None = args.compose
        env_zk = os.environ.get("MINIBROKER_ZK")
        env_bootstrap = os.environ.get("MINIBROKER_BOOTSTRAP")
        if self.compose is not None:
            if args.bootstrap or args.dir is not None:
                raise ClusterError("--compose finds the nodes through ZooKeeper: use --zk")
            self.zk = str(args.zk or env_zk or chaos.DEFAULT_ZK)
        elif args.zk:
            self.zk = str(args.zk)
        elif args.bootstrap:
            self.bootstrap = parse_bootstrap(str(args.bootstrap))
        elif args.dir is not None:
            self.dir = args.dir
        elif env_zk:
            self.zk = env_zk
        elif env_bootstrap:
            self.bootstrap = parse_bootstrap(env_bootstrap)
        elif (default_dir() / STATE_FILE).exists():
            self.dir = default_dir()
        else:
            raise ClusterError(
                "cannot find the cluster: give --zk HOST:PORT, --bootstrap HOST:PORT or --dir "
                "DIR (or set MINIBROKER_ZK / MINIBROKER_BOOTSTRAP)"
            )

    def state(self) -> ClusterState | None:
        return None if self.dir is None else ClusterState.load(self.dir)

    def histories(self) -> dict[str, History]:
        """Each process's logged events by name (see History), where a log can be read."""
        state = self.state()
        if state is not None:
            return {p.name: _log_file_history(p) for p in state.processes if p.role in ROLES}
        if self.compose is not None:
            try:
                logs = chaos.ComposeBackend(self.compose, str(self.zk)).node_logs()
            except chaos.ChaosError as exc:
                raise ClusterError(str(exc)) from None
            return {name: _lines_history(text) for name, text in logs.items()}
        return {}

    async def sources(self) -> list[Source]:
        if self.dir is not None:
            state = ClusterState.load(self.dir)
            return [Source(p.name, p.address) for p in state.processes if p.role in ROLES]
        if self.zk is not None:
            return await asyncio.to_thread(sources_in_zookeeper, self.zk)
        errors = []
        for address in self.bootstrap:
            try:
                return await metadata_brokers(address)
            except EventsUnavailable as exc:
                errors.append(str(exc))
        raise EventsUnavailable("no bootstrap broker answered: " + "; ".join(errors))


# ---- reading -----------------------------------------------------------------------------------


# A process's logged events before a time (None: all of them).
History = Callable[[int | None], Iterator[Event]]


def _events_in(text: str, before_ms: int | None) -> Iterator[Event]:
    for line in text.splitlines():
        ev = parse_line(line)
        ts = None if ev is None else ev.get("ts")
        if ev is not None and isinstance(ts, int) and (before_ms is None or ts < before_ms):
            yield ev


def _log_file_history(info: ProcessInfo) -> History:
    def history(before_ms: int | None) -> Iterator[Event]:
        try:
            text = Path(info.log_file).read_text(errors="replace")
        except OSError:
            return iter(())
        return _events_in(text, before_ms)

    return history


def _lines_history(text: str) -> History:
    return lambda before_ms: _events_in(text, before_ms)


async def read_all(where: Where, since_ms: int) -> tuple[list[Event], list[str]]:
    """Every process's kept events since `since_ms`, merged by time, and notes on stderr."""
    sources = await where.sources()
    results = await asyncio.gather(
        *(read_events(s, since_ms) for s in sources), return_exceptions=True
    )
    state = where.state()
    alive = {p.name: is_alive(p) for p in state.processes} if state is not None else {}
    histories = await asyncio.to_thread(where.histories)
    log = "its log file" if state is not None else "its container's log"
    events: list[Event] = []
    notes = []
    for source, got in zip(sources, results, strict=True):
        history = histories.pop(source.name, None)
        if isinstance(got, BaseException):
            if history is not None and not alive.get(source.name, True):
                notes.append(f"{source.name} is not running: its events come from {log}")
                events += (e for e in history(None) if e["ts"] >= since_ms)
            elif history is not None:
                notes.append(f"{source.name} does not answer ({got}): its events come from {log}")
                events += (e for e in history(None) if e["ts"] >= since_ms)
            else:
                notes.append(f"cannot read events: {got}")
            continue
        events += got
        if history is not None:
            # The process keeps only this life's recent events; earlier ones are in its log.
            first = min((int(e["ts"]) for e in got), default=None)
            events += (e for e in history(first) if e["ts"] >= since_ms)
    for name, history in sorted(histories.items()):
        # Known to the cluster's state or the engine, but not registered now: down.
        notes.append(f"{name} is not registered: its events come from {log}")
        events += (e for e in history(None) if e["ts"] >= since_ms)
    events.sort(key=lambda e: int(e.get("ts", 0)))
    return events, notes


# ---- the command -------------------------------------------------------------------------------


def _skip_routine(args: argparse.Namespace) -> bool:
    """The processes need not send what `_wanted` would drop: routine HW moves, unless --all
    or --event asks for some."""
    return not (args.all or args.event)


def _wanted(args: argparse.Namespace, event: Event) -> bool:
    if args.proc and event.get("proc") not in args.proc:
        return False
    if args.event:
        return event.get("event") in args.event
    return args.all or (not is_routine(event) and event.get("event") != "log")


def _print(args: argparse.Namespace, event: Event) -> None:
    print(json.dumps(event) if args.json else render(event), flush=True)


async def _follow(args: argparse.Namespace, where: Where, since_ms: int) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    if args.for_s is not None:
        loop.call_later(args.for_s, stop.set)

    def on_event(event: Event) -> None:
        if _wanted(args, event):
            _print(args, event)

    follower = Follower(
        where.sources,
        on_event,
        lambda line: print(f"events: {line}", file=sys.stderr, flush=True),
        since_ms=since_ms,
        skip_routine=_skip_routine(args),
    )
    await follower.run(stop)


def cmd_events(args: argparse.Namespace) -> int:
    now = now_ms()
    try:
        since_ms = parse_since(args.since, now) if args.since else 0
    except ValueError as exc:
        raise ClusterError(str(exc)) from None
    if args.for_s is not None and not args.follow:
        raise ClusterError("--for needs --follow")
    where = Where(args)
    if args.follow:
        if args.last:
            raise ClusterError("--last cannot be combined with --follow; use --since")
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_follow(args, where, since_ms or now - 2_000))
        return 0
    try:
        events, notes = asyncio.run(read_all(where, since_ms))
    except (EventsUnavailable, ZkError) as exc:
        raise ClusterError(f"cannot read the cluster's events: {exc}") from None
    for note in notes:
        print(f"events: {note}", file=sys.stderr)
    events = [e for e in events if _wanted(args, e)]
    if args.last:
        events = events[-args.last :]
    for e in events:
        _print(args, e)
    return 0
