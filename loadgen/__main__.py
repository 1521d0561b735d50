"""`python -m loadgen`: see loadgen/cli.py."""

import sys

from loadgen.cli import main

sys.exit(main())
