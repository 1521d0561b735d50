"""`python -m loadgen`: see loadgen/cli.py."""

import importlib.util
import sys

if importlib.util.find_spec("pyspark") is None:
    sys.exit(
        "loadgen: pyspark is not installed; the load generator is an extra: "
        "pip install 'minibroker[loadgen]' (scripts/bootstrap.sh installs it)"
    )

from loadgen.cli import main  # noqa: E402  (after the check: it imports pyspark)

sys.exit(main())
