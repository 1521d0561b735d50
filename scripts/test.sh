#!/usr/bin/env bash
# The test command: set up (if needed), then lint, type checks and the whole pytest suite
# (unit tests, and integration tests against a real ZooKeeper and real processes).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh --browser
echo "== ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "== mypy"
.venv/bin/mypy
echo "== pytest"
exec .venv/bin/pytest "$@"
