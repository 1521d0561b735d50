"""The compose images, built while the first tests run.

On a machine whose Docker engine has no images yet, `deploy/build-images.sh` takes five to ten
minutes alone (root filesystems, the wheelhouse, four images) and ~14 beside the tests at
nice 19, much of it waiting on the mirror, dpkg and pip. `scripts/test.sh` starts it before
its first part and names the file its exit code goes to in MINIBROKER_EARLY_BUILD_STATUS (at
the lowest CPU priority: the tests beside it come first). A pytest session
started otherwise that may run compose tests (its paths include them and an engine answers)
starts the build itself as it starts, in the one process that runs or distributes the tests
(pytest-xdist's controller, not its workers). On one process the unit, fuzz and simulation
tests run first, beside the build, and the first test that starts processes waits for its
exit code (timing-sensitive tests beside the build missed deadlines: docs/notes.md); on xdist's
workers only a compose test waits. The compose tests then run the
walkthrough's own `build` block as before, which finds everything cached (seconds); a failed
early build shows there, with its error. A build the session started and that is still
running when it ends is stopped.
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

from minibroker.runtime.waiting import WaitTimeout, wait_until

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ("tests/compose/", "tests/compose_secure/", "tests/compose_testbed/", "tests/swarm/")
IN_PROCESS = ("tests/unit/", "tests/fuzz/", "tests/sim/")  # they start no process
WAIT_LIMIT_S = 3600.0
STATUS_ENV = "MINIBROKER_EARLY_BUILD_STATUS"  # the file its exit code is written to

_build = pytest.StashKey["EarlyBuild"]()
_waited: list[str] = []  # this process waited already (a line said so)


def is_compose(nodeid: str) -> bool:
    return nodeid.startswith(COMPOSE)


class EarlyBuild:
    def __init__(self) -> None:
        fd, log = tempfile.mkstemp(prefix="minibroker-image-build-", suffix=".log")
        os.close(fd)
        self.log = Path(log)
        self.status = self.log.with_suffix(".status")
        build = "bash deploy/build-images.sh --swarm"  # the swarm tests' node image too
        script = f'{build} > "{self.log}" 2>&1; echo $? > "{self.status}"'
        self.proc = subprocess.Popen(
            ["nice", "-n", "19", "bash", "-c", script],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.started = time.monotonic()

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.unlink(missing_ok=True)
        self.status.unlink(missing_ok=True)


def docker_engine_reachable() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        done = subprocess.run(["docker", "info"], capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _may_run_compose(config: pytest.Config) -> bool:
    """Whether the session's paths reach the compose tests (a path of tests/compose*, or one
    above them); -k and -m are not looked at (a build they make useless is only wasted)."""
    for arg in config.args:
        path = (Path(config.invocation_params.dir) / arg.split("::")[0]).resolve()
        for compose in COMPOSE:
            target = ROOT / compose
            if path == target or target.is_relative_to(path) or path.is_relative_to(target):
                return True
    return False


def start(config: pytest.Config) -> None:
    """pytest_configure: in the controller (or a run without workers) start the build when the
    session may run compose tests; the workers learn where its status goes from the
    environment they inherit."""
    if hasattr(config, "workerinput") or config.option.collectonly:
        return
    if os.environ.get(STATUS_ENV):  # the caller's build (scripts/test.sh): wait for that one
        return
    if not _may_run_compose(config) or not docker_engine_reachable():
        return
    build = EarlyBuild()
    config.stash[_build] = build
    os.environ[STATUS_ENV] = str(build.status)


def must_wait(item: pytest.Item) -> bool:
    """On one process, the first test that starts processes (the in-process tests run beside
    the build; a timing-sensitive test beside it missed deadlines); on xdist's workers, where
    waiting would idle a worker, the first compose test."""
    if hasattr(item.config, "workerinput"):
        return is_compose(item.nodeid)
    return not item.nodeid.startswith(IN_PROCESS)


def wait_before(item: pytest.Item) -> None:
    """pytest_runtest_setup: the build's exit code, before the first test that must wait."""
    status = os.environ.get(STATUS_ENV)
    if not status or _waited or not must_wait(item):
        return
    started = time.monotonic()
    path = Path(status)
    try:
        wait_until(path.exists, timeout_s=WAIT_LIMIT_S, what="the early image build", interval_s=1)
        code = path.read_text().strip()
    except WaitTimeout:
        code = "not finished"
    _waited.append(code)
    took = time.monotonic() - started
    said = f"images built early (deploy/build-images.sh): exit {code}; waited {took:.0f} s"
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
