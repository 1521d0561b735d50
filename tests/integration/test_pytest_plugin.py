"""The pytest plugin (issue 39 §2, minibroker/pytest_plugin.py) as an application's
suite meets it: a test file outside this repository, run by a pytest of its own that finds the
plugin through the package's `pytest11` entry point; a module's tests share one cluster, each
gets a topic of its own, a failing test's report carries the cluster's timeline (and the
artifacts directory a copy), and no process or directory is left behind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

APPLICATION_TESTS = """
import json
import pytest
from minibroker.testing import leader_of

pytestmark = pytest.mark.minibroker(controllers=1, settings={"zookeeper.session.timeout.ms": 4000})


def note(cluster, topic):
    with open("seen.jsonl", "a") as f:
        f.write(json.dumps({"dir": str(cluster.directory), "topic": topic}) + "\\n")


def test_orders_are_written(minibroker_cluster, minibroker_topic):
    note(minibroker_cluster, minibroker_topic)
    assert minibroker_cluster.partition(minibroker_topic, 0).fully_replicated


def test_a_second_test_shares_the_cluster(minibroker_cluster, minibroker_topic):
    note(minibroker_cluster, minibroker_topic)
    assert minibroker_cluster.partition(minibroker_topic, 2).leader > 0


def test_a_failure_after_a_leader_dies(minibroker_cluster, minibroker_topic):
    note(minibroker_cluster, minibroker_topic)
    minibroker_cluster.kill(leader_of(minibroker_topic, 0))
    minibroker_cluster.wait_for_new_leader(minibroker_topic, 0)
    assert False, "the application lost a record (deliberately)"
"""


def test_an_applications_suite_with_the_plugin(tmp_path: Path) -> None:
    (tmp_path / "test_app.py").write_text(APPLICATION_TESTS)
    artifacts = tmp_path / "artifacts"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_app.py",
         "--minibroker-artifacts", str(artifacts)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "1 failed, 2 passed" in out, out
    seen = [json.loads(line) for line in (tmp_path / "seen.jsonl").read_text().splitlines()]
    assert len({s["dir"] for s in seen}) == 1  # one cluster for the module
    assert [s["topic"] for s in seen] == [
        "test_orders_are_written",
        "test_a_second_test_shares_the_cluster",
        "test_a_failure_after_a_leader_dies",
    ]
    # The failure's report: the cluster, its partitions, the timeline, the logs.
    assert "- minibroker -" in out and "timeline since the test started" in out, out
    assert "leader_elected" in out and "broker-1's last log lines" in out
    (report,) = artifacts.glob("*test_a_failure_after_a_leader_dies*.txt")
    assert "leader of test_a_failure_after_a_leader_dies-0 is" in report.read_text()
    # Nothing left behind.
    cluster_dir = Path(seen[0]["dir"])
    assert not cluster_dir.exists()
    leftovers = subprocess.run(["pgrep", "-f", str(cluster_dir)], capture_output=True, text=True)
    assert leftovers.stdout == "", leftovers.stdout


WORKER_TESTS = """
import json
import os


def test_{name}(minibroker_cluster, minibroker_topic):
    assert minibroker_cluster.partition(minibroker_topic, 0).fully_replicated
    with open("seen-{name}.json", "w") as f:
        json.dump({{"dir": str(minibroker_cluster.directory),
                   "worker": os.environ.get("PYTEST_XDIST_WORKER"),
                   "zk": minibroker_cluster.zookeeper_connect}}, f)
"""


def test_under_pytest_xdist_each_worker_has_its_own_cluster(tmp_path: Path) -> None:
    for name in ("billing", "shipping"):
        (tmp_path / f"test_{name}.py").write_text(WORKER_TESTS.format(name=name))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
         "--dist", "loadfile", "test_billing.py", "test_shipping.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 0 and "2 passed" in out, out
    seen = [json.loads((tmp_path / f"seen-{n}.json").read_text()) for n in ("billing", "shipping")]
    assert {s["worker"] for s in seen} == {"gw0", "gw1"}
    assert len({s["dir"] for s in seen}) == 2 and len({s["zk"] for s in seen}) == 2
    for s in seen:
        assert not Path(s["dir"]).exists()
        leftovers = subprocess.run(["pgrep", "-f", s["dir"]], capture_output=True, text=True)
        assert leftovers.stdout == "", leftovers.stdout


HANGING_TEST = """
import json, os, time

def test_waits_forever(minibroker_cluster):
    pids = [p.pid for p in minibroker_cluster.state.processes]
    with open("cluster.json.tmp", "w") as f:
        json.dump({"dir": str(minibroker_cluster.directory), "pids": pids}, f)
    os.rename("cluster.json.tmp", "cluster.json")
    time.sleep(600)
"""


def _interrupted(tmp_path: Path, sig: int) -> tuple[list[int], Path]:
    """Starts an application's test run whose test waits forever on a cluster, sends `sig`
    to the run once the cluster is up; returns the cluster's PIDs and directory."""
    import os

    from minibroker.runtime.waiting import wait_until

    (tmp_path / "test_hang.py").write_text(HANGING_TEST)
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_hang.py"],
        cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_until(lambda: (tmp_path / "cluster.json").exists(), timeout_s=120,
                   what="the test's cluster is up")  # fmt: skip
        seen = json.loads((tmp_path / "cluster.json").read_text())
        os.kill(run.pid, sig)
        run.wait(60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    return seen["pids"], Path(seen["dir"])


@pytest.mark.parametrize("how", ["SIGINT", "SIGKILL"])
def test_an_interrupted_run_leaves_nothing_behind(tmp_path: Path, how: str) -> None:
    """Ctrl-C (SIGINT): pytest tears the fixtures down. SIGKILL (a CI job's timeout, a closed
    terminal): the cluster's reaper sees its owner gone and tears the cluster down."""
    import signal

    from minibroker.runtime.waiting import wait_until

    pids, directory = _interrupted(tmp_path, getattr(signal, how))

    def gone() -> bool:
        return not directory.exists() and not any(_alive(pid) for pid in pids)

    wait_until(gone, timeout_s=30, what=f"the cluster's processes and directory gone after {how}")


def _alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie of an exited child counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
    return True
