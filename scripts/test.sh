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
# Two workers, one per core: the compose tests (waiting on containers and the image build) run
# beside the rest (tests/parallel.py groups what must share a worker, longest first).
exec .venv/bin/pytest -n 2 --dist loadgroup --no-loadscope-reorder "$@"
