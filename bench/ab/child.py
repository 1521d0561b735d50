"""One part on one tree: `python -m bench.ab.child PART OPTIONS_JSON OUT_JSON`, run by `bench ab`
with the tree's own interpreter in the tree's directory, so the programs it starts are that
tree's. Writes the figures as JSON; exits 1 with the error on stderr if the part fails."""

from __future__ import annotations

import dataclasses
import json
import sys
import traceback
from pathlib import Path


def main(argv: list[str]) -> int:
    part, options, out = argv[0], json.loads(argv[1]), Path(argv[2])
    try:  # the brokers' allocator settings for the clients too, where the tree has them
        from minibroker.runtime.malloc_tuning import tune_malloc

        tune_malloc()
    except ImportError:
        pass
    from bench.ab.parts import PARTS

    try:
        figures = PARTS[part](**options)
    except Exception:
        traceback.print_exc()
        return 1
    out.write_text(json.dumps({n: dataclasses.asdict(f) for n, f in figures.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
