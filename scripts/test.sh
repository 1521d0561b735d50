#!/usr/bin/env bash
# The test command: set up (if needed), then lint, type checks and the whole pytest suite
# (unit tests, and integration tests against a real ZooKeeper and real processes), in two
# parts. Arguments, when given, go to one pytest run instead.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh --browser
echo "== ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "== mypy"
.venv/bin/mypy
# Two pytest-xdist workers by default (MINIBROKER_TEST_WORKERS=1: one process): which tests
# share a worker and in what order is tests/parallel.py's. On a clean clone the part without
# the compose tests took 19:18 on two workers against 30:51 on one (docs/notes.md, Test suite
# timings).
PYTEST=(.venv/bin/pytest)
if [ "${MINIBROKER_TEST_WORKERS:-2}" -gt 1 ]; then
    PYTEST+=(-n "${MINIBROKER_TEST_WORKERS:-2}" --dist loadgroup --no-loadscope-reorder)
fi
if [ $# -gt 0 ]; then
    echo "== pytest $*"
    exec "${PYTEST[@]}" "$@"
fi
COMPOSE=(tests/compose tests/compose_secure tests/compose_testbed tests/swarm)
# The compose images build (deploy/build-images.sh: minutes on an engine without them) beside
# the first part, at the lowest CPU priority: on xdist's workers no test waits for it, on one
# process the first test that starts processes does (tests/early_image_build.py).
build_log=$(mktemp /tmp/minibroker-image-build-XXXXXX.log)
export MINIBROKER_EARLY_BUILD_STATUS="$build_log.status"
export MINIBROKER_BUILD_CPU_SHARES=2  # the builds' RUN steps, which nice does not reach
setsid nice -n 19 bash -c "bash deploy/build-images.sh --swarm > '$build_log' 2>&1; echo \$? > '$build_log.status'" \
    < /dev/null &
build=$!
trap 'kill -- -$build 2>/dev/null || true; rm -f "$build_log" "$build_log.status"' EXIT
echo "== pytest: all but the compose tests (images building: $build_log)"
status=0
"${PYTEST[@]}" --ignore=tests/compose --ignore=tests/compose_secure --ignore=tests/compose_testbed --ignore=tests/swarm || status=$?
echo "== pytest: the compose tests (on the Docker engine, alone: they time failovers)"
.venv/bin/pytest "${COMPOSE[@]}" || status=$?
exit $status
