"""Our processes by PID: launched detached (own session, one log file each), signalled only
after checking the PID still names the process we started (its start time), and reaped."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from minibroker.localcluster.state import ProcessInfo

# How long a SIGKILLed process may take to exit: a thread in an uninterruptible wait (an
# fsync on a busy disk) finishes it first, and the files close only after every thread is out.
EXIT_WAIT_S = 30.0


def proc_stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command's name (state first, start time at 19), or
    None if there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()


def start_time(pid: int) -> str:
    """When the process started (clock ticks since boot): with the PID, it names one process,
    never a later one given the same PID. "" if there is none."""
    fields = proc_stat(pid)
    return fields[19] if fields else ""


def _threads_left(pid: int) -> int:
    """How many of the process's threads are still there (the leader's zombie counts one)."""
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


def _reap(pid: int) -> None:
    # Collect our own exited children so they do not linger as zombies.
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _parent_pid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def _runs_our_command(info: ProcessInfo) -> bool:
    try:
        cmdline = Path(f"/proc/{info.pid}/cmdline").read_bytes()
    except OSError:
        return False
    if not cmdline:
        # Our child mid-exec: Popen returns once the exec closed its close-on-exec pipe, but
        # the kernel fills in the new image's arguments a little later (under load, long
        # enough for a start-up check to take the process for dead).
        return _parent_pid(info.pid) == os.getpid()
    return cmdline.rstrip(b"\0").split(b"\0") == [c.encode() for c in info.cmd]


def process_state(info: ProcessInfo) -> str:
    """ "running", "paused", or "dead" (exited, a zombie whose threads are all gone, or the PID
    now runs something else)."""
    if info.pid <= 0:
        return "dead"
    _reap(info.pid)
    fields = proc_stat(info.pid)
    if fields is None:
        return "dead"
    if info.start_time:
        if fields[19] != info.start_time:
            return "dead"  # the PID names a later process
    elif not _runs_our_command(info):
        return "dead"  # (a state file from before start times were kept)
    state = fields[0]
    if state in ("Z", "X"):
        # Exiting: the first thread out (often the leader, whose state this is) is a zombie
        # while another tears down the address space and only then closes the files, so its
        # listening sockets still accept connections and hold their ports (a restarted
        # broker's port seemed to accept before it registered: docs/notes.md, "Ports").
        # Dead once every other thread is gone.
        return "running" if _threads_left(info.pid) > 1 else "dead"
    return "paused" if state in ("T", "t") else "running"


def is_alive(info: ProcessInfo) -> bool:
    return process_state(info) != "dead"


def _signal(info: ProcessInfo, sig: signal.Signals) -> bool:
    """Send `sig` to the process if it is still ours; whether it was sent."""
    if not is_alive(info):
        return False
    try:
        os.kill(info.pid, sig)
    except ProcessLookupError:
        return False
    return True


def _wait_dead(infos: Sequence[ProcessInfo], timeout_s: float) -> list[ProcessInfo]:
    deadline = time.monotonic() + timeout_s
    alive = [p for p in infos if is_alive(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [p for p in alive if is_alive(p)]
    return alive


# ---- starting processes ---------------------------------------------------------------------


def _launch(info: ProcessInfo) -> None:
    Path(info.log_file).parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("MINIBROKER_PROFILE", None)
    with open(info.log_file, "ab") as log:
        proc = subprocess.Popen(
            info.cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=info.data_dir,
            env=env,
            start_new_session=True,  # survives the CLI; never gets the terminal's Ctrl-C
        )
    info.pid = proc.pid
    info.start_time = start_time(proc.pid)


def log_tail(info: ProcessInfo, lines: int = 15) -> str:
    try:
        text = Path(info.log_file).read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])
