"""`python -m bench ab REF [--parts idle,load,kafka,failover] [--rounds 2]`: the same benchmark
parts on the tree at REF (A) and on the working tree (B), alternating A B A B …, one cluster
per run; prints each figure's median and range per tree, the ratio B/A and whether the
difference is beyond noise (the two trees' ranges do not overlap).

A is laid out beside the working tree (bench/ab/trees.py: `git archive`, its own venv, the
working tree's bench/ copied in so both run the same measuring code). The runs share the
machine with nothing else of ours: on 2 cores, keep other work off it while this runs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.ab import stats
from bench.ab.parts import DEFAULT_PARTS, PARTS, options
from bench.ab.trees import Tree, TreeError, lay_out, same_bench, working_tree

TREES_DIR = Path(tempfile.gettempdir()) / "minibroker-ab"
RUN_TIMEOUT_S = 1800


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ref", help="the git ref to compare against (A); B is the working tree")
    parser.add_argument(
        "--parts",
        default=",".join(DEFAULT_PARTS),
        help=f"comma-separated, of {', '.join(PARTS)} (default {','.join(DEFAULT_PARTS)})",
    )
    parser.add_argument("--rounds", type=int, default=2, help="runs per tree (default 2)")
    parser.add_argument(
        "--partitions", type=int, default=10_000, help="idle: partitions x RF 3 (default 10000)"
    )
    parser.add_argument(
        "--idle-window", type=float, default=20.0, help="idle: seconds sampled (default 20)"
    )
    parser.add_argument(
        "--seconds", type=float, default=5.0, help="load, kafka: seconds per case (default 5)"
    )
    parser.add_argument(
        "--failover-runs", type=int, default=3, help="failover: kills per run (default 3)"
    )
    parser.add_argument("--trees", type=Path, default=TREES_DIR, help=f"where A goes ({TREES_DIR})")
    parser.add_argument("--markdown", type=Path, help="also write the table to this file")


def run_part(tree: Tree, part: str, opts: dict[str, object]) -> dict[str, stats.Figure] | None:
    """One run of `part` on `tree`, in a child with the tree's interpreter; None if it failed
    (its error is on stderr)."""
    same_bench(tree)
    with tempfile.TemporaryDirectory(prefix="bench-ab-") as tmp:
        out = Path(tmp) / "figures.json"
        done = subprocess.run(
            [str(tree.python), "-m", "bench.ab.child", part, json.dumps(opts), str(out)],
            cwd=tree.root, stdout=sys.stderr, timeout=RUN_TIMEOUT_S, check=False,
        )  # fmt: skip
        if done.returncode != 0 or not out.exists():
            return None
        raw = json.loads(out.read_text())
    return {n: stats.Figure(**f) for n, f in raw.items()}


def main(args: argparse.Namespace) -> None:
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        raise SystemExit(f"error: unknown part {unknown[0]!r}; known: {', '.join(PARTS)}")
    try:
        b = working_tree()
        a = lay_out(args.ref, args.trees)
    except TreeError as exc:
        raise SystemExit(f"error: {exc}") from None
    runs: dict[str, dict[str, list[dict[str, stats.Figure]]]] = {
        p: {"A": [], "B": []} for p in parts
    }
    failed: list[str] = []
    started = time.monotonic()
    for part in parts:
        for round_no in range(1, args.rounds + 1):
            for side, tree in (("A", a), ("B", b)):
                print(f"ab: {part} round {round_no}: {side} ({tree.label})", file=sys.stderr,
                      flush=True)  # fmt: skip
                got = run_part(tree, part, options(part, args))
                if got is None:
                    failed.append(f"{part} round {round_no} on {side}")
                else:
                    runs[part][side].append(got)
    table = [r for p in parts for r in stats.rows(runs[p]["A"], runs[p]["B"])]
    text = (
        f"`python -m bench ab {args.ref} --parts {','.join(parts)} --rounds {args.rounds}`: "
        f"A = {a.label}, B = {b.label}; runs alternated A B A B…; "
        f"{(time.monotonic() - started) / 60:.0f} min.\n\n"
        + stats.markdown(table, a.label, b.label)
    )
    partial = [n for p in parts for n in stats.missing(runs[p]["A"], runs[p]["B"])]
    if partial:
        text += "\n\nNot in every run (left out): " + ", ".join(partial)
    if failed:
        text += "\n\nFailed runs (their figures are left out): " + "; ".join(failed)
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")
