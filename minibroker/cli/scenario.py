"""`minibroker scenario list|run`: named fault scenarios on a fresh process-mode cluster, each
followed by the independent checker's verdict and the run's timeline (minibroker.scenarios).
Exit status 0 when every scenario run passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from minibroker.client.event_text import render
from minibroker.core.planted_bugs import PlantedBug
from minibroker.localcluster import ClusterError
from minibroker.scenarios import (
    SCENARIOS,
    Report,
    RunOptions,
    ScenarioUnavailable,
    UnknownScenario,
    run,
    scenario_or_raise,
)
from minibroker.scenarios.report import write_json
from minibroker.scenarios.timeline import Event


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "scenario",
        help="fault scenarios on a fresh local cluster, checked by an independent checker",
        description="Run Kafka's replication fault scenarios (shutdowns, bounces, pauses, "
        "session expiry, unclean election, min.insync.replicas, network faults) on a fresh "
        "process-mode cluster and check eight invariants: no acked record lost, replicas "
        "identical below the HW, the leader's HW never decreasing, no read past the HW, the "
        "leader in the ISR, growing leader epochs, one leader per epoch, ISR within replicas.",
    )
    actions = p.add_subparsers(dest="scenario_command", required=True)
    ls = actions.add_parser("list", help="the scenarios, with what they do")
    ls.add_argument("--json", action="store_true", help="one JSON object per scenario")
    ls.set_defaults(func=cmd_list)
    r = actions.add_parser("run", help="run one scenario (or --all) and print its verdict")
    r.add_argument("name", nargs="?", help="a scenario name (see `scenario list`)")
    r.add_argument("--all", action="store_true", help="every scenario, one after the other")
    r.add_argument("--seed", type=int, default=0, help="seeds the values, topic and choices")
    r.add_argument(
        "--dir", type=Path, help="the cluster's dir (default: a temporary one, removed after)"
    )
    r.add_argument(
        "--keep", action="store_true", help="leave the cluster running afterwards (one scenario)"
    )
    r.add_argument("--json", type=Path, metavar="FILE", help="write the whole report as JSON")
    r.add_argument(
        "--planted-bug",
        choices=[b.value for b in PlantedBug if b.enabled],
        help="TEST ONLY: start the brokers with this known-wrong replication rule",
    )
    r.add_argument(
        "--rate", type=float, default=120.0, help="records per second of the verifying producer"
    )
    r.set_defaults(func=cmd_run)


def cmd_list(args: argparse.Namespace) -> int:
    if args.json:
        for s in SCENARIOS.values():
            doc = {"name": s.name, "needs_proxy": s.needs_proxy, "description": s.description}
            print(json.dumps(doc))
        return 0
    width = max(len(name) for name in SCENARIOS)
    for s in SCENARIOS.values():
        flag = "proxy" if s.needs_proxy else "     "
        print(f"{s.name:<{width}}  {flag}  {s.description}")
    return 0


def _sentence(event: Event) -> str:
    """The `minibroker events` sentence of an event, without its time, process and name."""
    parts = render(event).split(None, 3)
    return parts[3] if len(parts) > 3 else ""


def _progress(line: str) -> None:
    print(f"  {line}", file=sys.stderr, flush=True)


def cmd_run(args: argparse.Namespace) -> int:
    if bool(args.name) == bool(args.all):
        raise ClusterError("give one scenario name or --all (`minibroker scenario list`)")
    if args.all and args.keep:
        raise ClusterError("--keep keeps one scenario's cluster: name one scenario")
    try:
        chosen = list(SCENARIOS.values()) if args.all else [scenario_or_raise(args.name)]
    except UnknownScenario as exc:
        raise ClusterError(str(exc)) from None
    reports: list[Report] = []
    skipped: list[tuple[str, str]] = []
    failed: list[tuple[str, str]] = []
    for scenario in chosen:
        d = args.dir / scenario.name if args.dir is not None and args.all else args.dir
        print(f"== scenario {scenario.name} (seed {args.seed})", file=sys.stderr, flush=True)
        options = RunOptions(
            seed=args.seed,
            cluster_dir=d,
            keep=args.keep,
            planted_bug=args.planted_bug,
            records_per_s=args.rate,
            event_text=_sentence,
            progress=_progress,
        )
        try:
            report = run(scenario, options)
        except ClusterError as exc:
            if not args.all:
                raise
            # One scenario's cluster that cannot start (or has no proxy) does not stop --all.
            unavailable = isinstance(exc, ScenarioUnavailable)
            (skipped if unavailable else failed).append((scenario.name, str(exc)))
            print(f"{'skipped' if unavailable else 'error'}: {exc}", file=sys.stderr, flush=True)
            continue
        reports.append(report)
        print(report.render(), flush=True)
        if args.keep:
            print(f"cluster kept running in {report.cluster_dir}", file=sys.stderr)
    if args.json is not None and reports:
        docs = [r.to_json() for r in reports]
        write_json(args.json, docs if args.all else docs[0])
    if args.all:
        print("\nsummary:")
        for r in reports:
            print(f"  {r.scenario:<30} {r.duration_s:6.1f} s  {r.verdict()}")
        for name, why in skipped:
            print(f"  {name:<30} skipped: {why}")
        for name, why in failed:
            print(f"  {name:<30} error: {' '.join(why.split())}")
    return 0 if all(r.passed for r in reports) and not failed else 1
