"""The suite's order, and the compose images built while the first tests run.

Order: the tests that run in this process and assert nothing about time (unit, fuzz, sim)
first, then those that start real processes, the compose tests last (their cluster and
Spark containers then never sit beside a timing-sensitive test).

On a machine whose Docker engine has no images yet, `deploy/build-images.sh` takes about five
minutes (root filesystems, the wheelhouse, four images), most of it waiting on the mirror,
dpkg and pip rather than on both cores. When the session will run compose tests, it starts in
the background as the session starts, beside the first group only: before the first test of
the later groups, the session waits for it. The compose tests then run the walkthrough's own
`build` block as before, which finds everything cached (seconds); a failed early build shows
there, with its error. A build still running when the session ends (interrupted) is stopped.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIRST = ("tests/unit/", "tests/fuzz/", "tests/sim/")
LAST = ("tests/compose/", "tests/compose_secure/")  # the plain cluster, then the secure one
WAIT_LIMIT_S = 3600.0

_build = pytest.StashKey["EarlyBuild"]()


def rank(nodeid: str) -> int:
    if nodeid.startswith(FIRST):
        return 0
    return 2 if nodeid.startswith(LAST) else 1


class EarlyBuild:
    def __init__(self) -> None:
        self.log = Path(tempfile.mkstemp(prefix="minibroker-image-build-", suffix=".log")[1])
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                ["bash", str(ROOT / "deploy" / "build-images.sh")],
                cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip
        self.started = time.monotonic()

    def wait(self) -> str:
        """Until the build ends; a line saying how it went."""
        try:
            code = self.proc.wait(timeout=WAIT_LIMIT_S)
        except subprocess.TimeoutExpired:
            self.stop()
            code = -1
        took = time.monotonic() - self.started
        return f"images built early (deploy/build-images.sh): exit {code} after {took:.0f} s"

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.unlink(missing_ok=True)


def docker_engine_reachable() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        done = subprocess.run(["docker", "info"], capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def order_and_start(config: pytest.Config, items: list[pytest.Item]) -> None:
    """pytest_collection_modifyitems: the order above (stable within a group, so modules and
    their fixtures stay together); the early build if compose tests will run after others."""
    items.sort(key=lambda item: rank(item.nodeid))
    if config.option.collectonly or not items or rank(items[-1].nodeid) != 2:
        return
    if rank(items[0].nodeid) == 2 or not docker_engine_reachable():
        return
    config.stash[_build] = EarlyBuild()


def wait_before(item: pytest.Item) -> None:
    """pytest_runtest_setup: the first test after the first group waits for the build."""
    build = item.config.stash.get(_build, None)
    if build is None or rank(item.nodeid) == 0 or build.proc.returncode is not None:
        return
    said = build.wait()
    # Said on the terminal, not into the test's captured output.
    reporter = item.config.pluginmanager.get_plugin("terminalreporter")
    capture = item.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(said)


def stop(config: pytest.Config) -> None:
    """pytest_unconfigure: nothing of the build outlives the session."""
    build = config.stash.get(_build, None)
    if build is not None:
        build.stop()
