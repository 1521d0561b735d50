"""python -m minibroker.kafkatools TOOL [flags]: one of Kafka's tools (bin/*.sh call this)."""

from __future__ import annotations

import importlib
import sys

from minibroker.kafkatools import TOOLS


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1].removesuffix(".sh") not in TOOLS:
        print(
            f"usage: python -m minibroker.kafkatools {{{','.join(TOOLS)}}} [flags]", file=sys.stderr
        )
        return 1
    module = importlib.import_module(
        f"minibroker.kafkatools.{TOOLS[sys.argv[1].removesuffix('.sh')]}"
    )
    return int(module.main(sys.argv[2:]))


if __name__ == "__main__":
    sys.exit(main())
