#!/usr/bin/env bash
# The main job: set up (if needed) and run the walk-through of a real cluster's failovers.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/minibroker demo "$@"
