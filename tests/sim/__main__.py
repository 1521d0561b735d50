"""`python -m tests.sim`: replay one seed, or run many schedules.

python -m tests.sim --seed 42                   # one schedule; the trace if it fails
python -m tests.sim --seed 0 --schedules 10000  # seeds 0..9999, a summary at the end
python -m tests.sim --seed 0 --schedules 500 --bug truncate-to-hw   # find the planted bug
"""

from __future__ import annotations

import argparse
import sys

from minibroker.core.planted_bugs import PlantedBug
from tests.sim.config import make_config
from tests.sim.runner import run_many, run_schedule


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.sim", description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, required=True, help="the (first) seed")
    parser.add_argument("--schedules", type=int, default=1, help="run this many seeds from --seed")
    parser.add_argument(
        "--bug",
        default="",
        choices=[b.value for b in PlantedBug if b.enabled],
        help="TEST ONLY: plant a known-wrong rule (the run should then fail)",
    )
    parser.add_argument("--brokers", type=int, choices=(3, 4, 5), help="default: from the seed")
    parser.add_argument("--verbose", action="store_true", help="print the config, or progress")
    parser.add_argument("--trace", type=int, default=25, help="events shown for a failure")
    parser.add_argument(
        "--paranoid", action="store_true", help="check every partition after every event"
    )
    parser.add_argument("--time-budget", type=float, help="stop after this many seconds")
    parser.add_argument(
        "--keep-going", action="store_true", help="with --schedules: do not stop at a failure"
    )
    args = parser.parse_args(argv)
    bug = PlantedBug.parse(args.bug)

    if args.schedules == 1:
        outcome = run_schedule(args.seed, bug, args.brokers, args.trace, args.paranoid)
        if args.verbose:
            print(make_config(args.seed, bug, args.brokers))
        print(outcome.report())
        return 1 if outcome.failed else 0

    def progress(done: int, failures: int) -> None:
        print(f"... {done} schedules, {failures} failures", file=sys.stderr)

    summary = run_many(
        args.seed,
        args.schedules,
        bug,
        args.brokers,
        stop_at_first=not args.keep_going,
        time_budget_s=args.time_budget,
        progress=progress if args.verbose else None,
    )
    for failure in summary.failures:
        print(failure.report())
    print(
        f"{summary.schedules} schedules (seeds {args.seed}..{args.seed + summary.schedules - 1}),"
        f" {summary.events} events in {summary.seconds:.1f} s ({summary.per_second:.1f}/s;"
        f" {summary.cpu_seconds:.1f} s CPU, {summary.per_cpu_second:.1f}/s per core):"
        f" {len(summary.failures)} with a violation"
    )
    return 1 if summary.failures else 0


if __name__ == "__main__":
    sys.exit(main())
