"""`minibroker events`: one timeline of every process's structured events in a local cluster.

Merges the JSON lines of the cluster's log files by timestamp. (A live, streaming timeline
comes with the deploy/ issue.)
"""

from __future__ import annotations

import argparse
import heapq
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from minibroker.cli.locate import add_dir_argument, cluster_dir
from minibroker.localcluster import ClusterState
from minibroker.runtime.logging import parse_line

_FIXED = ("ts", "level", "proc", "event")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("events", help="the cluster's events (elections, registrations, ...)")
    p.add_argument("--proc", action="append", default=[], help="only these processes")
    p.add_argument("--event", action="append", default=[], help="only these event names")
    p.add_argument("--last", type=int, default=0, help="only the last N events")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    add_dir_argument(p)
    p.set_defaults(func=cmd_events)


def _read(path: Path) -> Iterator[dict[str, Any]]:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return
    for line in lines:
        event = parse_line(line)
        if event is not None and isinstance(event.get("ts"), int):
            yield event


def timeline(state: ClusterState) -> list[dict[str, Any]]:
    """Every event of every program in the cluster, oldest first."""
    streams = [_read(Path(p.log_file)) for p in state.processes if p.role != "zookeeper"]
    return list(heapq.merge(*streams, key=lambda e: int(e["ts"])))


def render(event: dict[str, Any]) -> str:
    when = datetime.fromtimestamp(event["ts"] / 1000, tz=UTC).strftime("%H:%M:%S.%f")[:-3]
    rest = " ".join(
        f"{k}={json.dumps(v) if not isinstance(v, str) else v}"
        for k, v in event.items()
        if k not in _FIXED
    )
    return f"{when} {event.get('proc', '?'):<14} {event['event']:<28} {rest}".rstrip()


def cmd_events(args: argparse.Namespace) -> int:
    events = timeline(ClusterState.load(cluster_dir(args)))
    if args.proc:
        events = [e for e in events if e.get("proc") in args.proc]
    if args.event:
        events = [e for e in events if e.get("event") in args.event]
    if args.last:
        events = events[-args.last :]
    for e in events:
        print(json.dumps(e) if args.json else render(e))
    return 0
