"""`minibroker loadgen ...`: runs `python -m loadgen` with the same arguments.

A subprocess, not an import: the shared library never imports the programs built on it
(tests/unit/test_import_rules.py), and the load generator brings Spark along.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence

COMMAND = "loadgen"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    # Listed in `minibroker --help`; main() hands the arguments over before argparse sees them,
    # since they are the load generator's flags (`minibroker loadgen --help` shows them).
    p = sub.add_parser(
        COMMAND,
        help="produce a seeded workload through Spark, inject faults, verify and report",
        add_help=False,
    )
    p.add_argument("args", nargs=argparse.REMAINDER)
    p.set_defaults(func=lambda args: run(args.args))


def run(args: Sequence[str]) -> int:
    """`python -m loadgen ARGS` in this interpreter; its exit status."""
    try:
        return subprocess.call([sys.executable, "-m", "loadgen", *args])
    except KeyboardInterrupt:
        # The child got the same Ctrl-C (one process group) and reports its own way out.
        return 130
