"""The reaper: a detached process a test cluster starts beside itself, which tears the cluster
down (every process by the PID its state file records, then the directory) once the process
that owns it is gone: a test run killed with SIGKILL, a CI job's timeout, a closed terminal.
A compose cluster's reaper takes its project down instead (`down -v`: containers, network,
volumes). A cluster stopped normally stops its reaper last (Cluster.down).

    python -m minibroker.localcluster.reaper --dir D --owner PID --owner-start T [--remove DIR]
    python -m minibroker.localcluster.reaper --compose PROJECT --file F --owner PID ...
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from minibroker.localcluster.processes import proc_stat

POLL_S = 0.5


def start_time(pid: int) -> str | None:
    """The process's start time (clock ticks since boot, /proc/PID/stat field 22), None for a
    process that is gone or a zombie: with the PID, it names one process, never a later one
    that reused the PID."""
    fields = proc_stat(pid)
    return None if fields is None or fields[0] == "Z" else fields[19]


def reap(directory: Path, remove: Path | None) -> None:
    from minibroker import localcluster
    from minibroker.localcluster import ClusterState

    if (directory / localcluster.STATE_FILE).exists():
        localcluster.down(ClusterState.load(directory), timeout_s=0)
    if remove is not None:
        shutil.rmtree(remove, ignore_errors=True)


def reap_compose(project: str, compose_file: Path, remove: Path | None) -> None:
    from minibroker.chaos import compose_up  # the Docker SDK: only a compose reaper needs it

    compose_up.down(project, compose_file)
    if remove is not None:
        shutil.rmtree(remove, ignore_errors=True)


def start(directory: Path, remove: Path | None) -> subprocess.Popen[bytes]:
    """A reaper for the cluster in `directory`, owned by this process."""
    return _spawn(["--dir", str(directory)], remove)


def start_compose(project: str, compose_file: Path, remove: Path | None) -> subprocess.Popen[bytes]:
    """A reaper for compose project `project` (of `compose_file`), owned by this process."""
    return _spawn(["--compose", project, "--file", str(compose_file)], remove)


def _spawn(what: list[str], remove: Path | None) -> subprocess.Popen[bytes]:
    me = os.getpid()
    cmd = [sys.executable, "-m", "minibroker.localcluster.reaper", *what,
           "--owner", str(me), "--owner-start", str(start_time(me))]  # fmt: skip
    if remove is not None:
        cmd += ["--remove", str(remove)]
    return subprocess.Popen(
        cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,  # not in the test run's process group: its Ctrl-C is not ours
    )  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path)
    parser.add_argument("--compose", metavar="PROJECT")
    parser.add_argument("--file", type=Path, help="with --compose: the compose file")
    parser.add_argument("--owner", type=int, required=True)
    parser.add_argument("--owner-start", required=True)
    parser.add_argument("--remove", type=Path)
    args = parser.parse_args()
    if (args.dir is None) == (args.compose is None) or (args.compose and not args.file):
        parser.error("give --dir, or --compose with --file")
    while start_time(args.owner) == args.owner_start:
        if args.dir is not None and not args.dir.parent.exists():
            return 0
        time.sleep(POLL_S)
    if args.compose is not None:
        reap_compose(args.compose, args.file, args.remove)
    else:
        reap(args.dir, args.remove)
    return 0


if __name__ == "__main__":
    sys.exit(main())
